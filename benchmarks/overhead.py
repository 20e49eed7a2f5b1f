"""Per-trial overhead: how long a fresh `ablate train` process takes to its first step, and a second trial in the
same process (how a sweep worker runs trials)."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from ablate.ablations.study.config import TrackingConfig
from ablate.ablations.tracking import wandb_mode
from ablate.ablations.training.result import TrainResult
from ablate.benchmarks.settings import BenchConfig
from ablate.data.errors import AblateError


def trial_overhead(bench: BenchConfig) -> dict[str, Any]:
    """Process start -> first training step of a fresh `ablate train` (warm caches), and the overhead of a second
    trial in the same process. Runs one short warm-up trial first (data caches, OS file cache of the libraries)."""
    base = ["train", "--study", bench.study, "--row", bench.row, "--preset", bench.trial_preset, "--json"]
    with tempfile.TemporaryDirectory(prefix="ablate-bench-") as tmp:
        warm = [*base, "--out", f"{tmp}/warm", "--train.max_steps", "1", "--train.final_full_validation", "false"]
        _run_python(f"from ablate.ablations.cli import main; main({warm!r})")
        first, second = Path(tmp, "first"), Path(tmp, "second")
        code = (
            f"from ablate.ablations.cli import main; main({[*base, *bench.trial_args, '--out', str(first)]!r}); "
            f"main({[*base, *bench.trial_args, '--out', str(second)]!r})"
        )
        started = time.time()
        _run_python(code)
        m1, m2 = TrainResult.read(first).metrics, TrainResult.read(second).metrics
        # result.json is written at the end of the trial, wall_time_s after the trial's own start.
        trial_end = TrainResult.path(first).stat().st_mtime
        first_step = trial_end - m1["wall_time_s"] + m1["overhead_s"]
    process_to_first_step = first_step - started
    trial_wall = trial_end - started
    return {
        "trial": f"ablate train --preset {bench.trial_preset} --row {bench.row} " + " ".join(bench.trial_args),
        "wandb_mode": wandb_mode(TrackingConfig()),
        "process_to_first_step_s": process_to_first_step,
        "trial_wall_s": trial_wall,
        "overhead_share": process_to_first_step / trial_wall,
        "in_process_overhead_s": m2["overhead_s"],
        "in_process_trial_wall_s": m2["wall_time_s"],
        "in_process_overhead_share": m2["overhead_s"] / m2["wall_time_s"],
        "steps": m1["steps"],
    }


def _run_python(code: str) -> None:
    """Run `code` in a fresh interpreter that can import this checkout's packages."""
    root = str(Path(__file__).resolve().parent.parent)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    if proc.returncode:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
        raise AblateError(f"the per-trial overhead run failed (exit {proc.returncode}): {tail[0]}")
