"""The paper's claims (or a user's) as data, and a verdict for each from the study's results.

A claims file lists claims; each claim is one or more comparisons of a row against a reference row (the base by
default) on one metric, with the direction the claim expects (`higher`, `lower`) or an equivalence margin (`same`).
`reports.stats` tests every row against the base; this module reads those tests and turns them into verdicts:

- a difference comparison is *reproduced* when the Holm-corrected p-value is below ALPHA and the difference has the
  expected sign, *contradicted* when it is below ALPHA with the other sign, *inconclusive* otherwise;
- an equivalence comparison is *reproduced* when the whole 95% confidence interval lies inside +-margin,
  *contradicted* when it lies wholly outside, *inconclusive* when it straddles a bound;
- a claim is contradicted when any comparison is, reproduced when all are, inconclusive otherwise.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import yaml

from data.errors import AblateError
from reports.stats import ALPHA, METRICS, RowTest

Expect = Literal["higher", "lower", "same"]
Verdict = Literal["reproduced", "contradicted", "inconclusive", "untested"]
EXPECTS = ("higher", "lower", "same")
CLAIM_KEYS = {"id", "text", "section", "compare"}
COMPARE_KEYS = {"row", "metric", "expect", "against", "margin"}


@dataclass(frozen=True, kw_only=True)
class Comparison:
    """One testable statement: `row`'s `metric` is higher / lower than `against`'s, or the same within `margin`."""

    row: str
    metric: str
    """'bleu', 'chrf' or 'ppl' (see reports.stats.METRICS)."""
    expect: Expect
    against: str | None = None
    """Reference row; None: the study's base."""
    margin: float | None = None
    """Equivalence margin in the metric's units (expect: same only)."""


@dataclass(frozen=True, kw_only=True)
class Claim:
    """A claim of the paper (or of the user) and the comparisons that test it."""

    id: str
    text: str
    section: str = ""
    compare: tuple[Comparison, ...]


@dataclass(frozen=True, kw_only=True)
class ComparisonVerdict:
    comparison: Comparison
    verdict: Verdict
    test: RowTest | None
    """The test behind the verdict (None when a row has no complete trial)."""
    paper_delta: float | None = None
    """The paper's difference for the same comparison, where it gives both numbers."""
    unconverged: tuple[str, ...] = ()
    """Rows of the comparison that did not reach their plateau: the verdict is then 'inconclusive'."""


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


# --- loading ------------------------------------------------------------------------------------------------------


def load_claims(path: str | Path, rows: list[str] | None = None, base: str | None = None) -> list[Claim]:
    """Read and check a claims file; AblateError naming the file and claim on any problem."""
    path = Path(path)
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise AblateError(f"{path}: no such claims file") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark is not None else ""
        raise AblateError(f"{path}:{where} not valid YAML: fix the file") from None
    return parse_claims(raw, str(path), rows, base)


def parse_claims(raw: Any, source: str, rows: list[str] | None = None, base: str | None = None) -> list[Claim]:
    """Claims from parsed YAML (`{claims: [...]}` or the list itself). With `rows`, every row named must exist."""
    items = raw.get("claims") if isinstance(raw, dict) else raw
    if not isinstance(items, list) or not items:
        raise AblateError(
            f"{source}: expected 'claims:' with a list of claims (see ablations/studies/table3.claims.yaml)"
        )
    claims, seen = [], set()
    for i, item in enumerate(items):
        where = f"{source}: claim {i + 1}"
        if not isinstance(item, dict):
            raise AblateError(f"{where}: expected a mapping with id, text and compare")
        if unknown := sorted(set(item) - CLAIM_KEYS):
            raise AblateError(f"{where}: unknown key '{unknown[0]}'; a claim has {', '.join(sorted(CLAIM_KEYS))}")
        claim_id = str(item.get("id") or f"claim-{i + 1}")
        where = f"{source}: claim '{claim_id}'"
        if claim_id in seen:
            raise AblateError(f"{where}: the id is used twice; give each claim its own id")
        seen.add(claim_id)
        compare = item.get("compare")
        if not isinstance(compare, list) or not compare:
            raise AblateError(f"{where}: 'compare' must be a non-empty list of {{row, metric, expect}}")
        claims.append(
            Claim(
                id=claim_id,
                text=str(item.get("text") or claim_id),
                section=str(item.get("section") or ""),
                compare=tuple(
                    _comparison(c, f"{where}, comparison {j + 1}", rows, base) for j, c in enumerate(compare)
                ),
            )
        )
    return claims


