"""The paper's claims (or a user's) as data, and a verdict for each from the study's results.

A claims file lists claims; each claim is one or more comparisons of a row against a reference row (the base by
default) on one metric, with the direction the claim expects (`higher`, `lower`), an equivalence margin (`same`) or
a non-inferiority margin (`no_worse`). `ablations.statistics.significance` tests every row against the base (and each pair a claim
names); this module reads those tests and turns them into verdicts:

- a difference comparison is *reproduced* when the Holm-corrected p-value is below ALPHA and the difference has the
  expected sign, *contradicted* when it is below ALPHA with the other sign, *inconclusive* otherwise;
- an equivalence comparison is *reproduced* when the whole 95% confidence interval lies inside +-margin,
  *contradicted* when it lies wholly outside, *inconclusive* when it straddles a bound;
- a non-inferiority comparison (`no_worse`) is *reproduced* when the interval's worse end is better than -margin (a
  large gain passes), *contradicted* when its better end is at -margin or worse, *inconclusive* otherwise;
- a claim is contradicted when any comparison is, reproduced when all are, inconclusive otherwise.

Every comparison is tested at every training budget the study scored (T, and shorter ones such as T/2: branches of
the same runs, each annealed). It is reproduced or contradicted only when it is so at every budget; a verdict that
depends on how long the rows trained is inconclusive and says so ("budget-sensitive"). A budget at which a row of
the comparison diverged or was not trainable at this preset gives no verdict, nor does one whose seed noise
is unknown (one seed per row), nor does a study that was only a check of
the pipeline (study.json's `pipeline_check`). An inconclusive comparison says why, with the minimum detectable
effect of its test: an effect too small for the study, or a study too noisy to see the paper's own difference.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ablate.ablations.results.record import budget_label
from ablate.ablations.results.scores import system_scores
from ablate.ablations.statistics.convergence import SOURCE_RATIO_MIN, row_convergence, source_ratio, trainable_threshold
from ablate.ablations.statistics.significance import ALPHA, METRICS, N_SAMPLES, RowTest, compare_rows
from ablate.ablations.study.claims import Claim, Comparison, parse_claims

Verdict = Literal["reproduced", "contradicted", "inconclusive", "untested"]


@dataclass(frozen=True, kw_only=True)
class BudgetVerdict:
    """One comparison at one training budget."""

    fraction: float
    """The budget, as a fraction of T (train.max_steps)."""
    verdict: Verdict
    """What the test at this budget says, or 'inconclusive' when `excluded`."""
    test: RowTest | None
    """The test at this budget (None when a row has no complete trial)."""
    excluded: tuple[str, ...] = ()
    """Why this budget gives no verdict whatever its test says ('A1 not trainable at this preset (...)')."""


@dataclass(frozen=True, kw_only=True)
class ComparisonVerdict:
    comparison: Comparison
    verdict: Verdict
    budgets: tuple[BudgetVerdict, ...]
    """The comparison at each budget, shortest first: the last is the full budget T."""
    paper_delta: float | None = None
    """The paper's difference for the same comparison, where it gives both numbers."""
    reason: str = ""
    """Why the verdict is inconclusive (no verdict for a row or the study, budget-sensitive, an effect below what
    the test detects, ...); '' when it is not, or when nothing was tested."""
    advice: str = ""
    """For a comparison too noisy to see the paper's own difference: the seeds it would need at 80% power and what
    they would cost (`reports.table`, from the rows' measured trial times); '' otherwise."""

    @property
    def test(self) -> RowTest | None:
        """The test at the full budget T."""
        return self.budgets[-1].test if self.budgets else None


@dataclass(frozen=True, kw_only=True)
class ClaimVerdict:
    claim: Claim
    verdict: Verdict
    comparisons: tuple[ComparisonVerdict, ...]

    @property
    def summary(self) -> str:
        """'2/3 reproduced, 1 inconclusive' style count of the comparisons."""
        counts: dict[str, int] = {}
        for c in self.comparisons:
            counts[c.verdict] = counts.get(c.verdict, 0) + 1
        n = len(self.comparisons)
        return ", ".join(f"{k} {v}/{n}" for k, v in counts.items())


# --- verdicts -----------------------------------------------------------------------------------------------------


