"""The README's figures come from the tool: its cost line is what `ablate sweep table3 --preset tiny --dry_run`
prints (the design's three core-hour figures, and their wall times on the 2-core machine it names), and its install
line installs every command it then tells a reader to run."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
README = (REPO / "README.md").read_text(encoding="utf-8")


def _dry_run(cores: set[int] | None = None) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "ablate.ablations.cli", "sweep", "table3", "--preset", "tiny", "--dry_run"],
        cwd=REPO, capture_output=True, text=True, timeout=300,
        preexec_fn=(lambda: os.sched_setaffinity(0, cores)) if cores else None,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    (line,) = [line for line in (done.stdout + done.stderr).splitlines() if line.strip().startswith("cost:")]
    return line


def test_the_readmes_cost_is_the_dry_runs_core_hours():
    line = _dry_run()
    said = re.search(r"from ([\d.]+) \(every row stopped at min_seeds 2\), ([\d.]+) \(every row decided at 3 seeds\) "
                     r"to ([\d.]+) core-hours", line)  # fmt: skip
    assert said, line
    low, middle, high = said.groups()
    assert (
        f"from {low} core-hours (every row stopped at 2 seeds), {middle} (every row decided at 3 seeds) to {high} "
        "(every row open to 4)" in " ".join(README.split())
    ), (low, middle, high)


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two cores to price the 2-core machine")
def test_the_readmes_wall_times_are_the_dry_runs_on_two_cores():
    line = _dry_run(cores=set(sorted(os.sched_getaffinity(0))[:2]))
    walls = re.search(r"; ([\dhm]+) with every row stopped at 2 seeds, ([\dhm]+) with every row decided at 3, "
                      r"([\dhm]+) with every row open to 4", line)  # fmt: skip
    assert walls, line
    text = " ".join(README.split())
    assert f"2-core machine is {walls[1]}, {walls[2]} and {walls[3]}" in text, walls.groups()
    assert f"resume): {walls[2]} on 2 cores" in text  # the study command's own comment: the middle of the range


def test_the_install_line_installs_what_the_readme_runs():
    (install,) = re.findall(r"pip install -e \"\.\[([a-z,]+)\]\"", README)
    extras = set(install.split(","))
    if "optuna-dashboard" in README:
        assert "dashboard" in extras, install
    if "--backend slurm" in README or "submitit" in README:
        assert "slurm" in extras, install


def test_the_smoke_run_is_timed_once_as_the_sweep_says_it():
    """The first-run block's comment and its excerpt's last line give the same time (they once said 4.0 and 7.8)."""
    (comment,) = re.findall(r"--preset smoke --out runs/smoke +# 41 trials, ([\d.]+) minutes on 2 cores", README)
    (printed,) = re.findall(r"sweep finished in ([\d.]+) min\. Next:", README)
    assert comment == printed
    started = (REPO / "docs" / "getting-started.md").read_text(encoding="utf-8")
    assert f"it took {printed} minutes" in started
