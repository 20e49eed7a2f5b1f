"""`ablate sweep` at the sequential design: the runner queues only the trials the looks ask for, a resumed sweep
queues nothing twice, a SIGKILL between a look and its enqueue loses nothing, and a finished sweep run again starts
no worker. Real processes on a real journal storage; the looks come from `sequential_judge.py` (which rows stay
open is the test's choice), the statistics' own looks are tested on recorded studies (tests/reports)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
STUDIES = REPO / "tests" / "ablations" / "studies"

HELPER = Path(__file__).resolve().parents[1] / "sequential_judge.py"
STUDY = STUDIES / "sweep_sequential.yaml"
NAME = "sweep-seq-smoke"


def run(sweeps, out: Path, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(HELPER), str(STUDY), "--out", str(out), "--no_report", *args],
        cwd=REPO, env={**sweeps.env, **(env or {})}, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip


def keys(trials) -> list[str]:
    return sorted(f"{t.user_attrs['row']}__seed{t.user_attrs['seed']}" for t in trials if t.state.name == "COMPLETE")


# base: Dunnett's round(sqrt(2) x 2) = 3 at the first look; B1 decided at its 2 seeds; C1 open until its third.
EXPECTED = ["B1__seed0", "B1__seed1", "C1__seed0", "C1__seed1", "C1__seed2", "base__seed0", "base__seed1",
            "base__seed2"]  # fmt: skip


@pytest.mark.slow
def test_a_sequential_sweep_runs_an_open_row_one_seed_more_and_a_decided_row_none(sweeps, tmp_path):
    out = tmp_path / "out"
    done = run(sweeps, out)
    assert done.returncode == 0, done.stderr[-3000:]
    trials = sweeps.trials(out, NAME)
    assert keys(trials) == EXPECTED and len(trials) == len(EXPECTED)  # nothing queued for B1's third seed
    assert sorted(sweeps.records(out)) == EXPECTED
    assert "look 2:" in done.stderr and "1 trial(s) queued" in done.stderr  # C1's third seed, asked for at look 2
    again = run(sweeps, out)  # a finished sweep run again: the same looks, nothing queued, no worker
    assert again.returncode == 0, again.stderr[-3000:]
    assert "(0 newly queued)" in again.stderr and "-s0] step" not in again.stderr
    assert len(sweeps.trials(out, NAME)) == len(EXPECTED)


@pytest.mark.slow
def test_a_sigkill_between_a_look_and_its_enqueue_loses_nothing_and_runs_nothing_twice(sweeps, tmp_path):
    out = tmp_path / "out"
    killed = run(sweeps, out, env={"SEQ_KILL_AT": "C1:2"})
    assert killed.returncode == -9, killed.stderr[-3000:]
    assert (out / "killed-at-look").is_file()
    before = {k: (out / "records" / f"{k}.json").stat().st_mtime_ns for k in sweeps.records(out)}
    assert "C1__seed2" not in before and len(before) == 7  # every trial of the first look, finished and recorded
    resumed = run(sweeps, out)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    trials = sweeps.trials(out, NAME)
    assert keys(trials) == EXPECTED and len(trials) == len(EXPECTED)  # the lost look taken again: C1's third seed
    after = {k: (out / "records" / f"{k}.json").stat().st_mtime_ns for k in before}
    assert after == before  # and nothing that had finished trained again


@pytest.mark.slow
def test_a_queued_trial_the_looks_no_longer_ask_for_is_closed_unrun_and_queued_again_if_a_later_look_does(
    sweeps, tmp_path
):
    """A queue can hold trials the looks over the finished ones do not ask for: the modern study's first sweep
    queued E1 seeds 3-10 under a policy since mended. They are closed unrun, and do not block the key if a later
    look asks for it after all."""
    from ablate.ablations.results.ledger import UNWANTED_REASON
    from ablate.ablations.results.storage.queue import Queue

    out = tmp_path / "out"
    assert run(sweeps, out).returncode == 0
    queue = Queue.open(f"journal:{out / 'optuna.journal'}", NAME)
    queue.enqueue("B1", 2, "B")  # B1 is decided at its 2 seeds: nothing asks for its third
    stale = run(sweeps, out)
    assert stale.returncode == 0, stale.stderr[-3000:]
    trials = sweeps.trials(out, NAME)
    closed = [t for t in trials if (t.user_attrs["row"], t.user_attrs["seed"]) == ("B1", 2)]
    assert [(t.state.name, t.user_attrs.get("reason")) for t in closed] == [("PRUNED", UNWANTED_REASON)]
    assert sorted(sweeps.records(out)) == EXPECTED and "B1-s2] step" not in stale.stderr  # trained nothing
    status = subprocess.run([sys.executable, "-m", "ablate.ablations.cli", "status", str(out)], cwd=REPO,
                            env=sweeps.env, capture_output=True, text=True, timeout=120, check=False)  # fmt: skip
    assert status.returncode == 0, status.stderr[-2000:]
    assert f"{len(EXPECTED)}/{len(EXPECTED)} done" in status.stdout and "0 failed" in status.stdout
    from ablate.ablations.results.load import load_results

    results = load_results(out)  # nor is it a trial of the report's table
    assert sorted(f"{r}__seed{s}" for r, s in results.status) == EXPECTED and results.seeds == [0, 1, 2]
    later = run(sweeps, out, env={"SEQ_OPEN_UNTIL": "B1:3,C1:3"})  # now a look asks for B1's third seed
    assert later.returncode == 0, later.stderr[-3000:]
    # B1's third seed, and the base's fourth: round(sqrt(2) x 3) for two rows open at 3 seeds
    assert sorted(sweeps.records(out)) == sorted([*EXPECTED, "B1__seed2", "base__seed3"])
    assert "B1__seed2" in keys(sweeps.trials(out, NAME))


@pytest.mark.slow
def test_a_sweep_over_some_of_a_studys_rows_keeps_the_controls_share_for_the_rows_it_leaves_out(sweeps, tmp_path):
    """`--rows base` on a sequential study (to finish the base on a free core) is part of the study: its looks still
    judge B1 and C1, so the base keeps its share for them. A look over the base alone took its control seeds as
    unwanted and closed them unrun, and study.json's controls became {base: []}."""
    import json

    out = tmp_path / "out"
    assert run(sweeps, out).returncode == 0
    # Now B1 and C1 stay open to their third seed: the base's share grows to round(sqrt(2) x 3) = 4 seeds.
    alone = run(sweeps, out, "--rows", "base", env={"SEQ_OPEN_UNTIL": "B1:3,C1:3"})
    assert alone.returncode == 0, alone.stderr[-3000:]
    assert sorted(sweeps.records(out)) == sorted([*EXPECTED, "base__seed3"])  # the base's, none of B1's or C1's
    assert "the study's looks also ask for B1, which this sweep leaves out" in alone.stderr  # B1's third seed
    allocation = json.loads((out / "study.json").read_text())["allocation"]
    assert allocation["controls"] == {"base": ["B1", "C1"]}
    dry = subprocess.run([sys.executable, "-m", "ablate.ablations.cli", "sweep", str(STUDY), "--out", str(out),
                          "--rows", "base", "--dry_run"], cwd=REPO, env=sweeps.env, capture_output=True, text=True,
                         timeout=120, check=False)  # fmt: skip
    assert dry.returncode == 0, dry.stderr[-2000:]
    # The base's seeds from the first look to every row open: Dunnett's share for two compared rows, 3 to 6.
    assert next(line for line in dry.stdout.splitlines() if line.split()[:1] == ["base"]).split()[2] == "3-6"