def _comparison(raw: Any, where: str, rows: list[str] | None, base: str | None) -> Comparison:
    if not isinstance(raw, dict):
        raise AblateError(f"{where}: expected a mapping like {{row: A1, metric: bleu, expect: lower}}")
    if unknown := sorted(set(raw) - COMPARE_KEYS):
        raise AblateError(f"{where}: unknown key '{unknown[0]}'; use {', '.join(sorted(COMPARE_KEYS))}")
    metric, expect = str(raw.get("metric", "")).lower(), raw.get("expect")
    if metric not in METRICS:
        raise AblateError(f"{where}: unknown metric '{raw.get('metric')}'; choose one of {', '.join(METRICS)}")
    if expect not in EXPECTS:
        raise AblateError(f"{where}: expect must be one of {', '.join(EXPECTS)}, got {expect!r}")
    margin = raw.get("margin")
    if expect == "same" and not (isinstance(margin, int | float) and margin > 0):
        raise AblateError(f"{where}: expect: same needs a positive 'margin' in {metric} units, e.g. margin: 1.0")
    if expect != "same" and margin is not None:
        raise AblateError(f"{where}: 'margin' only applies to expect: same")
    against = raw.get("against")
    if against is None and rows is not None and base is None:
        raise AblateError(f"{where}: the study has no base row: name the reference row with 'against'")
    for name in (raw.get("row"), against):
        if name is None and name is against:
            continue
        if not isinstance(name, str) or (rows is not None and name not in rows):
            known = ", ".join(rows or [])
            raise AblateError(f"{where}: unknown row {name!r}; the study's rows are {known}")
    return Comparison(
        row=raw["row"],
        metric=metric,
        expect=expect,
        against=against if against != base else None,
        margin=float(margin) if margin is not None else None,
    )


def claims_to_data(claims: list[Claim]) -> list[dict[str, Any]]:
    """Claims as plain data (what study.json stores, so reports need no claims file)."""
    return [
        {
            "id": c.id,
            "text": c.text,
            "section": c.section,
            "compare": [{k: v for k, v in vars(x).items() if v is not None} for x in c.compare],
        }
        for c in claims
    ]


# --- verdicts -----------------------------------------------------------------------------------------------------


def comparison_verdict(comparison: Comparison, test: RowTest | None) -> Verdict:
    """The verdict of one comparison from its test (see the module docstring)."""
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
    if test.p_holm is None or test.p_holm >= ALPHA:
        return "inconclusive"
    agrees = test.effect > 0 if comparison.expect == "higher" else test.effect < 0
    return "reproduced" if agrees else "contradicted"


def claim_verdict(verdicts: list[Verdict]) -> Verdict:
    if "contradicted" in verdicts:
        return "contradicted"
    if verdicts and all(v == "reproduced" for v in verdicts):
        return "reproduced"
    if verdicts and all(v == "untested" for v in verdicts):
        return "untested"
    return "inconclusive"


def judge(
    claims: list[Claim],
    tests: dict[tuple[str, str, str], RowTest],
    base: str | None,
    paper: dict[str, dict[str, float | None]] | None = None,
    unconverged: set[str] | frozenset[str] = frozenset(),
) -> list[ClaimVerdict]:
    """Verdicts for claims from the row tests, keyed (row, reference, metric). A comparison that involves a row in
    `unconverged` (not at its plateau, or diverged) is inconclusive whatever its test says: it would measure how
    fast the rows learn, not what they are worth."""
    paper = paper or {}
    out = []
    for claim in claims:
        parts = []
        for comp in claim.compare:
            against = comp.against or base
            test = tests.get((comp.row, against or "", comp.metric))
            mine, theirs = paper.get(comp.row, {}).get(comp.metric), paper.get(against or "", {}).get(comp.metric)
            paper_delta = mine - theirs if mine is not None and theirs is not None else None
            verdict = comparison_verdict(comp, test)
            behind = tuple(name for name in (comp.row, against) if name in unconverged)
            if behind and verdict in ("reproduced", "contradicted"):
                verdict = "inconclusive"
            parts.append(
                ComparisonVerdict(
                    comparison=comp, verdict=verdict, test=test, paper_delta=paper_delta, unconverged=behind
                )
            )
        out.append(
            ClaimVerdict(claim=claim, verdict=claim_verdict([p.verdict for p in parts]), comparisons=tuple(parts))
        )
    return out


def comparison_text(cv: ComparisonVerdict, base: str | None) -> str:
    """'A1 vs base, BLEU: -0.62 [-1.40, +0.16], p(Holm) 0.31 (paper -0.90)' for tables and terminals."""
    comp, test = cv.comparison, cv.test
    against = comp.against or base or "?"
    label = METRICS[comp.metric].label
    head = f"{comp.row} vs {against}, {label}"
    if test is None or test.effect is None:
        return f"{head}: no complete trials to compare"
    digits = METRICS[comp.metric].digits
    lo, hi = test.ci
    text = f"{head}: {test.effect:+.{digits}f} [{lo:+.{digits}f}, {hi:+.{digits}f}]"
    if comp.expect == "same":
        text += f", margin ±{comp.margin:g}, p(TOST) {p_text(test.p_tost(comp.margin or 0.0))}"
    else:
        text += f", p {p_text(test.p)}, p(Holm) {p_text(test.p_holm)}"
    if cv.paper_delta is not None:
        text += f" (paper {cv.paper_delta:+.{digits}f})"
    if cv.unconverged:
        text += f"; NOT AT PLATEAU: {', '.join(cv.unconverged)}"
    return text


def p_text(p: float | None) -> str:
    """A p-value as the report prints it: three decimals, '<0.001' below that, 'n/a' without one."""
    if p is None:
        return "n/a"
    return "<0.001" if p < 0.001 else f"{p:.3f}"


__all__ = [
    "Claim",
    "ClaimVerdict",
    "Comparison",
    "ComparisonVerdict",
    "claim_verdict",
    "comparison_text",
    "comparison_verdict",
    "judge",
    "load_claims",
    "parse_claims",
]
