"""The paper's claims (or a user's) as data, and a verdict for each from the study's results.

A claims file lists claims; each claim is one or more comparisons of a row against a reference row (the base by
default) on one metric, with the direction the claim expects (`higher`, `lower`), an equivalence margin (`same`) or
a non-inferiority margin (`no_worse`). `ablations.statistics.significance` tests every row against the base (and each
pair a claim names); this module reads those tests and turns them into verdicts:

- a difference comparison is *reproduced* when its interval excludes 0 on the expected side, *contradicted* when it
  excludes 0 on the other side, *inconclusive* otherwise;
- an equivalence comparison is *reproduced* when the whole interval lies inside +-margin (TOST), *contradicted* when
  it lies wholly outside, *inconclusive* when it straddles a bound;
- a non-inferiority comparison (`no_worse`) is *reproduced* when the interval's worse end is better than -margin (a
  large gain passes), *contradicted* when its better end is at -margin or worse, *inconclusive* otherwise;
- a claim is contradicted when any comparison is, reproduced when all are, inconclusive otherwise.

The interval is the one at the level the comparison is tested at: every claimed comparison of the study is one family
(`ablations.statistics.family`: Holm over all of them, whatever their metric, reference or kind), so the probability
of any wrong verdict among the study's claims is at most ALPHA.

Every comparison is tested at every training budget the study scored (T, and shorter ones such as T/2: branches of
the same runs, each annealed). It is reproduced or contradicted only when it is so at every budget; a verdict that
depends on how long the rows trained is inconclusive and says so ("budget-sensitive"). A budget at which a row of
the comparison diverged or was not trainable at this preset gives no verdict, nor does one whose seed noise
is unknown (one seed per row), nor does a study that was only a check of
the pipeline (study.json's `pipeline_check`). An inconclusive comparison says why, with the minimum detectable
effect of its test: an effect too small for the study, or a study too noisy to see the paper's own difference.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Literal

from ablate.ablations.statistics.budgets import budget_label
from ablate.ablations.statistics.claims import Claim, Comparison, Metric
from ablate.ablations.statistics.family import Sides, across_budgets, adjusted, decide, sides
from ablate.ablations.statistics.significance import ALPHA, RowTest

Verdict = Literal["reproduced", "contradicted", "inconclusive", "untested"]

Cause = Literal[
    "",
    "withheld",
    "excluded",
    "untested",
    "constant",
    "budget_sensitive",
    "budgets_disagree",
    "above_family_level",
    "too_noisy",
    "crosses_margin",
    "below_detectable",
    "not_significant",
    "design_open",
    "design_stopped",
]
"""Why a comparison is inconclusive, as a field (its `reason` says it in words, with the numbers): a study or row
that gives no verdict (`withheld`, `excluded`), no trials to compare (`untested`), every score the same
(`constant`), budgets that decide differently (`budget_sensitive`) or whose own p disagree (`budgets_disagree`), a
decision at 0.05 that the family's level does not reach (`above_family_level`), a test that cannot see the paper's
difference or an equivalence margin (`too_noisy`), an interval that crosses the margin (`crosses_margin`), an effect
below the detectable one (`below_detectable`), one above it that the family does not decide (`not_significant`);
under the sequential design, a row still open (`design_open`) or stopped undecided (`design_stopped`). '' when it is
not inconclusive, or when nothing explains it."""


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
    sides: Sides | None = None
    """The test's two p-values, reproduced and contradicted (`ablations.statistics.family.sides`)."""


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
    the test detects, ...), in words; '' when it is not, or when nothing was tested."""
    cause: Cause = ""
    """The same as a field, for code to branch on (never the words of `reason`)."""
    higher_is_better: bool
    """The metric's direction (its `Metric`), kept so that a look can judge the comparison again at its own level
    (`ablations.statistics.sequential.walk`)."""
    advice: str = ""
    """For a comparison too noisy to see the paper's own difference: the seeds it would need at 80% power and what
    they would cost (`reports.table`, from the rows' measured trial times); '' otherwise."""
    sides: Sides | None = None
    """Its two p-values over every budget (the intersection-union test, `ablations.statistics.family.across_budgets`);
    None when it is not in the study's family (excluded, untested, no seed noise, or the study gives no verdict)."""
    level: float | None = None
    """The level it was tested at in the study's family (its share of the truncated Holm, passed on by the comparisons
    decided)."""
    p_family: float | None = None
    """Its p, adjusted over the study's family (truncated Holm, `ablations.statistics.family.adjusted`): the verdict
    is decided when it is below ALPHA."""
    family: int = 0
    """How many comparisons the family holds."""
    withheld: bool = False
    """The study gives no verdict at all (a pipeline check, or a base that learnt nothing): no seed can decide it."""

    @property
    def test(self) -> RowTest | None:
        """The test at the full budget T."""
        return self.budgets[-1].test if self.budgets else None

    @property
    def family_level(self) -> float | None:
        """The level the family first holds it to (Holm's first step: ALPHA over the family); None outside it."""
        return ALPHA / self.family if self.sides is not None and self.family else None

    @property
    def detectable(self) -> float | None:
        """The design's power for this claim as an effect: the smallest |difference| its tests find four times in
        five at every budget, at `family_level`, with the seeds it ran (a difference claim; None otherwise)."""
        level = self.family_level
        if level is None or self.comparison.expect in ("same", "no_worse"):
            return None
        found = [b.test.detectable(level) if b.test is not None else None for b in self.budgets]
        return None if not found or None in found else max(f for f in found if f is not None)

    @property
    def power(self) -> float | None:
        """The design's power for this claim at the paper's difference: the chance, were `paper_delta` the truth at
        this scale, that its least likely budget's test finds it at `family_level` with the seeds it ran (an upper
        bound on reproducing it, which takes every budget). None without the paper's difference in the claim's
        direction, or for `same` and `no_worse`."""
        level, delta, expect = self.family_level, self.paper_delta, self.comparison.expect
        if level is None or delta is None or expect not in ("higher", "lower") or (delta > 0) != (expect == "higher"):
            return None
        found = [b.test.power(delta, level) if b.test is not None else None for b in self.budgets]
        return None if not found or None in found else min(f for f in found if f is not None)


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


def comparison_verdict(
    comparison: Comparison, test: RowTest | None, higher_is_better: bool, level: float = ALPHA
) -> Verdict:
    """The verdict of one comparison from its test at one budget, at `level` (see the module docstring);
    `higher_is_better`, the metric's direction, says which end of the interval is worse for `no_worse`."""
    if test is None or test.effect is None:
        return "untested"
    found = sides(comparison, test, higher_is_better)
    return (found.at(level) if found is not None else None) or "inconclusive"


def _worse_and_better_ends(test: RowTest, higher_is_better: bool) -> tuple[float, float]:
    """The interval's ends in the direction of better (PPL flipped): (worse end, better end); 0 is no difference."""
    lo, hi = test.ci
    return (lo, hi) if higher_is_better else (-hi, -lo)


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
    metrics: Mapping[str, Metric],
    excluded: dict[float, dict[str, str]] | None = None,
    withheld: str | None = None,
) -> list[ClaimVerdict]:
    """Verdicts for claims from the row tests at each budget (fraction of T -> tests). `metrics`: each metric a
    claim names (its direction, label and decimals); `excluded`: fraction -> row -> why that row gives no verdict at
    that budget ('diverged', 'not trainable at this preset (...)'); `withheld`: why the study gives no verdict at all
    (study.json's pipeline_check), else None."""
    paper = paper or {}
    excluded = excluded or {}
    found = [
        [_tested(comp, comp.against or base or "", tests, paper, metrics[comp.metric], excluded, withheld)
         for comp in claim.compare]
        for claim in claims
    ]  # fmt: skip
    family = {(i, j): cv.sides for i, parts in enumerate(found) for j, cv in enumerate(parts) if cv.sides is not None}
    decided, p_family = decide(family), adjusted(family)
    out = []
    for i, (claim, parts) in enumerate(zip(claims, found, strict=True)):
        judged = []
        for j, cv in enumerate(parts):
            at = decided[(i, j)].level if (i, j) in decided else ALPHA
            budgets = tuple(_at_level(b, cv.comparison, at, cv.higher_is_better) for b in cv.budgets)
            verdict, cause, reason = _across_budgets(
                cv.comparison, budgets, cv.paper_delta, withheld, metrics[cv.comparison.metric], len(family)
            )
            judged.append(
                replace(
                    cv,
                    verdict=verdict,
                    reason=reason,
                    cause=cause,
                    budgets=budgets,
                    level=at if (i, j) in decided else None,
                    p_family=p_family.get((i, j)),
                    family=len(family),
                )
            )
        out.append(
            ClaimVerdict(claim=claim, verdict=claim_verdict([p.verdict for p in judged]), comparisons=tuple(judged))
        )
    return out


