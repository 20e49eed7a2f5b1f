"""The shipped rule simulated (`ablations.statistics.simulation`): table3's and the modern study's claims at their
default designs, on synthetic seeds with the default archive's noise, judged by the code a sweep runs. The
family-wise error must hold over the guarantee's grid (the global, a mixed and the least favourable nulls; none to
every claimed row at 3 to 30 times the seed variance; normal and t(3) seeds): the suite runs its hardest cells, the
slow test all of it; the sequential design must reproduce a true 2-BLEU effect at least as often as the fixed design
at max_seeds, for fewer trials."""

from __future__ import annotations

import os

import pytest
from ablate.ablations.commands.simulate import run_grid
from ablate.ablations.statistics.simulation import Cell, Design, scenario, simulate, simulate_cell
from ablate.ablations.study import load_study
from ablate.lightning_modules.metrics import METRICS

REPLICATES = int(os.environ.get("ABLATE_SIMULATION_REPLICATES", "400"))
"""Replicates per case: 400 in the suite (seconds each); ABLATE_SIMULATION_REPLICATES=10000 runs the test as the
issue states it (minutes a case), and `ablate simulate --replicates 10000` gives the figures docs/method/sequential.md
states, with the same code."""
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


GRID_REPLICATES = int(os.environ.get("ABLATE_GRID_REPLICATES", "0"))
"""Replicates per cell of the whole grid's test: 0 (skipped) unless set. The grid at 4,000 replicates, as
docs/method/verdicts.md states it, takes an hour of two cores, so the suite and CI run its hardest cells
(`CI_CELLS`) and `ABLATE_GRID_REPLICATES=4000 .venv/bin/python -m pytest -s -k whole_grid
tests/ablations/statistics/test_simulation.py` runs all of it."""


def _cell(cell: Cell, replicates: int, seed: int):
    claims, rows, base, study = _study(cell.study)
    design = Design(min_seeds=study.min_seeds, max_seeds=study.max_seeds)
    return simulate_cell(cell, claims, rows, base, metrics=METRICS, design=design, replicates=replicates, seed=seed)[0]


CI_CELLS = (
    Cell("table3", "mixed", 4, 10.0),
    Cell("table3", "least_favourable", 4, 10.0),
    Cell("modern", "least_favourable", 4, 10.0),
    Cell("modern", "least_favourable", 4, 3.0),
)
"""The grid's subset the suite runs: the cells nearest the 5% in the full run (docs/method/verdicts.md)."""


CI_REPLICATES = max(REPLICATES, 2000)
"""The hardest cell sits at 4.2% (table3, mixed, four rows at 10x; docs/method/verdicts.md): at 1,000 replicates the
upper end of its interval passes 6.5% about one seed in ten by chance alone, at 2,000 about one in three hundred."""


@pytest.mark.slow
@pytest.mark.parametrize("cell", CI_CELLS, ids=lambda c: c.name.replace(", ", "-").replace(" ", "_"))
def test_the_family_wise_error_holds_in_the_grids_hardest_cells(cell, capsys):
    result = _cell(cell, CI_REPLICATES, seed=CI_CELLS.index(cell) + 31)
    with capsys.disabled():
        print(f"\n  {cell.name}: FWER {result.fwer:.4f} (95% upper {result.fwer_upper:.4f}) over {result.replicates}")
    assert result.fwer_upper <= 0.05 + SLACK


@pytest.mark.slow
@pytest.mark.skipif(GRID_REPLICATES < 1, reason="an hour of two cores: ABLATE_GRID_REPLICATES=4000 runs it")
@pytest.mark.parametrize("study", ["table3", "modern"])
def test_the_family_wise_error_holds_over_the_whole_grid(study, capsys):
    """Every cell of the guarantee's grid at GRID_REPLICATES: the 95% upper bound of its family-wise error at most
    5%. The seeds are `ablate simulate STUDY --grid --seed` 1000 (table3) and 2000 (modern), so the command prints
    the same figures docs/method/verdicts.md states."""
    results = run_grid(study, replicates=GRID_REPLICATES, workers=2, seed=1000 if study == "table3" else 2000)
    with capsys.disabled():
        for r in results:
            print(f"\n  {r['name']}: FWER {r['fwer']:.4f} (95% upper {r['fwer_upper']:.4f})", end="")
    assert [r["name"] for r in results if r["fwer_upper"] > 0.05] == []


@pytest.mark.slow
def test_the_grid_catches_the_rule_it_replaced(monkeypatch):
    """The grid can fail: the rule before it (each budget screened on its own at 1%, Holm's procedure untruncated,
    no unsettled rows) gives two noisy nulls at 10x in the least favourable configuration a family-wise error far
    above 5% (12-13% at 4,000 replicates, docs/method/verdicts.md)."""
    from ablate.ablations.statistics import family, simulation

    monkeypatch.setattr(simulation, "screen_budgets", lambda scores: None)
    monkeypatch.setattr(family, "TRUNCATION", 1.0)
    result = _cell(Cell("table3", "least_favourable", 2, 10.0), 1000, seed=5)
    assert result.fwer > 0.07


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


def test_ablate_simulate_runs_one_cell_and_writes_its_json(tmp_path, capsys):
    import json

    from ablate.ablations.cli import main

    out = tmp_path / "cell.json"
    argv = ["simulate", "table3", "--unstable", "A1,C4", "--ratio", "3", "--least_favourable", "--tails", "t3",
            "--replicates", "4", "--json", str(out)]  # fmt: skip
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert "A1, C4 at 3x the seed variance; least favourable; t(3) seeds" in printed
    (cell,) = json.loads(out.read_text())
    assert 0 <= cell["fwer"] <= cell["fwer_upper"] <= 1 and set(cell["reproduced"]) == set(cell["wrong"])


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--unstable", "A1,Z9"], "--unstable: unknown row 'Z9'"),
        (["--ratio", "0"], "--ratio must be a positive variance ratio"),
        (["--workers", "0", "--grid"], "--workers must be at least 1"),
    ],
)
def test_ablate_simulate_names_a_bad_option_in_one_line(argv, says, capsys):
    from ablate.ablations.cli import main

    assert main(["simulate", "table3", "--replicates", "2", *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and says in err[0]


def test_the_least_favourable_scenario_puts_the_nulls_at_their_boundary_and_every_other_comparison_far_off():
    claims, rows, base, _ = _study("modern")
    effects = scenario("least_favourable", claims, base, nulls=["A1", "M-rmsnorm"], metrics=METRICS)
    truth = {}
    for c in (c for claim in claims for c in claim.compare):
        truth[(c.row, c.metric, c.against)] = effects.get((c.row, c.metric), 0.0) - effects.get(
            (c.against or base, c.metric), 0.0
        )
    assert truth[("A1", "bleu", None)] == 0.0  # a difference's null: none
    assert truth[("M-rmsnorm", "bleu", "paper")] == 1.0  # an equivalence's: on its margin
    assert truth[("C1", "bleu", None)] == -8.0 and truth[("C5", "bleu", None)] == 8.0  # far off the claimed way
    assert truth[("base", "bleu", "E1")] == 8.0  # the base against E1, no worse: far better, E1 moved, not the base
    assert truth[("E2", "bleu", "E1")] == 8.0  # an equivalence far off: rightly contradicted
    assert ("base", "bleu") not in effects
