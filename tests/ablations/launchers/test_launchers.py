"""Launchers behind one interface: a launcher added from outside the package is offered by `ablate sweep
--launcher`, with its own settings section, and can run a sweep to its end with the shared pieces alone; a launcher
whose scheduler runs workers as jobs, warns and requeues them is one module too (`Batch`); and the SLURM
launcher without a cluster: `--dry_run` prints the batch script, a real submission names what is missing in one
line (exit 2) before anything is written. Nothing here needs SLURM: the cluster's commands are kept off PATH."""

from __future__ import annotations

import signal
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from ablate.ablations import cli, launchers

STUDIES = Path(__file__).resolve().parents[1] / "studies"


@dataclass(frozen=True, kw_only=True)
class InlineSettings:
    """Settings of the test's inline launcher."""

    trials: int = 99
    """The most trials it runs."""


@dataclass
class Inline:
    """A third launcher, as one new module would define it: the sweep's one worker runs in this process."""

    name: str = "inline"
    help: str = "one worker in this process (a test's)"
    settings: type | None = InlineSettings
    calls: list = None

    def launch(self, plan, launch) -> int:
        from ablate.ablations.sweep import runner
        from ablate.ablations.sweep.worker import work

        self.calls.append((plan, launch))
        if launch.dry_run:
            return 0
        runner.start(plan)
        work(plan, max_trials=launch.settings.trials)
        launch.finish()
        return 0


@pytest.fixture
def inline():
    launcher = launchers.register(Inline(calls=[]))
    yield launcher
    launchers.unregister(launcher.name)


@pytest.fixture
def no_cluster(tmp_path, monkeypatch) -> Path:
    """A PATH without sbatch, srun or sinfo (whether or not this machine has a cluster)."""
    bare = tmp_path / "bin"
    bare.mkdir()
    monkeypatch.setenv("PATH", str(bare))
    return bare


def _sweep(out: Path, *args: str) -> int:
    return cli.main(["sweep", str(STUDIES / "sweep_split.yaml"), "--out", str(out), *args])


def test_the_package_launchers_are_found_and_a_registered_one_is_offered_with_its_settings(inline, tmp_path, capsys):
    assert list(launchers.available())[:2] == ["local", "slurm"]

    rc = _sweep(tmp_path / "out", "--launcher", "inline", "--inline.trials", "3", "--workers", "2", "--dry_run")
    assert rc == 0, capsys.readouterr().err
    ((plan, launch),) = inline.calls
    assert plan.study.name == "sweep-split" and plan.out == tmp_path / "out"
    assert (launch.workers, launch.dry_run, launch.wait, launch.settings) == (2, True, False, InlineSettings(trials=3))
    from ablate.ablations.commands.sweep import build_parser

    shown = " ".join(build_parser().format_help().split())
    assert "inline: one worker in this process (a test's)" in shown and "--inline.trials TRIALS" in shown


def test_an_unknown_launcher_is_one_line_naming_the_choices(tmp_path, capsys):
    assert _sweep(tmp_path / "out", "--launcher", "inline") == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "inline" in err[0] and "local" in err[0] and "slurm" in err[0]


@pytest.mark.slow
def test_a_registered_launcher_runs_a_sweep_to_its_end_and_the_report_follows(inline, sweeps, tmp_path, monkeypatch):
    monkeypatch.setenv("ABLATE_CACHE", sweeps.env["ABLATE_CACHE"])
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    out = tmp_path / "out"
    reported = []
    monkeypatch.setattr("ablate.ablations.commands.sweep._report", lambda plan: reported.append(plan.out))

    assert _sweep(out, "--launcher", "inline", "--rows", "s1", "--seeds", "1") == 0
    assert sorted(p.name for p in (out / "records").glob("*.json")) == ["s1__seed0.json"]
    assert reported == [out]


# ------------------------------------------------------------------------------------------ SLURM without a cluster
def test_a_dry_run_needs_no_cluster_and_prints_the_batch_script(no_cluster, tmp_path, capsys):
    out = tmp_path / "out"
    rc = _sweep(out, "--launcher", "slurm", "--dry_run", "--workers", "2", "--slurm.sbatch", "[--comment=x]")
    printed = capsys.readouterr()
    assert rc == 0, printed.err
    assert printed.out.startswith("#!/bin/bash\n") and "#SBATCH --array=0-1%2" in printed.out
    assert "#SBATCH --comment=x" in printed.out and "#SBATCH --signal=USR2@90" in printed.out
    assert f"#SBATCH --output={out.resolve()}/slurm/" in printed.out and "\nsrun --unbuffered" in printed.out
    assert not out.exists()


def test_a_dry_run_without_submitit_is_one_line(no_cluster, tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "submitit", None)  # what `import submitit` meets where it is not installed
    assert _sweep(tmp_path / "out", "--launcher", "slurm", "--dry_run") == 2
    printed = capsys.readouterr()
    assert printed.out == ""
    assert printed.err.strip().splitlines() == [
        "ablate sweep: error: --launcher slurm needs submitit: pip install 'ablate[slurm]'"
    ]