def _tested(
    comp: Comparison,
    against: str,
    tests: dict[float, Tests],
    paper: dict[str, dict[str, float | None]],
    metric: Metric,
    excluded: dict[float, dict[str, str]],
    withheld: str | None,
) -> ComparisonVerdict:
    """One comparison at every budget, before the study's family decides it: its two p-values over the budgets
    when every budget tested it (None when a row is excluded, untested or the study gives no verdict)."""
    budgets = tuple(
        _at_budget(comp, against, fraction, tests[fraction], excluded.get(fraction, {}), metric)
        for fraction in sorted(tests)
    )
    mine, theirs = paper.get(comp.row, {}).get(comp.metric), paper.get(against, {}).get(comp.metric)
    tested = not withheld and all(not b.excluded and b.sides is not None for b in budgets)
    return ComparisonVerdict(
        comparison=comp,
        verdict="inconclusive",
        budgets=budgets,
        paper_delta=mine - theirs if mine is not None and theirs is not None else None,
        higher_is_better=metric.higher_is_better,
        sides=across_budgets([b.sides for b in budgets]) if tested else None,
        withheld=bool(withheld),
    )


def _at_level(budget: BudgetVerdict, comp: Comparison, level: float, higher_is_better: bool) -> BudgetVerdict:
    """The budget's verdict at the level its comparison was tested at in the family."""
    if budget.test is None or budget.test.effect is None:
        return budget
    verdict = comparison_verdict(comp, budget.test, higher_is_better, level)
    if budget.excluded and verdict in ("reproduced", "contradicted"):
        verdict = "inconclusive"
    return replace(budget, verdict=verdict)


