"""The sequential design's error control and cost, by simulation (`reports.sequential.simulate`): planted effects
and nulls, ordinary rows and one with ten times the variance, every look. Seconds, no training."""

from __future__ import annotations

import pytest
from ablate.ablations.statistics.sequential import confseq_level, look_level, look_seeds, spent
from ablate.ablations.statistics.significance import ALPHA
from ablate.ablations.statistics.simulation import simulate

NULL = [0.0] * 20
PLANTED = [-3, -2, -1, 0, 0, 1, 2, 3, 26, -13, -5, 4, 0, 0, -1.5, 1.5, 0.5, -0.5, 0, 8]  # BLEU, seed SD 1


def test_the_looks_spend_alpha_in_the_obrien_fleming_shape():
    levels = [look_level(n, n - 1 if n > 2 else 0, 6) for n in range(2, 7)]
    assert sum(levels) == pytest.approx(ALPHA) and spent(1.0) == pytest.approx(ALPHA)
    assert levels[0] < 0.001 < levels[-1]  # early looks spend little, the last one most
    assert confseq_level(2, 6) < levels[0]  # a confidence sequence pays for every look it never takes


def test_a_look_is_at_the_tested_rows_seeds_not_at_a_tested_controls_share():
    """The modern study: the base (8 seeds, its sqrt(16) share) is also tested against E1 (RoPE's claim). Its seeds
    must not set the look's information fraction: at 8 of max_seeds 3 the first look would spend all of alpha."""
    controls = {"base": [f"r{i}" for i in range(16)], "E1": ["E2", "base"]}
    seeds = {"base": 8, "E1": 3, **{f"r{i}": 2 for i in range(16)}, "E2": 2}
    assert look_seeds(seeds, {}, controls, 0) == 2
    level = look_level(look_seeds(seeds, {}, controls, 0), 0, 3)
    assert level == pytest.approx(spent(2 / 3)) and level < ALPHA / 2
    later = {**seeds, "r3": 3}
    states = {r: "decided" for r in seeds} | {"r3": "open"}
    assert look_seeds(later, states, controls, 2) == 3
    assert look_seeds(later, {r: "decided" for r in seeds}, controls, 2) == 2  # nothing open: no new error
    assert look_seeds({"x": 2, "y": 3}, {}, {}, 0) == 3  # no control: every row is tested


@pytest.mark.slow
@pytest.mark.parametrize("effects", [NULL, PLANTED], ids=["null", "planted"])
def test_the_family_wise_error_and_coverage_hold_with_every_look_and_the_design_costs_less(effects, capsys):
    seq = simulate(effects, unstable=(3,), min_seeds=2, max_seeds=6, replicates=150, seed=1)
    fixed = simulate(effects, unstable=(3,), min_seeds=2, max_seeds=6, replicates=150, seed=1, sequential=False)
    assert seq.fwer <= 0.05  # a wrong reproduced or contradicted among the ordinary rows, over all looks
    assert seq.coverage >= 0.93  # the final 95% intervals of the ordinary rows
    assert seq.trials < 0.6 * fixed.trials
    with capsys.disabled():
        print(
            f"\n  sequential: {seq.trials:.1f} trials (fixed at max_seeds: {seq.fixed_trials}), FWER {seq.fwer:.3f}"
            f" (fixed {fixed.fwer:.3f}), coverage {seq.coverage:.3f}, tenfold-variance row wrong "
            f"{seq.wrong_unstable:.3f} (fixed {fixed.wrong_unstable:.3f}), planted effects decided "
            f"{seq.decided:.2f} (fixed {fixed.decided:.2f})"
        )
