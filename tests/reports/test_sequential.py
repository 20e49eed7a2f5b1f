"""The sequential design's error control and cost, by simulation (`reports.sequential.simulate`): planted effects
and nulls, ordinary rows and one with ten times the variance, every look. Seconds, no training."""

from __future__ import annotations

import pytest
from ablate.reports.sequential import confseq_level, look_level, simulate, spent
from ablate.reports.stats import ALPHA

NULL = [0.0] * 20
PLANTED = [-3, -2, -1, 0, 0, 1, 2, 3, 26, -13, -5, 4, 0, 0, -1.5, 1.5, 0.5, -0.5, 0, 8]  # BLEU, seed SD 1


def test_the_looks_spend_alpha_in_the_obrien_fleming_shape():
    levels = [look_level(n, n - 1 if n > 2 else 0, 6) for n in range(2, 7)]
    assert sum(levels) == pytest.approx(ALPHA) and spent(1.0) == pytest.approx(ALPHA)
    assert levels[0] < 0.001 < levels[-1]  # early looks spend little, the last one most
    assert confseq_level(2, 6) < levels[0]  # a confidence sequence pays for every look it never takes


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
