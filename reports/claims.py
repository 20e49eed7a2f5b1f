"""The claims' verdicts as text: one comparison's line ('A1 vs base, BLEU: -0.62 [-1.40, +0.16], ...'), p-values
as the report prints them, our effect against the paper's.

The verdicts themselves (the rules, at every budget) are `ablations.statistics.verdicts`'; the claims as data are
`ablations.study.claims`'. Both are re-exported here for the report's modules and the Python API.
"""

from __future__ import annotations

from ablate.ablations.statistics import (
    BudgetVerdict,
    Claim,
    ClaimVerdict,
    Comparison,
    ComparisonVerdict,
    RowTest,
    Tests,
    Verdict,
    budget_label,
    claim_verdict,
    comparison_verdict,
    judge,
    ratio_text,
)
from ablate.ablations.study import claims_to_data, load_claims, parse_claims
from ablate.lightning_modules.metrics import METRICS


def comparison_text(cv: ComparisonVerdict, base: str | None) -> str:
    """'A1 vs base, BLEU: -0.62 [-1.40, +0.16], p 0.120; p(claims) 0.310 (paper -0.90); <why inconclusive>', with
    one 'T/2 ...; T ...' part per budget when the study has several, for tables and terminals. p(claims): the
    comparison's p over every budget (intersection-union), Holm-adjusted over the study's claimed comparisons."""
    comp = cv.comparison
    against = comp.against or base or "?"
    head = f"{comp.row} vs {against}, {METRICS[comp.metric].label}"
    tested = [b for b in cv.budgets if b.test is not None and b.test.effect is not None]
    if not tested:
        return f"{head}: no complete trials to compare"
    several = len(cv.budgets) > 1
    text = f"{head}: " + "; ".join(_budget_text(comp, b, several) for b in tested)
    if cv.p_family is not None:
        text += f"; p(claims) {p_text(cv.p_family)}"
    if cv.paper_delta is not None:
        text += f" (paper {cv.paper_delta:+.{METRICS[comp.metric].digits}f}{_scale_text(cv)})"
    text += _power_text(cv)
    text = f"{text}; {cv.reason}" if cv.reason else text
    return f"{text}; {cv.advice}" if cv.advice else text


def paper_ratio(cv: ComparisonVerdict, floor: float = 0.3) -> float | None:
    """Our effect at T over the paper's, signed (negative: the other direction); None where the paper's difference
    is below `floor` (a ratio to 0.1 BLEU says little), either is missing, or ours has no variance at all (every
    seed and sentence scored the same, as models that learnt nothing do: no effect to scale)."""
    test = cv.test
    if test is None or test.effect is None or cv.paper_delta is None or abs(cv.paper_delta) < floor:
        return None
    return None if no_variance(test) else test.effect / cv.paper_delta


def no_variance(test: RowTest) -> bool:
    """The test has an effect but no variance at all (a standard error of 0: every seed and sentence scored the
    same): it has no interval and no p, and the report prints the effect alone."""
    return test.effect is not None and test.se == 0


def _power_text(cv: ComparisonVerdict) -> str:
    """'; power 80% at 2.31, 6% at the paper's': the design's power for the claim, at the level the family first
    holds it to, with the seeds it ran (`ComparisonVerdict.detectable`, `.power`); '' outside the family."""
    detectable = cv.detectable
    if detectable is None:
        return ""
    power = cv.power
    at_paper = f", {power:.0%} at the paper's" if power is not None else ""
    return f"; power 80% at {detectable:.{METRICS[cv.comparison.metric].digits}f}{at_paper}"


def _scale_text(cv: ComparisonVerdict) -> str:
    ratio = paper_ratio(cv)
    return f", ours {ratio_text(ratio)}" if ratio is not None else ""


def _budget_text(comp: Comparison, budget: BudgetVerdict, several: bool) -> str:
    """'-0.62 [-1.40, +0.16], p 0.120'; with several budgets 'T/2 -0.62 [-1.40, +0.16] p 0.120'."""
    test = budget.test
    assert test is not None and test.effect is not None
    digits = METRICS[comp.metric].digits
    text = effect_text(test, digits)
    if no_variance(test):  # no interval and no p: every seed and sentence scored the same
        return f"{budget_label(budget.fraction)} {text}" if several else text
    if comp.expect == "same":
        p = f"margin ±{comp.margin:g}, p(TOST) {p_text(test.p_tost(comp.margin or 0.0))}"
    elif comp.expect == "no_worse":
        sign = "-" if METRICS[comp.metric].higher_is_better else "+"
        p = f"margin {sign}{comp.margin:g} (no worse)"
    else:
        p = f"p {p_text(test.p)}"
    return f"{budget_label(budget.fraction)} {text} {p}" if several else f"{text}, {p}"


def effect_text(test: RowTest, digits: int) -> str:
    """'-0.62 [-1.40, +0.16]': the effect and its 95% interval; a test with no variance at all has no interval
    ('+0.00 (no variance)': '+0.00 [-0.00, +0.00]' read as a bug)."""
    assert test.effect is not None
    effect = f"{0.0 if round(test.effect, digits) == 0 else test.effect:+.{digits}f}"
    if no_variance(test):
        return f"{effect} (no variance)"
    lo, hi = test.ci
    return f"{test.effect:+.{digits}f} [{lo:+.{digits}f}, {hi:+.{digits}f}]"


def p_text(p: float | None) -> str:
    """A p-value as the report prints it: three decimals, '<0.001' below that, 'n/a' without one."""
    if p is None:
        return "n/a"
    return "<0.001" if p < 0.001 else f"{p:.3f}"


__all__ = [  # claims as data from ablations.study.claims, their verdicts from ablations.statistics.verdicts
    "claims_to_data",
    "Tests",
    "Verdict",
    "p_text",
    "BudgetVerdict",
    "Claim",
    "ClaimVerdict",
    "Comparison",
    "ComparisonVerdict",
    "claim_verdict",
    "comparison_text",
    "comparison_verdict",
    "effect_text",
    "no_variance",
    "paper_ratio",
    "judge",
    "load_claims",
    "parse_claims",
]