def test_seed_counts_on_the_command_line_make_the_design_fixed_unless_it_asks_for_sequential(tmp_path, capsys):
    from ablate.ablations.cli import main

    out = tmp_path / "out"
    assert main(["sweep", str(STUDY), "--allocation", "sequential", "--seeds", "3", "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--seeds and --control_seeds set a fixed design's seeds" in err[0]
    assert not out.exists()
    from ablate.ablations.commands.options import parse
    from ablate.ablations.commands.sweep import build_parser, make_plan

    fixed = make_plan(parse(build_parser(), [str(STUDY), "--seeds", "3", "--out", str(out)]))
    assert fixed.allocation is None and fixed.seeds == [0, 1, 2]  # --seeds alone: a fixed design of 3 seeds


def test_the_command_line_turns_a_fixed_study_sequential_and_checks_the_seed_bounds(tmp_path, capsys):
    from ablate.ablations.cli import main
    from ablate.ablations.commands.options import parse
    from ablate.ablations.commands.sweep import build_parser, make_plan

    plan = make_plan(parse(build_parser(), ["table3", "--rows", "base,B1,C1", "--allocation", "sequential",
                                            "--max_seeds", "5", "--out", str(tmp_path / "o")]))  # fmt: skip
    assert plan.allocation is not None and (plan.allocation.min_seeds, plan.allocation.max_seeds) == (2, 5)
    assert plan.controls() == {"base": ["B1", "C1"]}
    assert main(["sweep", "table3", "--allocation", "sequential", "--min_seeds", "4", "--max_seeds", "3",
                 "--out", str(tmp_path / "o")]) == 2  # fmt: skip
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "the command line: max_seeds (3) must be at least min_seeds (4)" in err[0]


@pytest.mark.parametrize("design", ["spending"])
def test_two_workers_reading_one_storage_take_the_same_decisions(tmp_path, design):
    """The real judge in two processes over the same records (what two workers on one storage read) queues the same
    seeds, and over an archive's first trials it asks for what the replay of the whole archive ran next."""
    import json

    sys.path.insert(0, str(REPO / "tests" / "reports"))
    import reports_fixtures as fx

    rows = [r for r in fx.TABLE3_ROWS if r[0] in ("base", "C1", "E1")]
    claims = [
        {"id": "c", "text": "One layer is worse", "compare": [{"row": "C1", "metric": "bleu", "expect": "lower"}]},
        {"id": "e", "text": "Learned", "compare": [{"row": "E1", "metric": "bleu", "expect": "lower"}]},
    ]
    out = fx.make_study(tmp_path / "out", rows=rows, seeds=(0, 1, 2), meta={"claims": claims}, storage=None,
                        seed_rates={("E1", s): 0.30 + 0.02 * s for s in range(3)},
                        plan={("E1", 2): "failed"})  # fmt: skip
    code = (
        "import json,sys; from ablate.ablations.results.evidence import decide; "
        "from ablate.ablations.results.load import read_finished; "
        "from ablate.ablations.statistics.sequential import Sequential; "
        f"d = decide(Sequential(2, 4, '{design}'), read_finished(sys.argv[1]), ['base', 'C1', 'E1'], "
        "{'base': ['C1', 'E1']}, n_samples=100); print(json.dumps([d.seeds, d.states, d.looks, d.finished]))"
    )
    said = [subprocess.run([sys.executable, "-c", code, str(out)], capture_output=True, text=True, check=True).stdout
            for _ in range(2)]  # fmt: skip
    assert said[0] == said[1]
    seeds, states, looks, _ = json.loads(said[0])
    assert looks >= 1 and states["C1"] == "decided" and seeds["C1"] == [0, 1, 2]  # no row is decided on two
    if states["E1"] == "open":  # its third seed failed: the design passes over it to seed 3
        assert seeds["E1"] == [0, 1, 3]
