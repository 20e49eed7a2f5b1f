"""`ablate sweep --launcher slurm` on a real SLURM cluster (.ci/run starts a single-node one): a job array of two
workers finishes every row once, `--wait` past `--timeout` ends with the rest queued, a worker warned with USR2
(what preemption and the time limit send) is requeued and its trial resumes from its checkpoint, a worker cancelled
outright has its trial run by the other, a two-task job trains one DDP trial over srun, `--dry_run` prints a script
sbatch accepts, bad settings are one line.

Skipped where no cluster answers `sinfo`. Nothing of SLURM or submitit is mocked.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]


def _cluster() -> bool:
    if shutil.which("sinfo") is None or shutil.which("sbatch") is None:
        return False
    try:
        up = subprocess.run(["sinfo", "-h", "-o", "%T"], capture_output=True, text=True, timeout=10, check=False)
    except subprocess.TimeoutExpired:
        return False
    return up.returncode == 0 and any(s in up.stdout for s in ("idle", "mixed", "allocated"))


slurm = pytest.mark.slurm
# One test of this file at a time under pytest-xdist (`make test`: --dist loadgroup): the single-node cluster has
# the machine's cores, and two tests' jobs would queue behind each other past their waits.
pytestmark = pytest.mark.xdist_group("slurm")
needs_cluster = pytest.mark.skipif(not _cluster(), reason="no SLURM cluster answers sinfo (.ci/run starts one)")


def _ablate(sweeps, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ablate.ablations.cli", *args], cwd=REPO, env=sweeps.env,
                          capture_output=True, text=True, timeout=timeout, check=False)  # fmt: skip


def _sweep(sweeps, study: str, out: Path, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return _ablate(sweeps, "sweep", str(sweeps.study(study)), "--out", str(out), "--launcher", "slurm", "--no_report",
                   "--slurm.time_min", "10", *args, timeout=timeout)  # fmt: skip


def _jobs(out: Path) -> list[str]:
    saved = json.loads((out / "slurm" / "jobs.json").read_text(encoding="utf-8"))
    return [job for submission in saved["submissions"] for job in submission["jobs"]]


def _complete(sweeps, out: Path, name: str) -> dict[str, list]:
    from optuna.trial import TrialState

    by_key: dict[str, list] = {}
    for t in sweeps.trials(out, name):
        if t.state == TrialState.COMPLETE:
            by_key.setdefault(f"{t.user_attrs['row']}__seed{t.user_attrs['seed']}", []).append(t)
    return by_key


def _running_long_trial(sweeps, out: Path, workers: int) -> list[str]:
    """Submit sweep_interrupt.yaml as `workers` jobs and wait until row 'long' has a checkpoint; the job ids."""
    submitted = _sweep(sweeps, "sweep_interrupt.yaml", out, "--workers", str(workers))
    assert submitted.returncode == 0, submitted.stderr[-3000:]
    checkpoint = out / "trials" / "long__seed0" / "checkpoints" / "last.ckpt"
    assert sweeps.wait_for(checkpoint.exists, 180), subprocess.run(["squeue"], capture_output=True, text=True).stdout
    return _jobs(out)


def _queue_empty(ids: list[str]) -> bool:
    listed = subprocess.run(["squeue", "-h", "-j", ",".join(ids)], capture_output=True, text=True, check=False)
    return not listed.stdout.strip()


@slurm
@needs_cluster
def test_dry_run_prints_a_batch_script_sbatch_accepts_and_writes_nothing(sweeps, tmp_path):
    out = tmp_path / "out"
    dry = _sweep(sweeps, "sweep_split.yaml", out, "--workers", "2", "--dry_run", "--slurm.sbatch", "[--comment=x]")
    assert dry.returncode == 0, dry.stderr[-3000:]
    script = tmp_path / "job.sh"
    script.write_text(dry.stdout, encoding="utf-8")
    assert dry.stdout.startswith("#!/bin/bash") and "#SBATCH --array=0-1%2" in dry.stdout
    assert "#SBATCH --comment=x" in dry.stdout and "#SBATCH --signal=USR2@90" in dry.stdout
    checked = subprocess.run(["sbatch", "--test-only", str(script)], capture_output=True, text=True, check=False)
    assert checked.returncode == 0 and "to start at" in checked.stderr, checked.stderr
    assert not out.exists()


@slurm
@needs_cluster
def test_bad_slurm_settings_are_one_line_and_exit_2(sweeps, tmp_path):
    unknown = _sweep(sweeps, "sweep_split.yaml", tmp_path / "a", "--slurm.partition", "nosuchpart")
    assert unknown.returncode == 2 and "Traceback" not in unknown.stderr, unknown.stderr[-2000:]
    assert "slurm.partition: no partition 'nosuchpart'" in unknown.stderr.strip().splitlines()[-1]
    gpu = _sweep(sweeps, "sweep_split.yaml", tmp_path / "b", "--hardware.accelerator", "gpu")
    assert gpu.returncode == 2 and "Traceback" not in gpu.stderr, gpu.stderr[-2000:]
    assert "slurm.gpus_per_node is 0 but hardware.accelerator is gpu" in gpu.stderr.strip().splitlines()[-1]


@slurm
@needs_cluster
@pytest.mark.slow
def test_a_job_array_of_two_workers_runs_every_row_once(sweeps, tmp_path):
    out = tmp_path / "out"
    run = _sweep(sweeps, "sweep_split.yaml", out, "--workers", "2", "--wait")
    assert run.returncode == 0, run.stderr[-3000:]
    ids = _jobs(out)
    assert len(ids) == 2 and "2 SLURM worker job(s) submitted" in run.stderr
    complete = _complete(sweeps, out, "sweep-split-smoke")
    assert {k: len(v) for k, v in complete.items()} == {f"s{r}__seed{s}": 1 for r in (1, 2) for s in (0, 1)}
    assert {t.user_attrs["job"] for ts in complete.values() for t in ts} <= set(ids)
    assert len(list((out / "records").glob("*.json"))) == 4
    assert sweeps.wait_for(lambda: _queue_empty(ids), 60)  # --wait returns with the study; the jobs then exit
    status = _ablate(sweeps, "status", str(out))
    assert status.returncode == 0 and "COMPLETED" in status.stdout, status.stdout  # the launcher's job_states
    assert any(job in status.stdout for job in ids), status.stdout


@slurm
@needs_cluster
def test_wait_past_its_timeout_returns_with_the_rest_queued_and_says_so(sweeps, tmp_path):
    """--timeout reaches the SLURM workers as a time: past it they claim nothing and end. `--wait` then ends as the
    local launcher does, exit 0 with the same command to go on, not as if the jobs had died."""
    from ablate.ablations.results.storage.queue import Queue

    out = tmp_path / "out"
    run = _sweep(sweeps, "sweep_split.yaml", out, "--workers", "1", "--timeout", "1s", "--wait")
    assert run.returncode == 0, run.stderr[-3000:]
    assert "no worker job is alive" not in run.stderr
    # A job that starts within the second may claim one trial before the deadline (the CLI imports torch only to
    # train); it finishes that one and claims no other.
    ended = re.search(r"sweep stopped at its --timeout after [\d.]+ min, (\d) of 4 trials finished; the same command "
                      r"goes on with the rest", run.stderr)  # fmt: skip
    assert ended is not None, run.stderr
    finished = int(ended.group(1))
    assert finished <= 1 and len(list((out / "records").glob("*.json"))) == finished
    assert sweeps.wait_for(lambda: _queue_empty(_jobs(out)), 120)  # the job ends without claiming another
    queue = Queue.open(f"journal:{out / 'optuna.journal'}", "sweep-split-smoke")
    assert len(queue.trials("WAITING")) == 4 - finished and not queue.trials("RUNNING")


@slurm
@needs_cluster
@pytest.mark.slow
def test_a_worker_warned_by_slurm_requeues_and_its_trial_resumes_from_its_checkpoint(sweeps, tmp_path):
    out = tmp_path / "out"
    (job,) = _running_long_trial(sweeps, out, workers=1)
    subprocess.run(["scancel", "--signal=USR2", job], check=True)  # what preemption and the time limit send first
    assert sweeps.wait_for(lambda: _queue_empty([job]), 300)

    complete = _complete(sweeps, out, "sweep-interrupt-smoke")
    assert {k: len(v) for k, v in complete.items()} == {"long__seed0": 1, "wide__seed0": 1}
    record = sweeps.records(out)["long__seed0"]
    (resumed_at,) = record["metrics"]["resumed_at_steps"]  # the record shows the restart ...
    assert 0 < resumed_at < record["metrics"]["steps"]
    assert record["curves"]["train"][0]["step"] == 4  # ... and keeps the whole curve
    log = "".join(p.read_text(encoding="utf-8") for p in (out / "slurm").rglob("*_log.out"))
    assert f"Requeued job {job}" in log, log[-3000:]
    stopped = [t for t in sweeps.trials(out, "sweep-interrupt-smoke") if t.user_attrs.get("retried")]
    assert len(stopped) == 1 and "the slurm job's warning signal" in stopped[0].user_attrs["reason"]


@slurm
@needs_cluster
@pytest.mark.slow
def test_a_worker_cancelled_outright_has_its_trial_run_by_the_other(sweeps, tmp_path):
    out = tmp_path / "out"
    ids = _running_long_trial(sweeps, out, workers=2)
    owner = next(t.user_attrs["job"] for t in sweeps.trials(out, "sweep-interrupt-smoke")
                 if t.user_attrs.get("row") == "long" and "job" in t.user_attrs)  # fmt: skip
    subprocess.run(["scancel", owner], check=True)  # no USR2: SIGTERM, then SIGKILL after KillWait
    assert sweeps.wait_for(lambda: _queue_empty(ids), 300)

    complete = _complete(sweeps, out, "sweep-interrupt-smoke")
    assert {k: len(v) for k, v in complete.items()} == {"long__seed0": 1, "wide__seed0": 1}
    (other,) = set(ids) - {owner}
    assert complete["long__seed0"][0].user_attrs["job"] == other
    assert sweeps.records(out)["long__seed0"]["metrics"]["steps"] == 400


@slurm
@needs_cluster
@pytest.mark.slow
def test_a_two_task_job_trains_each_trial_with_ddp_over_srun(sweeps, tmp_path):
    out = tmp_path / "out"
    run = _sweep(sweeps, "sweep_kill.yaml", out, "--workers", "1", "--slurm.tasks_per_node", "2", "--wait")
    assert run.returncode == 0, run.stderr[-3000:]
    records = sweeps.records(out)
    assert sorted(records) == ["long__seed0", "short__seed0"]
    assert all(r["state"] == "complete" and r["metrics"]["device"].endswith("x2") for r in records.values())
    logs = "".join(p.read_text(encoding="utf-8") for p in (out / "slurm").rglob("*_log.err"))
    assert "GLOBAL_RANK: 1, MEMBER: 2/2" in logs
