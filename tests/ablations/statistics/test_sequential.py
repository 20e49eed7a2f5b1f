"""The sequential design's looks (`ablations.statistics.sequential`): the information each comparison's look reached,
the boundary its share of the error gives it there, and futility by conditional power."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
from ablate.ablations.statistics.boundaries import nominal_level, obf_spending, spending_bounds
from ablate.ablations.statistics.claims import Claim, Comparison
from ablate.ablations.statistics.family import sides
from ablate.ablations.statistics.sequential import (
    UNSETTLED_ALPHA,
    boundary_level,
    conditional_power,
    confseq_level,
    fractions,
    information,
    seed_range,
    walk,
)
from ablate.ablations.statistics.significance import ALPHA, RowTest
from ablate.ablations.statistics.verdicts import BudgetVerdict, ClaimVerdict, ComparisonVerdict


def _test(effect: float, n_row: int, n_against: int, var: float = 1.0, sentences: float = 0.3) -> RowTest:
    se = math.sqrt(var / n_row + var / n_against + sentences**2)
    return RowTest(row="R", against="base", metric="bleu", n_row=n_row, n_against=n_against, effect=effect, se=se,
                   se_seeds=math.sqrt(var / n_row + var / n_against), se_sentences=sentences, df=30.0,
                   ci=(effect - 2 * se, effect + 2 * se), p=0.5, seed_vars=(var, var))  # fmt: skip


def test_a_looks_information_fraction_comes_from_its_seeds_and_the_variances_behind_its_test():
    test = _test(0.0, 2, 7)
    assert information(test, 2, 7) == pytest.approx(1 / test.se**2)
    at = fractions(test, [(2, 7), (3, 11)], (3, 11))
    assert at is not None and at[-1] == pytest.approx(1.0)
    seeds_only = (1 / 2 + 1 / 7) ** -1 / (1 / 3 + 1 / 11) ** -1
    # The sentence noise does not shrink with seeds: the first look holds more of the information than seeds say.
    assert seeds_only < at[0] < 1
    assert fractions(_test(0.0, 2, 7, sentences=0.0), [(2, 7)], (3, 11)) == pytest.approx((seeds_only,))
    noisy_row = RowTest(**{**_test(0.0, 2, 7).__dict__, "seed_vars": (10.0, 1.0)})
    assert fractions(noisy_row, [(2, 7)], (3, 11))[0] < at[0]  # a noisy row gains more from its third seed


def test_a_control_that_is_tested_too_counts_at_its_own_share_not_as_full_information():
    """The modern study's base (its sqrt(k) share of seeds) is also tested against E1 (RoPE's claim): a look at its
    8 seeds must not count as the last one, which would spend the comparison's whole share at the first look."""
    controls = {"base": [f"r{i}" for i in range(16)], "E1": ["E2", "base"]}
    rows = ["base", "E1", "E2", *(f"r{i}" for i in range(16))]
    most = seed_range(rows, controls, min_seeds=2, max_seeds=3)[1]
    assert most["base"] > 8 and most["E1"] >= 3
    test = RowTest(**{**_test(0.0, 8, 3).__dict__, "row": "base", "against": "E1"})
    at = fractions(test, [(8, 3)], (most["base"], most["E1"]))
    assert at is not None and at[0] < 1
    assert boundary_level("spending", at, ALPHA, 8, 3) < 0.6 * ALPHA


def test_each_comparison_is_tested_at_its_boundary_for_its_share():
    at = (0.6, 1.0)
    bounds = spending_bounds(at, ALPHA / 4)
    assert boundary_level("spending", at, ALPHA / 4, 3, 3) == pytest.approx(nominal_level(bounds[-1]))
    assert boundary_level("spending", at[:1], ALPHA / 4, 2, 3) < boundary_level("spending", at, ALPHA / 4, 3, 3)
    assert boundary_level("confseq", at, ALPHA / 4, 2, 3) == pytest.approx(confseq_level(2, 3, ALPHA / 4))
    # With the looks' correlation the last look keeps nearly all of its share: more than a Bonferroni split would.
    assert boundary_level("spending", at, ALPHA, 3, 3) > ALPHA - obf_spending(0.6, ALPHA)


def _verdict(comparison: Comparison, test: RowTest) -> ComparisonVerdict:
    found = sides(comparison, test, True)
    budgets = tuple(BudgetVerdict(fraction=f, verdict="inconclusive", test=test, sides=found) for f in (0.5, 1.0))
    return ComparisonVerdict(comparison=comparison, verdict="inconclusive", budgets=budgets, higher_is_better=True,
                             sides=found)  # fmt: skip