def comparison_verdict(comparison: Comparison, test: RowTest | None) -> Verdict:
    """The verdict of one comparison from its test at one budget (see the module docstring)."""
    if test is None or test.effect is None:
        return "untested"
    if comparison.expect == "same":
        margin = comparison.margin or 0.0
        lo, hi = test.ci
        if -margin < lo and hi < margin:
            return "reproduced"
        if lo >= margin or hi <= -margin:
            return "contradicted"
        return "inconclusive"
    if comparison.expect == "no_worse":  # non-inferiority: the interval's worse end inside the margin
        margin = comparison.margin or 0.0
        worse, better = _worse_and_better_ends(comparison, test)
        if worse > -margin:
            return "reproduced"
        if better <= -margin:
            return "contradicted"
        return "inconclusive"
    if test.p_holm is None or test.p_holm >= ALPHA:
        return "inconclusive"
    agrees = test.effect > 0 if comparison.expect == "higher" else test.effect < 0
    return "reproduced" if agrees else "contradicted"


def _worse_and_better_ends(comparison: Comparison, test: RowTest) -> tuple[float, float]:
    """The interval's ends in the direction of better (PPL flipped): (worse end, better end); 0 is no difference."""
    lo, hi = test.ci
    return (lo, hi) if METRICS[comparison.metric].higher_is_better else (-hi, -lo)


def claim_verdict(verdicts: list[Verdict]) -> Verdict:
    if "contradicted" in verdicts:
        return "contradicted"
    if verdicts and all(v == "reproduced" for v in verdicts):
        return "reproduced"
    if verdicts and all(v == "untested" for v in verdicts):
        return "untested"
    return "inconclusive"


Tests = dict[tuple[str, str, str], RowTest]
"""Row tests keyed (row, reference, metric), as `ablations.statistics.significance.compare_rows` returns them."""


def judge(
    claims: list[Claim],
    tests: dict[float, Tests],
    base: str | None,
    paper: dict[str, dict[str, float | None]] | None = None,
    *,
    excluded: dict[float, dict[str, str]] | None = None,
    withheld: str | None = None,
) -> list[ClaimVerdict]:
    """Verdicts for claims from the row tests at each budget (fraction of T -> tests). `excluded`: fraction -> row
    -> why that row gives no verdict at that budget ('diverged', 'not trainable at this preset (...)');
    `withheld`: why the study gives no verdict at all (study.json's pipeline_check), else None."""
    paper = paper or {}
    excluded = excluded or {}
    out = []
    for claim in claims:
        parts = []
        for comp in claim.compare:
            against = comp.against or base or ""
            budgets = tuple(
                _at_budget(comp, against, fraction, tests[fraction], excluded.get(fraction, {}))
                for fraction in sorted(tests)
            )
            mine, theirs = paper.get(comp.row, {}).get(comp.metric), paper.get(against, {}).get(comp.metric)
            paper_delta = mine - theirs if mine is not None and theirs is not None else None
            verdict, reason = _across_budgets(comp, budgets, paper_delta, withheld)
            parts.append(
                ComparisonVerdict(
                    comparison=comp, verdict=verdict, budgets=budgets, paper_delta=paper_delta, reason=reason
                )
            )
        out.append(
            ClaimVerdict(claim=claim, verdict=claim_verdict([p.verdict for p in parts]), comparisons=tuple(parts))
        )
    return out


def _at_budget(
    comp: Comparison, against: str, fraction: float, tests: Tests, excluded: dict[str, str]
) -> BudgetVerdict:
    """The comparison at one budget: its test's verdict, unless a row of it gives none there."""
    test = tests.get((comp.row, against, comp.metric))
    verdict = comparison_verdict(comp, test)
    why = tuple(f"{name} {excluded[name]}" for name in dict.fromkeys((comp.row, against)) if name in excluded)
    if test is not None and test.effect is not None and test.se_seeds is None:
        # Sentence noise alone would judge a single training run as if it were the row: no verdict without seeds.
        why = (*why, "seed noise not estimated (no row has two complete seeds yet: run --seeds 2 or more)")
    if why and verdict in ("reproduced", "contradicted"):
        verdict = "inconclusive"
    return BudgetVerdict(fraction=fraction, verdict=verdict, test=test, excluded=why)


