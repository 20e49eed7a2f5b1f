"""The shipped rule simulated (`ablations.statistics.simulation`): table3's and the modern study's claims at their
default designs, on synthetic seeds with the default archive's noise, judged by the code a sweep runs. The
family-wise error must hold under the global null, under a mixed null, and with one claimed row of ten times the
seed variance; the sequential design must reproduce a true 2-BLEU effect at least as often as the fixed design at
max_seeds, for fewer trials."""

from __future__ import annotations

import os

import pytest
from ablate.ablations.statistics.simulation import Design, simulate
from ablate.ablations.study import load_study
from ablate.lightning_modules.metrics import METRICS

REPLICATES = int(os.environ.get("ABLATE_SIMULATION_REPLICATES", "400"))
"""Replicates per case: 400 in the suite (seconds each); ABLATE_SIMULATION_REPLICATES=10000 runs the test as the
issue states it (minutes a case), and `ablate simulate --replicates 10000` gives the figures docs/method/sequential.md
states, with the same code."""
NOISY_REPLICATES = max(REPLICATES, 1000)
"""The case with a 10x-variance row sits nearer the 5% (3.0-3.5% at 10,000 replicates, docs/method/sequential.md): at
400 replicates its interval's upper end reaches 6-7% by chance alone, so it gets 1,000."""
SLACK = 0.0 if REPLICATES >= 5000 else 0.015
"""Under 5,000 replicates the Monte Carlo interval is wide: its upper end is held to 5% plus this."""


def _study(name: str):
    study = load_study(name)
    return list(study.claims), [r.name for r in study.rows], study.base_name, study


def _run(name: str, **kwargs):
    claims, rows, base, study = _study(name)
    design = kwargs.pop("design", Design(min_seeds=study.min_seeds, max_seeds=study.max_seeds))
    replicates = kwargs.pop("replicates", REPLICATES)
    return simulate(claims, rows, base, metrics=METRICS, design=design, replicates=replicates, **kwargs)


@pytest.mark.slow
@pytest.mark.parametrize("study", ["table3", "modern"])
def test_the_family_wise_error_holds_over_every_claim_budget_and_look(study, capsys):
    claims, rows, base, _ = _study(study)
    claimed = list(dict.fromkeys(c.row for claim in claims for c in claim.compare if c.row != base))
    half = {(row, "bleu"): -3.0 for row in claimed[::2]}  # a mixed null: every other claimed row differs
    null = _run(study, seed=1)
    mixed = _run(study, effects=half, seed=2)
    noisy = _run(study, unstable=(claimed[0],), seed=3, replicates=NOISY_REPLICATES)
    with capsys.disabled():
        for case, result in (("global null", null), ("mixed null", mixed), ("a 10x-variance row", noisy)):
            print(f"\n  {study}, {case}: FWER {result.fwer:.4f} (95% upper {result.fwer_upper:.4f}) over "
                  f"{result.replicates} replicates, {result.trials:.1f} trials")  # fmt: skip
    for result in (null, mixed, noisy):
        assert result.fwer_upper <= 0.05 + SLACK


@pytest.mark.slow
def test_the_sequential_design_is_as_powerful_as_the_fixed_one_for_fewer_trials(capsys):
    """A true 2-BLEU effect at both budgets (2.4 seed SDs at T): the default design (2 to 4 seeds) reproduces it at
    least as often as every claimed row at three seeds, for fewer trials."""
    planted = {("C1", "bleu"): -2.0}
    sequential = _run("table3", effects=planted, seed=4)
    fixed = _run("table3", effects=planted, seed=4, design=Design(min_seeds=3, max_seeds=3))
    key = "C1/bleu/lower/"
    with capsys.disabled():
        print(f"\n  2 BLEU: sequential reproduces {sequential.reproduced[key]:.3f} for {sequential.trials:.1f} trials, "
              f"fixed at three seeds {fixed.reproduced[key]:.3f} for {fixed.trials:.1f}")  # fmt: skip
    assert sequential.trials < fixed.trials
    assert sequential.reproduced[key] >= fixed.reproduced[key] - (0.0 if REPLICATES >= 5000 else 0.04)
