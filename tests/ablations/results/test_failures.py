"""A failing trial never runs away: a row x seed that fails keeps its seed (it is never replaced by the next one), a
row whose trials all fail stops with its first failure's cause, and a sweep in which nothing succeeded ends by
itself, non-zero, saying why, under both designs and with two workers."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace as NS

import pytest
from ablate.ablations.results.evidence import decide
from ablate.ablations.statistics.sequential import Sequential

REPO = Path(__file__).resolve().parents[3]


def _failed(reason: str = "RuntimeError: planted") -> NS:
    return NS(record=NS(state="failed", reason=reason))


def test_a_failed_seed_keeps_its_place_and_a_row_whose_trials_all_failed_stops():
    status: dict = {}
    first = decide(Sequential(2, 3), NS(status=status, out_dir="x"), ["A2"], {})
    assert first.seeds == {"A2": [0, 1]} and not first.finished
    status[("A2", 0)] = _failed("MisconfigurationException: No supported gpu backend found!")
    waiting = decide(Sequential(2, 3), NS(status=status, out_dir="x"), ["A2"], {})
    assert waiting.seeds == {"A2": [0, 1]}, "a failed seed is never replaced by the next one"
    status[("A2", 1)] = _failed()
    stopped = decide(Sequential(2, 3), NS(status=status, out_dir="x"), ["A2"], {})
    assert stopped.seeds == {"A2": [0, 1]} and stopped.finished
    assert stopped.states == {"A2": "failed"}
    assert (
        stopped.why["A2"]
        == "its 2 trial(s) failed (seed 0: MisconfigurationException: No supported gpu backend found!)"
    )


def test_rows_compared_only_with_a_failed_control_stop_with_it():
    status = {("base", s): _failed() for s in range(3)}
    controls = {"base": ["A1", "B1"]}
    decision = decide(Sequential(2, 3), NS(status=status, out_dir="x"), ["base", "A1", "B1"], controls)
    assert decision.states == {"base": "failed", "A1": "failed", "B1": "failed"} and decision.finished
    assert decision.why["A1"] == "its control base failed"


def _sweep(out: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "WANDB_MODE": "offline", "WANDB_SILENT": "true", "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "ablate.ablations.cli", "sweep", "table3", "--preset", "smoke", "--rows", "A2",
           "--workers", "2", "--train.lr_factor", "1e9", "--out", str(out), *args]  # fmt: skip
    return subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=600, check=False)


@pytest.mark.slow
@pytest.mark.parametrize("design", ["sequential", "fixed"])
def test_a_sweep_whose_every_trial_fails_ends_by_itself_non_zero_and_says_why(tmp_path, design):
    """The user's report: --hardware.accelerator gpu on a machine without one made 317 failed trials in 120 s and
    kept going, then exited 0 (that setting is now refused before any trial starts: the next test). Here every trial
    fails the same way, on two workers: a learning rate that makes the loss NaN at step 1."""
    out = tmp_path / design
    seeds = ("--seeds", "2") if design == "fixed" else ("--min_seeds", "2", "--max_seeds", "3")
    done = _sweep(out, "--allocation", design, *seeds)
    assert done.returncode == 1, done.stderr[-3000:]
    records = [json.loads(p.read_text()) for p in sorted((out / "records").glob("A2__seed*.json"))]
    assert 1 <= len(records) <= 3 and all(r["state"] == "failed" for r in records), [r["state"] for r in records]
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("ablate sweep: no trial succeeded (") and "A2 seed 0: " in last, last
    assert "diverged: training loss became nan" in last and "traceback in " in last and "Traceback" not in done.stderr
    assert Path(last.split("traceback in ")[1]).is_file()
    if design == "sequential":
        assert "[sweep] row A2 stopped: its 2 trial(s) failed (seed 0: " in done.stderr
    assert "last failure A2 seed" in done.stderr  # the live view's line names the cause


@pytest.mark.parametrize("hardware", [["--hardware.accelerator", "gpu"], ["--hardware.devices", "0"]])
def test_hardware_this_machine_cannot_run_is_refused_before_any_trial(tmp_path, capsys, hardware):
    """The local launcher runs the trials here: settings Lightning refuses on this machine fail the sweep (and its
    dry run) in one line, as `ablate train` does, before a trial starts."""
    import torch
    from ablate.ablations.cli import main

    if hardware[0] == "--hardware.accelerator" and torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    out = tmp_path / "out"
    for dry in (["--dry_run"], []):
        argv = ["sweep", "table3", "--preset", "smoke", "--rows", "A2", *hardware, "--out", str(out), *dry]
        assert main(argv) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and "Traceback" not in err, err
        assert err.startswith("ablate sweep: error: hardware.accelerator") and "Set --hardware.accelerator" in err
        assert not (out / "records").exists()
