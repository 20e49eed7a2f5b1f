"""Group-sequential boundaries with the looks' correlation (`ablations.statistics.boundaries`), against published
tables and a Monte Carlo of the Brownian motion behind them."""

from __future__ import annotations

import math

import numpy as np
import pytest
from ablate.ablations.statistics.boundaries import (
    crossing_probability,
    nominal_level,
    obf_spending,
    obrien_fleming_bounds,
    spending_bounds,
)
from scipy import stats


@pytest.mark.parametrize(
    "k, published",
    [(1, (1.960,)), (2, (2.797, 1.977)), (3, (3.471, 2.454, 2.004))],
)
def test_obrien_fleming_matches_jennison_and_turnbull(k, published):
    """Jennison and Turnbull (2000), Table 2.3: O'Brien-Fleming boundaries, alpha 0.05 two-sided, equal spacing."""
    assert obrien_fleming_bounds(k, 0.05) == pytest.approx(published, abs=0.002)


def test_lan_demets_spends_what_its_function_says_at_each_look():
    at = (0.2, 0.4, 0.6, 0.8, 1.0)
    bounds = spending_bounds(at, 0.05)
    # The first look is alone: its boundary is the spending function's own quantile.
    assert bounds[0] == pytest.approx(stats.norm.isf(obf_spending(0.2, 0.05) / 2), abs=1e-6)
    for j in range(1, len(at) + 1):
        assert crossing_probability(at[:j], bounds[:j]) == pytest.approx(obf_spending(at[j - 1], 0.05), abs=2e-6)
    assert bounds[-1] == pytest.approx(2.0635, abs=5e-4)  # the last look keeps nearly all of alpha: 1.96 alone


def test_the_boundaries_hold_alpha_on_a_simulated_brownian_motion():
    at = np.array([0.4, 0.7, 1.0])
    bounds = np.array(spending_bounds(at, 0.05))
    rng = np.random.default_rng(0)
    steps = rng.normal(size=(200_000, 3)) * np.sqrt(np.diff(np.concatenate([[0.0], at])))
    z = np.cumsum(steps, axis=1) / np.sqrt(at)
    crossed = (np.abs(z) >= bounds).any(axis=1).mean()
    assert crossed == pytest.approx(0.05, abs=3 * math.sqrt(0.05 * 0.95 / 200_000))
    # Under a drift the boundaries find the effect about as often as the fixed test at 1.96 does (little lost).
    power = crossing_probability(at, bounds, drift=2.8)
    assert 0.77 < power < stats.norm.sf(1.96 - 2.8) + 1e-9


def test_the_correlation_buys_back_what_a_bonferroni_split_of_the_increments_loses():
    """The design before this module tested each look at its own increment of the spending function: at t = (2/3, 1)
    the last look at z 2.1245. With the looks' correlation it is 2.0146."""
    correlated = spending_bounds((2 / 3, 1.0), 0.05)
    bonferroni = stats.norm.isf((0.05 - obf_spending(2 / 3, 0.05)) / 2)
    assert bonferroni == pytest.approx(2.1245, abs=1e-3)
    assert correlated[-1] == pytest.approx(2.0146, abs=1e-3) and correlated[-1] < bonferroni


def test_looks_that_gain_no_information_spend_nothing_and_fractions_clip_at_one():
    plain = spending_bounds((0.5, 1.0), 0.05)
    repeated = spending_bounds((0.5, 0.5, 1.0), 0.05)
    assert repeated[1] == math.inf and nominal_level(repeated[1]) == 0.0
    assert repeated[0] == pytest.approx(plain[0]) and repeated[2] == pytest.approx(plain[1])
    assert spending_bounds((0.5, 1.3), 0.05) == pytest.approx(plain)
    assert nominal_level(1.959963985) == pytest.approx(0.05)