def _fake(bin_dir: Path, command: str, script: str = "exit 0") -> None:
    path = bin_dir / command
    path.write_text(f"#!/bin/sh\n{script}\n")
    path.chmod(0o755)


@pytest.mark.parametrize(
    "present, missing",
    [
        ((), "sbatch is not on PATH"),
        (("sbatch",), "srun is not on PATH"),
        (("sbatch", "srun"), "no SLURM controller answers"),
    ],
)
def test_a_submission_without_a_cluster_names_what_is_missing_before_writing_anything(
    no_cluster, tmp_path, capsys, present, missing
):
    for command in present:
        _fake(no_cluster, command)
    _fake(no_cluster, "sinfo", "echo 'slurm_load_partitions: Unable to contact slurm controller' >&2; exit 1")
    out = tmp_path / "out"
    assert _sweep(out, "--launcher", "slurm", "--no_report") == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("ablate sweep: error: --launcher slurm: ") and missing in err[0]
    assert not out.exists()


def test_a_report_that_fails_after_a_sweep_is_one_line_and_the_sweep_still_succeeds(tmp_path, capsys):
    from types import SimpleNamespace

    from ablate.ablations.commands.sweep import _report

    _report(SimpleNamespace(out=tmp_path / "nothing-here", storage=f"journal:{tmp_path / 'optuna.journal'}"))
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("report: ") and "nothing-here" in err[0]


# ------------------------------------------------------------------------- a scheduler's launcher, as one module
@dataclass
class Batch:
    """A launcher whose scheduler runs each worker as a job, as one new module would define it (a PBS or LSF
    launcher): it says where the worker stands in ablate's variables (`environment.job_variables`), requeues a job
    whose worker its warning signal stopped, and tells `ablate status` each job's state. Nothing else in ablate
    changes for it: the storage, the trial's retry, the resume from its checkpoint and status are the shared ones."""

    name: str = "batch"
    help: str = "a test's scheduler: each worker a job, requeued after its warning"
    settings: type | None = None
    env: dict = None
    procs: list = None

    def launch(self, plan, launch) -> int:
        import subprocess

        from ablate.ablations.runtime import environment
        from ablate.ablations.runtime.urls import ENV_VAR
        from ablate.ablations.sweep import runner

        runner.start(plan)
        argv = [sys.executable, "-m", "ablate.ablations.cli", "sweep", *runner.worker_argv(plan), "--worker"]
        for run in range(3):  # the job, and its requeues after a warning (exit 130: saved, queued for retry)
            where = environment.job_variables("batch", "b7", f"b7.{run}", warning=signal.SIGUSR1)
            self.procs.append(subprocess.Popen(argv, env={**self.env, ENV_VAR: plan.storage, **where}))
            if self.procs[-1].wait() != 130:
                break
        return self.procs[-1].returncode

    def job_states(self, ids: list[str]) -> dict[str, str]:
        return {job: "DONE" for job in ids}


@pytest.mark.slow
def test_a_launcher_of_a_schedulers_jobs_is_one_module(sweeps, tmp_path, monkeypatch, capsys):
    """A job warned by its scheduler saves its trial, is requeued by its launcher and the trial resumes from its
    checkpoint; each trial names its job, and `ablate status` shows the job's state as the launcher tells it."""
    import threading

    batch = launchers.register(Batch(env=dict(sweeps.env), procs=[]))
    monkeypatch.setenv("ABLATE_CACHE", sweeps.env["ABLATE_CACHE"])
    monkeypatch.setenv("COLUMNS", "200")
    out = tmp_path / "out"
    rc = []
    study = str(STUDIES / "sweep_interrupt.yaml")
    sweep = threading.Thread(target=lambda: rc.append(cli.main(["sweep", study, "--out", str(out), "--launcher",
                                                                 "batch", "--no_report"])))  # fmt: skip
    try:
        sweep.start()
        checkpoint = out / "trials" / "long__seed0" / "checkpoints" / "last.ckpt"
        assert sweeps.wait_for(checkpoint.exists, 180)
        batch.procs[0].send_signal(signal.SIGUSR1)  # the scheduler's warning: preemption, a time limit
        sweep.join(300)
    finally:
        launchers.unregister(batch.name)
    assert rc == [0] and len(batch.procs) == 2  # warned once, requeued once, then finished

    trials = sweeps.trials(out, "sweep-interrupt-smoke")
    retried = [t for t in trials if t.user_attrs.get("retried")]
    assert len(retried) == 1 and "the batch job's warning signal" in retried[0].user_attrs["reason"]
    assert {(t.user_attrs.get("job"), t.user_attrs.get("scheduler")) for t in trials} == {("b7", "batch")}
    record = sweeps.records(out)["long__seed0"]
    assert record["state"] == "complete" and 0 < record["metrics"]["resumed_at_steps"][0] < record["metrics"]["steps"]

    launchers.register(batch)
    try:
        capsys.readouterr()
        assert cli.main(["status", str(out)]) == 0
    finally:
        launchers.unregister(batch.name)
    assert "b7 DONE" in capsys.readouterr().out
