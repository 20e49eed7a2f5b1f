"""One family over every claimed comparison (`ablations.statistics.family`): each decision is the 95%-style interval
at the comparison's level, the budgets are an intersection-union test, and Holm runs over every claim whatever its
metric, reference or kind."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from ablate.ablations.statistics.claims import Claim, Comparison
from ablate.ablations.statistics.family import TRUNCATION, Sides, across_budgets, adjusted, decide, sides
from ablate.ablations.statistics.significance import RowTest
from ablate.ablations.statistics.variance import holm
from ablate.ablations.statistics.verdicts import judge
from ablate.lightning_modules.metrics import METRICS
from scipy import stats


def _test(effect: float, se: float, df: float = 12.0, row: str = "R", against: str = "base", metric: str = "bleu"):
    t = stats.t.ppf(0.975, df)
    p = float(2 * stats.t.sf(abs(effect) / se, df))
    return RowTest(row=row, against=against, metric=metric, n_row=3, n_against=6, effect=effect, se=se,
                   se_seeds=se, df=df, ci=(effect - t * se, effect + t * se), p=p, seed_vars=(1.0, 1.0))  # fmt: skip


def _interval_verdict(c: Comparison, test: RowTest, level: float, higher_is_better: bool) -> str | None:
    """The verdict read off the (1 - level) interval, as the report's legend states the rules."""
    half = stats.t.ppf(1 - level / 2, test.df) * test.se
    lo, hi = test.effect - half, test.effect + half
    m = c.margin or 0.0
    if c.expect == "same":
        return "reproduced" if -m < lo and hi < m else "contradicted" if lo > m or hi < -m else None
    if c.expect == "no_worse":
        worse, better = (lo, hi) if higher_is_better else (-hi, -lo)
        return "reproduced" if worse > -m else "contradicted" if better < -m else None
    if lo > 0:
        return "reproduced" if c.expect == "higher" else "contradicted"
    if hi < 0:
        return "reproduced" if c.expect == "lower" else "contradicted"
    return None


@pytest.mark.parametrize("expect", ["higher", "lower", "same", "no_worse"])
@pytest.mark.parametrize("metric", ["bleu", "ppl"])
def test_a_comparisons_p_values_are_the_levels_at_which_its_interval_decides_it(expect, metric):
    c = Comparison(row="R", metric=metric, expect=expect, margin=1.0 if expect in ("same", "no_worse") else None)
    rng = np.random.default_rng(0)
    higher = METRICS[metric].higher_is_better
    checked = 0
    draws = zip(rng.normal(0, 2, 400), rng.uniform(0.2, 1.5, 400), rng.choice([0.05, 0.01, 0.003], 400), strict=True)
    for effect, se, level in draws:
        test = _test(float(effect), float(se))
        found = sides(c, test, higher)
        assert found is not None
        by_interval = _interval_verdict(c, test, float(level), higher)
        if any(abs(p - level) < 1e-9 for p in (found.reproduced, found.contradicted)):
            continue  # on the boundary: either reading is right
        assert found.at(float(level)) == by_interval, (effect, se, level, found)
        checked += 1
    assert checked > 350
    two_sided = sides(Comparison(row="R", metric="bleu", expect="higher"), _test(0.8, 0.5), True)
    assert two_sided is not None and two_sided.p == pytest.approx(_test(0.8, 0.5).p)


def test_a_claim_over_budgets_is_decided_only_when_every_budget_decides_it_the_same_way():
    iut = across_budgets([Sides(0.001, 1.0), Sides(0.04, 0.9)])
    assert iut == Sides(0.04, 1.0) and iut.at(0.05) == "reproduced" and iut.at(0.01) is None
    flipped = across_budgets([Sides(0.001, 0.99), Sides(0.99, 0.001)])
    assert flipped is not None and flipped.at(0.05) is None  # budget-sensitive: neither way
    assert across_budgets([Sides(0.01, 0.9), None]) is None


def _truncated_holm(ps: list[float], gamma: float, alpha: float = 0.05) -> set[int]:
    """Dmitrienko, Tamhane and Wiens's truncated Holm as they state it: sort the p-values; step j (from 0) rejects
    while p_(j) <= (gamma / (m - j) + (1 - gamma) / m) alpha, and stops at the first that does not."""
    order, m, out = sorted(range(len(ps)), key=lambda i: ps[i]), len(ps), set()
    for j, i in enumerate(order):
        if ps[i] > (gamma / (m - j) + (1 - gamma) / m) * alpha:
            break
        out.add(i)
    return out