def test_futility_is_conditional_power_under_the_smallest_effect_the_study_sets_out_to_see():
    lower = Comparison(row="R", metric="bleu", expect="lower")
    at = fractions(_test(0.0, 2, 7), [(2, 7)], (3, 11))
    assert at is not None
    share = ALPHA / 14
    clear = conditional_power(_verdict(lower, _test(-4.0, 2, 7)), at, share, (3, 11))
    nothing = conditional_power(_verdict(lower, _test(0.0, 2, 7)), at, share, (3, 11))
    wrong_way = conditional_power(_verdict(lower, _test(+4.0, 2, 7)), at, share, (3, 11))
    assert clear > 0.9 and wrong_way > 0.9  # either way is a decision
    assert nothing < clear
    # At the last look there is nothing left to learn: no power to gain.
    assert conditional_power(_verdict(lower, _test(-0.5, 3, 11)), (1.0,), share, (3, 11)) == 0.0
    same = Comparison(row="R", metric="bleu", expect="same", margin=1.0)
    near = conditional_power(_verdict(same, _test(0.0, 2, 7, var=0.1, sentences=0.05)), at, share, (3, 11))
    far = conditional_power(_verdict(same, _test(0.0, 2, 7, var=4.0, sentences=0.5)), at, share, (3, 11))
    assert near > far  # an equivalence the seeds can show, against one too noisy for the margin


@pytest.mark.parametrize("withheld", [False, True])
def test_a_study_that_gives_no_verdict_stops_every_row_at_the_first_look_instead_of_running_it_to_max_seeds(withheld):
    """A smoke run (its pipeline check) or a base that learnt nothing gives no verdict whatever the seeds: the first
    look stops its rows with no verdict. An undecided row of a study that does give verdicts asks for its next seed."""
    lower = Comparison(row="R", metric="bleu", expect="lower")
    claim = Claim(id="c", text="R is worse", compare=(lower,))

    def judged(chosen):
        n_row, n_base = len(chosen["R"]), len(chosen["base"])
        test = _test(-0.5, n_row, n_base, var=4.0)
        budgets = tuple(BudgetVerdict(fraction=f, verdict="inconclusive", test=test) for f in (0.5, 1.0))
        found = None if withheld else sides(lower, test, True)
        cv = ComparisonVerdict(comparison=lower, verdict="inconclusive", budgets=budgets, higher_is_better=True,
                               sides=found, withheld=withheld)  # fmt: skip
        return [ClaimVerdict(claim=claim, verdict="inconclusive", comparisons=(cv,))]

    have = {"base": list(range(12)), "R": list(range(4))}
    walked = walk(judged, have, {"base": ["R"]}, min_seeds=2, max_seeds=4)
    first = walked.looks[0].rows["R"]
    if withheld:
        assert (first.state, first.seeds, walked.finished) == ("no_verdict", 2, True)
        assert first.why == "the study gives none" and walked.target["R"] == 2
    else:
        assert first.state == "open" and walked.target["R"] > 2


@pytest.mark.parametrize("p", [0.5, 0.1])
def test_an_unsettled_row_is_not_decided_before_its_last_seed(p):
    """A clear effect at three seeds: decided there when the row's spread is in line; when it is above the others' at
    UNSETTLED_ALPHA (p 0.1), it gets its fourth seed first and is decided on that one."""
    from ablate.ablations.statistics.variance import Screen

    lower = Comparison(row="R", metric="bleu", expect="lower")
    claim = Claim(id="c", text="R is worse", compare=(lower,))

    def judged(chosen):
        n_row, n_base = len(chosen["R"]), len(chosen["base"])
        test = replace(_test(-6.0, n_row, n_base), spread=Screen(p=p, ratio=2.0, df=2 * (n_row - 1)))
        budgets = tuple(BudgetVerdict(fraction=f, verdict="inconclusive", test=test) for f in (0.5, 1.0))
        cv = ComparisonVerdict(comparison=lower, verdict="inconclusive", budgets=budgets, higher_is_better=True,
                               sides=sides(lower, test, True))  # fmt: skip
        return [ClaimVerdict(claim=claim, verdict="inconclusive", comparisons=(cv,))]

    walked = walk(judged, {"base": list(range(12)), "R": list(range(4))}, {"base": ["R"]}, min_seeds=2, max_seeds=4)
    decided = walked.stopped()["R"]
    assert decided.verdicts["R/bleu/lower/"] == "reproduced"
    assert decided.seeds == (3 if p >= UNSETTLED_ALPHA else 4)