def _across_budgets(
    comp: Comparison, budgets: tuple[BudgetVerdict, ...], paper_delta: float | None, withheld: str | None
) -> tuple[Verdict, str]:
    """The comparison's verdict over every budget, and why it is inconclusive: decisive only when every budget
    says the same."""
    verdicts = {b.verdict for b in budgets}
    if verdicts == {"untested"}:
        return "untested", ""
    if withheld:  # said once, at the top of the report (`reports.legend.headline`), not in every comparison
        return "inconclusive", "no verdict: the study gives none (see the top)"
    if excluded := list(dict.fromkeys(why for b in budgets for why in b.excluded)):
        return "inconclusive", f"no verdict: {'; '.join(excluded)}"
    if untested := [budget_label(b.fraction) for b in budgets if b.verdict == "untested"]:
        return "inconclusive", f"no complete trials to compare at {', '.join(untested)}"
    if len(verdicts) == 1 and verdicts <= {"reproduced", "contradicted"}:
        return budgets[0].verdict, ""
    if verdicts & {"reproduced", "contradicted"}:
        by = ", ".join(f"{b.verdict} at {budget_label(b.fraction)}" for b in budgets)
        return "inconclusive", f"budget-sensitive: {by}"
    return "inconclusive", _undetected(comp, budgets[-1].test, paper_delta)


def _undetected(comp: Comparison, test: RowTest | None, paper_delta: float | None) -> str:
    """Why a test at the full budget found nothing, told with its minimum detectable effect."""
    mde = test.mde if test is not None else None
    if test is None or test.effect is None or mde is None:
        return ""
    spec = METRICS[comp.metric]
    detectable = f"{mde:.{spec.digits}f} {spec.label}"
    if comp.expect in ("same", "no_worse"):
        margin = f"±{comp.margin:g}" if comp.expect == "same" else f"of {comp.margin:g} (no worse)"
        if mde >= (comp.margin or 0.0):
            return f"too noisy to tell (detectable: {detectable}, wider than the margin {margin})"
        return f"the interval crosses the margin {margin} (detectable: {detectable})"
    if paper_delta is not None and mde > abs(paper_delta):
        return f"too noisy to tell (detectable: {detectable})"
    if abs(test.effect) < mde:
        return f"|effect| below the detectable {detectable}"
    return f"not significant after Holm's correction (detectable: {detectable})"


# --- a study's verdicts, from its results ------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class Evidence:
    """A study's claims judged on its results (`study_verdicts`), and what the verdicts rest on."""

    tests: dict[float, Tests]
    """Budget (fraction of T) -> every row against the base on every metric, and each (row, reference) pair a
    claim names with `against`."""
    excluded: dict[float, dict[str, str]]
    """Budget -> row -> why the row gives no verdict there (diverged, or not trainable at this preset)."""
    untrainable: dict[str, dict[float, str]]
    """Row -> budget -> the measured cause, where this preset did not train the row (below `trainable_threshold`
    of the base's source use)."""
    nothing_learned: str | None
    """Set when the base itself did not learn to translate: then no claim gets a verdict."""
    withheld: str | None
    """Why no claim gets a verdict (study.json's pipeline_check, else `nothing_learned`), else None."""
    claims: list[ClaimVerdict]
    """A verdict for each claim."""


def study_verdicts(
    results,
    claims: list[Claim] | None = None,
    *,
    n_samples: int = N_SAMPLES,
    paper: dict[str, dict[str, float | None]] | None = None,
) -> Evidence | None:
    """The claims (`claims`, else those study.json carries) judged on `results` (`ablations.results.load.StudyResults`)
    at every budget, as the report and the sequential design's looks both read them; `paper`: the paper's numbers by
    row, for each comparison's paper difference. None when the study has no base row with a complete trial."""
    base = results.base
    if base is None or not results.records(base.name):
        return None
    names = [spec.name for spec in results.rows]
    ratios = {name: source_ratios(results, name) for name in names}
    withheld = results.meta.get("pipeline_check") or None
    nothing_learned = _nothing_learned(base.name, ratios[base.name])
    untrainable = {} if nothing_learned else _untrainable(base.name, ratios)
    judged = claims if claims is not None else study_claims(results)
    claimed = [(c.row, c.against) for claim in judged for c in claim.compare if c.against]
    tests = {f: _row_tests(results.at_budget(f), names, base.name, n_samples, claimed) for f in results.fractions}
    excluded = _excluded(results, untrainable)
    withheld = withheld or nothing_learned
    verdicts = judge(judged, tests, base.name, paper, excluded=excluded, withheld=withheld)
    return Evidence(tests=tests, excluded=excluded, untrainable=untrainable, nothing_learned=nothing_learned,
                    withheld=withheld, claims=verdicts)  # fmt: skip