def _at_budget(
    comp: Comparison, against: str, fraction: float, tests: Tests, excluded: dict[str, str], metric: Metric
) -> BudgetVerdict:
    """The comparison at one budget: its test's verdict, unless a row of it gives none there."""
    test = tests.get((comp.row, against, comp.metric))
    verdict = comparison_verdict(comp, test, metric.higher_is_better)
    found = sides(comp, test, metric.higher_is_better)
    why = tuple(f"{name} {excluded[name]}" for name in dict.fromkeys((comp.row, against)) if name in excluded)
    if test is not None and test.effect is not None and test.se_seeds is None:
        # Sentence noise alone would judge a single training run as if it were the row: no verdict without seeds.
        why = (*why, "seed noise not estimated (no row has two complete seeds yet: run --seeds 2 or more)")
    if why and verdict in ("reproduced", "contradicted"):
        verdict = "inconclusive"
    return BudgetVerdict(fraction=fraction, verdict=verdict, test=test, excluded=why, sides=found)


def _across_budgets(
    comp: Comparison,
    budgets: tuple[BudgetVerdict, ...],
    paper_delta: float | None,
    withheld: str | None,
    metric: Metric,
    family: int,
) -> tuple[Verdict, Cause, str]:
    """The comparison's verdict over every budget, and why it is inconclusive (as a `Cause` and in words): decisive
    only when every budget says the same."""
    verdicts = {b.verdict for b in budgets}
    if verdicts == {"untested"}:
        return "untested", "", ""
    if withheld:  # said once, at the top of the report (`reports.legend.headline`), not in every comparison
        return "inconclusive", "withheld", "no verdict: the study gives none (see the top)"
    if excluded := list(dict.fromkeys(why for b in budgets for why in b.excluded)):
        return "inconclusive", "excluded", f"no verdict: {'; '.join(excluded)}"
    if untested := [budget_label(b.fraction) for b in budgets if b.verdict == "untested"]:
        return "inconclusive", "untested", f"no complete trials to compare at {', '.join(untested)}"
    if still := [budget_label(b.fraction) for b in budgets if b.test is not None and b.test.se == 0]:
        return (
            "inconclusive",
            "constant",
            f"nothing to test: every seed and sentence of both rows scored the same at {', '.join(still)}",
        )
    if len(verdicts) == 1 and verdicts <= {"reproduced", "contradicted"}:
        return budgets[0].verdict, "", ""
    if verdicts & {"reproduced", "contradicted"}:
        by = ", ".join(f"{b.verdict} at {budget_label(b.fraction)}" for b in budgets)
        return "inconclusive", "budget_sensitive", f"budget-sensitive: {by}"
    nominal, said = _nominal(budgets, family)
    undetected, why = _undetected(comp, budgets[-1].test, paper_delta, metric, family, decisive=bool(said))
    cause: Cause = nominal if said else undetected
    return "inconclusive", cause, "; ".join(text for text in (said, why) if text)