def test_one_look_of_the_family_is_the_truncated_holm_procedure():
    rng = np.random.default_rng(1)
    for _ in range(200):
        ps = list(rng.uniform(0, 0.06, 6) ** rng.uniform(0.5, 2))
        family = {i: Sides(p, 1.0) for i, p in enumerate(ps)}
        expected = _truncated_holm(ps, TRUNCATION)
        assert {i for i, t in decide(family).items() if t.way} == expected
        assert {i for i, p in adjusted(family).items() if p <= 0.05} == expected
    # At TRUNCATION = 1 it is Holm's own procedure.
    ps = [0.001, 0.011, 0.016, 0.03, 0.04]
    assert _truncated_holm(ps, 1.0) == {i for i, p in enumerate(holm(ps)) if p is not None and p <= 0.05}
    # The last comparison left is never tested alone at the whole level: TRUNCATION of it, and the rest over the
    # family.
    last = TRUNCATION * 0.05 + (1 - TRUNCATION) * 0.05 / 2
    assert last < 0.04 and decide({"a": Sides(0.04, 1.0)}, decided=["b"], size=2)["a"].level == pytest.approx(last)
    # Decided before (an earlier look): their shares are passed on; held back (stopped for futility): they keep theirs.
    assert decide({"a": Sides(0.03, 1.0)}, decided=["b"], size=2)["a"].way == "reproduced"
    assert decide({"a": Sides(0.03, 1.0)}, size=2)["a"].way is None
    assert decide({"a": Sides(0.02, 1.0)}, size=2)["a"].level == pytest.approx(0.025)


def test_the_family_is_every_claimed_comparison_whatever_its_metric_reference_or_kind():
    """Four claims on two metrics and two references, one an equivalence: one family of four, so a p of 0.02 that
    a per-metric Holm would have passed (two comparisons on BLEU against the base) is not enough."""
    claims = [
        Claim(id="a", text="", compare=(Comparison(row="A", metric="bleu", expect="higher"),)),
        Claim(id="b", text="", compare=(Comparison(row="B", metric="bleu", expect="lower"),)),
        Claim(id="c", text="", compare=(Comparison(row="C", metric="ppl", expect="lower"),)),
        Claim(id="e", text="", compare=(Comparison(row="E", metric="bleu", expect="same", margin=1.0, against="A"),)),
    ]
    effect = float(stats.t.isf(0.01, 12)) * 0.5  # two-sided p 0.02
    tests = {1.0: {("A", "base", "bleu"): _test(effect, 0.5, row="A"), ("B", "base", "bleu"): _test(-5.0, 0.5, row="B"),
                   ("C", "base", "ppl"): _test(-5.0, 0.5, row="C", metric="ppl"),
                   ("E", "A", "bleu"): _test(0.0, 2.0, row="E", against="A")}}  # fmt: skip
    verdicts = {v.claim.id: v for v in judge(claims, tests, "base", metrics=METRICS)}
    assert verdicts["b"].verdict == verdicts["c"].verdict == "reproduced"
    a = verdicts["a"].comparisons[0]
    # The truncated Holm (`family.TRUNCATION` of the way from alpha over the family to Holm's level): after the two
    # sure ones, 0.05 x (TRUNCATION / 2 + (1 - TRUNCATION) / 4), under 0.02.
    weight = TRUNCATION / 2 + (1 - TRUNCATION) / 4
    assert 0.05 * weight < 0.02 and a.family == 4 and a.verdict == "inconclusive"
    assert a.level == pytest.approx(0.05 * weight) and a.p_family == pytest.approx(0.02 / weight)
    # Without the equivalence claim the family is three: 0.02 passes at 0.05 x (TRUNCATION + (1 - TRUNCATION) / 3)
    # after the two sure ones.
    assert 0.05 * (TRUNCATION + (1 - TRUNCATION) / 3) >= 0.02
    three = {v.claim.id: v for v in judge(claims[:3], tests, "base", metrics=METRICS)}
    assert three["a"].verdict == "reproduced" and three["a"].comparisons[0].family == 3


def test_comparisons_that_cannot_be_decided_stay_out_of_the_family():
    claims = [Claim(id=x, text="", compare=(Comparison(row=x, metric="bleu", expect="lower"),)) for x in "AB"]
    tests = {1.0: {("A", "base", "bleu"): _test(-3.0, 1.0, row="A"), ("B", "base", "bleu"): _test(-9.0, 0.5, row="B")}}
    verdicts = judge(claims, tests, "base", metrics=METRICS, excluded={1.0: {"B": "diverged"}})
    assert [v.comparisons[0].family for v in verdicts] == [1, 1] and verdicts[1].verdict == "inconclusive"
    assert verdicts[0].comparisons[0].level == pytest.approx(0.05)
    for expect, kind in itertools.product(("higher",), ("withheld",)):
        withheld = judge(claims, tests, "base", metrics=METRICS, withheld="a pipeline check")
        assert all(v.verdict == "inconclusive" and v.comparisons[0].family == 0 for v in withheld), (expect, kind)