def study_claims(results) -> list[Claim]:
    """The claims study.json carries (checked when the sweep started), as Claim objects."""
    raw = results.meta.get("claims")
    if not raw:
        return []
    return parse_claims(raw, str(results.out_dir / "study.json"))


def _row_tests(results, names: list[str], base: str, n_samples: int, claimed: list[tuple[str, str]]) -> Tests:
    """Every row against the base on every metric, and each (row, reference) pair a claim names with `against`
    (the modern study's components against the `paper` row), counting seed and sentence noise; Holm-corrected per
    metric over the pairs that share a reference (`stats.compare_rows`)."""
    pairs = [(name, base) for name in names if name != base]
    known = set(names)
    pairs += [p for p in dict.fromkeys(claimed) if p not in pairs and p[0] != p[1] and set(p) <= known]
    tests: Tests = {}
    for metric in METRICS:
        systems = {
            name: [s for s in (system_scores(rec, metric) for rec in results.records(name)) if s is not None]
            for name in names
        }
        tests.update(compare_rows(systems, pairs, metric, n_samples=n_samples))
    return tests


def source_ratios(results, name: str) -> dict[float, float]:
    """Budget -> the row's lowest source_ppl_ratio over its complete seeds, where the records give one."""
    ratios = {f: source_ratio(results.at_budget(f).records(name)) for f in results.fractions}
    return {f: ratio for f, ratio in ratios.items() if ratio is not None}


def _nothing_learned(base: str, ratios: dict[float, float]) -> str | None:
    """Why no verdict at all when the base is below SOURCE_RATIO_MIN at some budget: the study learnt nothing."""
    bad = {f: ratio for f, ratio in ratios.items() if ratio < SOURCE_RATIO_MIN}
    if not bad:
        return None
    where = ", ".join(f"×{ratio:.1f} at {budget_label(f)}" for f, ratio in sorted(bad.items()))
    return (
        f"nothing here learnt to translate: the base '{base}' predicts its targets about as well from "
        f"another sentence's source (dev PPL {where} with swapped sources; a translator is far above "
        f"{SOURCE_RATIO_MIN:g}), so no claim gets a verdict. Try more steps (train.max_steps), more data, or a "
        "longer warmup (train.warmup_steps), calibrated on the base row alone"
    )


def _untrainable(base: str, ratios: dict[str, dict[float, float]]) -> dict[str, dict[float, str]]:
    """Row -> budget -> why this preset did not train the row there: its source use below `trainable_threshold` of
    the base's (it never left the language-model plateau), with the measured cause."""
    out: dict[str, dict[float, str]] = {}
    for name, by_budget in ratios.items():
        if name == base:
            continue
        for fraction, ratio in sorted(by_budget.items()):
            base_ratio = ratios[base].get(fraction)
            if base_ratio is None or ratio >= (threshold := trainable_threshold(base_ratio)):
                continue
            out.setdefault(name, {})[fraction] = (
                f"stayed on the language-model plateau at {budget_label(fraction)}: dev PPL ×{ratio:.1f} with "
                f"swapped sources against the base's ×{base_ratio:.1f} (trained: ×{threshold:.1f} or more)"
            )
    return out


def _excluded(results, untrainable: dict[str, dict[float, str]]) -> dict[float, dict[str, str]]:
    """Budget -> row -> why the row gives no verdict there: it diverged (every budget), or this preset did not train
    it at that budget (`untrainable`)."""
    out: dict[float, dict[str, str]] = {f: {} for f in results.fractions}
    for spec in results.rows:
        convergence = row_convergence(results.records(spec.name, state=None))
        if convergence is not None and convergence.state == "diverged":
            for fraction in results.fractions:
                out[fraction][spec.name] = "diverged"
        for fraction, cause in untrainable.get(spec.name, {}).items():
            out.setdefault(fraction, {}).setdefault(spec.name, f"not trainable at this preset ({cause})")
    return out


__all__ = [
    "BudgetVerdict",
    "ClaimVerdict",
    "ComparisonVerdict",
    "Evidence",
    "Tests",
    "Verdict",
    "claim_verdict",
    "comparison_verdict",
    "judge",
    "source_ratios",
    "study_claims",
    "study_verdicts",
]