def _nominal(budgets: tuple[BudgetVerdict, ...], family: int) -> tuple[Cause, str]:
    """Why a comparison that a budget's own p (at ALPHA, as the report prints it) would decide is inconclusive: the
    other budgets disagree ('T/2 disagrees: inconclusive there'), or every budget agrees but not at the level the
    study's family holds it to. ('', '') when no budget's p alone decides it."""
    ways = [b.sides.at(ALPHA) if b.sides is not None else None for b in budgets]
    decisive = {w for w in ways if w is not None}
    if len(decisive) != 1:
        return "", ""  # none (an effect too small for the test), or both ways (the budgets disagree at 0.05)
    way = decisive.pop()
    labels = [budget_label(b.fraction) for b in budgets]
    others = [(label, w) for label, w in zip(labels, ways, strict=True) if w != way]
    if others:
        agree = ", ".join(label for label, w in zip(labels, ways, strict=True) if w == way)
        said = ", ".join(f"{w or 'inconclusive'} at {label}" for label, w in others)
        verb = "disagrees" if len(others) == 1 else "disagree"
        disagreeing = ", ".join(label for label, _ in others)
        return "budgets_disagree", f"{disagreeing} {verb}: {way} at {agree} by its own p, {said}"
    every = "by each budget's own p" if len(budgets) > 1 else "by its own p"
    return (
        "above_family_level",
        f"above the family's level: {way} {every} at {ALPHA:g}, not at the level its family of {family} holds it to",
    )


def _undetected(
    comp: Comparison, test: RowTest | None, paper_delta: float | None, spec: Metric, family: int, *, decisive: bool
) -> tuple[Cause, str]:
    """Why a test at the full budget found nothing, told with its minimum detectable effect; `decisive`: a budget's
    own p decides it (`_nominal` says why it is inconclusive: its 95% interval does not cross an equivalence
    margin)."""
    mde = test.detectable(ALPHA / max(family, 1)) if test is not None else None  # at the family's level
    if test is None or test.effect is None or mde is None:
        return "", ""
    detectable = f"{mde:.{spec.digits}f} {spec.label}"
    if comp.expect in ("same", "no_worse"):
        margin = f"±{comp.margin:g}" if comp.expect == "same" else f"of {comp.margin:g} (no worse)"
        if mde >= (comp.margin or 0.0):
            return "too_noisy", f"too noisy to tell (detectable: {detectable}, wider than the margin {margin})"
        if decisive:
            return "", ""
        return "crosses_margin", f"the interval crosses the margin {margin} (detectable: {detectable})"
    if paper_delta is not None and mde > abs(paper_delta):
        return "too_noisy", f"too noisy to tell (detectable: {detectable})"
    if abs(test.effect) < mde:
        return "below_detectable", f"|effect| below the detectable {detectable}"
    return (
        "not_significant",
        f"not significant over the study's {family} claimed comparisons (Holm; detectable: {detectable})",
    )


__all__ = [
    "BudgetVerdict",
    "Cause",
    "ClaimVerdict",
    "ComparisonVerdict",
    "Tests",
    "Verdict",
    "claim_verdict",
    "comparison_verdict",
    "judge",
]
