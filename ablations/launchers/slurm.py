"""`ablate sweep --launcher slurm`: the sweep's workers as one SLURM job array, submitted through submitit.

Nothing here schedules: SLURM queues, places, preempts and requeues the jobs, submitit writes the batch script,
submits the array and requeues a job that gets its warning signal, and the Optuna storage hands trials to workers as
it does for local ones (`ablations.sweep.worker.work`). Each array task runs one ordinary sweep worker
(`ablate sweep ... --worker`) as a child process; with `slurm.nodes` x `slurm.tasks_per_node` > 1 the job's tasks are
the ranks of one DDP trial at a time (Lightning reads SLURM's environment), rank 0 claiming trials and the others
following it (`follow`).

Preemption and time limits: SLURM sends USR2 `signal_delay_s` before it stops a job (PreemptMode=REQUEUE with
preempt_send_user_signal, or the time limit); submitit calls `SweepJob.checkpoint`, which passes the signal on to
the worker (which saves the running trial at the end of its step and queues it for retry, as on Ctrl-C:
`ablations.runtime.interrupt`), waits for it, and hands submitit the same job to requeue. The retry resumes from the
checkpoint, in the same W&B run. `scancel` sends SIGTERM first: the trial saves itself the same way if its step ends
within SLURM's KillWait. A job killed without warning (node failure, SIGKILL) leaves its trial RUNNING with a dead
process and a stale heartbeat: another worker's liveness check re-runs it (`storage.queue.recover_dead`).

The storage URL reaches the jobs through the environment sbatch exports (ABLATE_STORAGE), never a file submitit
pickles. Each submission's job ids are kept in OUT/slurm/jobs.json; `ablate status` shows each trial's job.

`--dry_run` needs no cluster: it prints the batch script submitit would hand sbatch and writes nothing. A real
submission first checks what it needs (submitit, sbatch, srun, a controller that answers): what is missing is one
line and exit 2, before anything is queued.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ablate.ablations.launchers import Launch
from ablate.ablations.results.record import Layout
from ablate.ablations.results.storage.queue import Queue
from ablate.ablations.runtime import environment
from ablate.ablations.runtime.urls import ENV_VAR
from ablate.ablations.sweep import progress, runner
from ablate.ablations.sweep.plan import Plan
from ablate.ablations.sweep.queueing import current_keys, sync_records
from ablate.data.atomic import write_json_atomic
from ablate.data.errors import AblateError

JOBS_FILE = "jobs.json"
NAME = "slurm"
"""The launcher's name, its jobs' scheduler in the workers' environment, and its folder in OUT (OUT/slurm)."""
WARNING_SIGNAL = signal.SIGUSR2
"""What SLURM sends a job before preemption or its time limit (`--signal=USR2@N` in the batch script submitit
writes): the worker saves its trial and queues it for retry, and the job is requeued."""
SAVE_S_VAR = "ABLATE_SLURM_SAVE_S"
"""Seconds a SLURM job waits, after passing the warning signal on, for its worker to save the running trial."""
ALIVE = {"PENDING", "RUNNING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "CONFIGURING", "COMPLETING", "SUSPENDED",
         "RESIZING", "SIGNALING", "STAGE_OUT"}  # fmt: skip


@dataclass(frozen=True, kw_only=True)
class SlurmConfig:
    """SLURM settings of `ablate sweep --launcher slurm` (one job per worker, sized for one trial)."""

    partition: str | None = None
    """Partition (sbatch --partition); unset: the cluster's default."""
    account: str | None = None
    """Account to charge (sbatch --account)."""
    qos: str | None = None
    """Quality of service (sbatch --qos)."""
    time_min: int = 240
    """Time limit of each worker job, in minutes. Before it, the job gets SIGUSR2, saves its trial and requeues."""
    nodes: int = 1
    """Nodes per job: above 1, each trial runs with DDP across the nodes."""
    tasks_per_node: int = 1
    """Tasks (DDP ranks) per node: one per GPU."""
    gpus_per_node: int = 0
    """GPUs per node (sbatch --gpus-per-node); 0 for CPU jobs."""
    cpus_per_task: int | None = None
    """CPU cores per task (sbatch --cpus-per-task); unset: the cluster's default."""
    mem_gb: float | None = None
    """Memory per node in GB (sbatch --mem); unset: the cluster's default."""
    signal_delay_s: int = 90
    """Seconds between SIGUSR2 and the end of the job's time: the running step, a checkpoint and a requeue fit."""
    max_requeues: int = 50
    """How often one job may be requeued after preemption or its time limit."""
    max_jobs: int = 32
    """The most worker jobs one submission creates (the job array's size; --workers sets it below)."""
    sbatch: list[str] = field(default_factory=list)
    """Extra sbatch options, one per item, e.g. ['--constraint=a100', '--exclusive', '--mail-type=END']."""
    setup: list[str] = field(default_factory=list)
    """Shell lines the batch script runs before the worker, e.g. ['module load cuda/12.4']."""

    def __post_init__(self) -> None:
        for name in ("time_min", "nodes", "tasks_per_node", "signal_delay_s", "max_jobs"):
            if getattr(self, name) < 1:
                raise AblateError(f"slurm.{name}: must be >= 1, got {getattr(self, name)}")
        if self.gpus_per_node < 0 or self.max_requeues < 0:
            raise AblateError("slurm.gpus_per_node and slurm.max_requeues must be >= 0")
        for option in self.sbatch:
            if not option.startswith("--") or option.startswith("--array"):
                raise AblateError(f"slurm.sbatch: {option!r}: give long sbatch options, e.g. '--constraint=a100'")

    @property
    def ranks(self) -> int:
        return self.nodes * self.tasks_per_node


# --------------------------------------------------------------------------------------------------- the job
def worker_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """Where a SLURM task stands, in the words every worker reads (`environment.job_variables`): the job as `squeue`
    names it ('<array job>_<task>' in an array, else the job id), this run of it (SLURM_RESTART_COUNT: a requeued job
    keeps its id), the job's tasks and this task's rank (SLURM_NTASKS, SLURM_PROCID), and the warning signal. Empty
    outside a job."""
    job_id = environ.get("SLURM_JOB_ID")
    if not job_id:
        return {}
    array, task = environ.get("SLURM_ARRAY_JOB_ID"), environ.get("SLURM_ARRAY_TASK_ID")
    return environment.job_variables(
        NAME,
        f"{array}_{task}" if array and task else job_id,
        f"{job_id}.{int(environ.get('SLURM_RESTART_COUNT') or 0)}",
        tasks=int(environ.get("SLURM_NTASKS") or 1),
        rank=int(environ.get("SLURM_PROCID") or 0),
        warning=WARNING_SIGNAL,
    )


def save_s(default: int = 60) -> int:
    """How long a SLURM job waits for its warned worker to save (`SAVE_S_VAR`)."""
    return int(os.environ.get(SAVE_S_VAR) or default)


class SweepJob:
    """What one array task runs: the sweep worker as a child process. Checkpointable in submitit's sense."""

    def __init__(self, argv: list[str], cwd: str) -> None:
        self.argv, self.cwd = argv, cwd
        self._child: subprocess.Popen | None = None

    def __call__(self) -> int:
        cmd = [sys.executable, "-m", "ablate.ablations.cli", "sweep", *self.argv, "--worker"]
        self._child = subprocess.Popen(cmd, cwd=self.cwd, env={**os.environ, **worker_environment(os.environ)})
        code = self._child.wait()
        if code not in (0, 130):
            raise RuntimeError(f"the sweep worker exited with code {code}; see this job's log")
        return code

    def checkpoint(self, *args: Any, **kwargs: Any):
        """SLURM's warning signal: the worker saves its trial and queues it for retry; then submitit requeues us."""
        import submitit  # the optional [slurm] extra

        child = self._child
        if child is not None and _running(child.pid):  # SLURM may have signalled it too: USR2 is idempotent there
            child.send_signal(WARNING_SIGNAL)
            deadline = time.time() + save_s()
            while _running(child.pid) and time.time() < deadline:
                time.sleep(0.2)
            if _running(child.pid):  # the liveness check retries its trial from the last checkpoint
                child.kill()
        return submitit.helpers.DelayedSubmission(SweepJob(self.argv, self.cwd))

    def __getstate__(self) -> dict[str, Any]:
        return {"argv": self.argv, "cwd": self.cwd, "_child": None}


def _running(pid: int) -> bool:
    """Whether the child still runs. Not Popen.wait/poll: this runs in submitit's signal handler, which interrupted
    the Popen.wait of `__call__`, and that holds the lock they need; an exited child is a zombie until reaped."""
    return environment.process_state(pid) not in (None, "Z")


# ------------------------------------------------------------------------------------------------ launching
class SlurmLauncher:
    name = NAME
    help = (
        "a SLURM job array of --workers workers (submitit), sized by the slurm section (the command returns once "
        "the jobs are queued; with --wait, once the study ends)"
    )
    settings = SlurmConfig

    def launch(self, plan: Plan, launch: Launch) -> int:
        """Queue the rows, submit the workers as a job array, print the job ids (and follow with --wait)."""
        cfg = launch.settings or SlurmConfig()
        if launch.dry_run:
            print(batch_script(plan, cfg, _array_size(cfg, launch.workers, len(plan.keys()))), end="")
            return 0
        check_cluster(cfg, plan.run_config(plan.study.rows[0], plan.seeds[0]).hardware.accelerator)
        queue, queued = runner.start(plan)
        pending = len(queue.trials("WAITING"))
        ids = submit(plan, cfg, _array_size(cfg, launch.workers, pending)) if pending else []
        if not pending:
            print(f"sweep {plan.study.name}: no trial left to run in {plan.out}", file=sys.stderr)
        else:
            print(
                f"sweep {plan.study.name} at preset {plan.preset}: {pending} trial(s) queued ({queued} new); "
                f"{len(ids)} SLURM worker job(s) submitted: {' '.join(ids)}\n"
                f"  logs    {plan.out.resolve() / 'slurm'}/<job id>/\n"
                f"  follow  ablate status {plan.out} --watch 10",
                file=sys.stderr,
            )
        if launch.wait:
            started = time.time()
            wait(plan, ids, f"{plan.study.name} ({plan.preset}) on SLURM")
            sync_records(plan, queue)
            launch.finish()
            runner.print_next_steps(plan, time.time() - started)
        return 0

    def job_states(self, ids: list[str]) -> dict[str, str]:
        return job_states(ids)


LAUNCHER = SlurmLauncher()


def _array_size(cfg: SlurmConfig, workers: int | None, pending: int) -> int:
    """--workers (default: one per pending trial), at most slurm.max_jobs."""
    return max(1, min(workers or pending, pending or 1, cfg.max_jobs))


def _submitit():
    try:
        import submitit  # the optional [slurm] extra
    except ImportError:
        raise AblateError("--launcher slurm needs submitit: pip install 'ablate[slurm]'") from None
    return submitit


def executor(cfg: SlurmConfig, folder: Path, name: str, array_size: int, *, script_only: bool = False):
    """submitit's SlurmExecutor with the section's settings. `script_only`: one that only writes the batch
    script, which needs no cluster (submitit's executor otherwise refuses to exist where `srun` is missing)."""
    ex = _executor_class(script_only)(folder=str(folder / "%j"), max_num_timeout=cfg.max_requeues)
    extra = {}
    for option in cfg.sbatch:
        key, eq, value = option[2:].partition("=")
        extra[key.replace("-", "_")] = value if eq else True
    params = {
        "job_name": name,
        "partition": cfg.partition,
        "account": cfg.account,
        "qos": cfg.qos,
        "time": cfg.time_min,
        "nodes": cfg.nodes,
        "ntasks_per_node": cfg.tasks_per_node,
        "gpus_per_node": cfg.gpus_per_node or None,
        "cpus_per_task": cfg.cpus_per_task,
        "mem": f"{int(cfg.mem_gb * 1024)}MB" if cfg.mem_gb else None,
        "signal_delay_s": cfg.signal_delay_s,
        "array_parallelism": array_size,
        "setup": list(cfg.setup),
        "additional_parameters": extra,
    }
    ex.update_parameters(**{k: v for k, v in params.items() if v is not None})
    return ex


def _executor_class(script_only: bool) -> type:
    submitit = _submitit()
    if not script_only:
        return submitit.SlurmExecutor

    class ScriptOnly(submitit.SlurmExecutor):
        """submitit's executor for writing the batch script only: without its check for `srun` (`affinity`, its one
        look at the cluster)."""

        @classmethod
        def affinity(cls) -> int:
            return 1

    return ScriptOnly


def batch_script(plan: Plan, cfg: SlurmConfig, count: int) -> str:
    """The batch script a submission of `count` workers would hand sbatch; no cluster needed. submitit has no public
    call that only renders it: this sets up the array executor its batch submission makes (as
    `SlurmExecutor._internal_process_submissions` does) and asks it for the text."""
    ex = executor(cfg, Layout(plan.out.resolve()).jobs_dir(NAME), _job_name(plan), count, script_only=True)
    ex.parameters["map_count"] = count
    return ex._make_submission_file_text(ex._submitit_command_str, "dry-run") + "\n"


def _job_name(plan: Plan) -> str:
    return f"ablate-{plan.name}"


def check_cluster(cfg: SlurmConfig, accelerator: str) -> None:
    """What a submission needs and sbatch would refuse, said in one line before anything is queued."""
    if accelerator in ("gpu", "cuda") and cfg.gpus_per_node == 0:
        raise AblateError("slurm.gpus_per_node is 0 but hardware.accelerator is gpu: ask for GPUs, e.g. "
                          "--slurm.gpus_per_node 1, or train on CPUs with --hardware.accelerator cpu")  # fmt: skip
    _submitit()
    for command, role in (
        ("sbatch", "it submits the jobs"),
        ("srun", "the batch script starts the workers with it"),
        ("sinfo", "it checks that the cluster answers"),
    ):
        if shutil.which(command) is None:
            raise AblateError(f"--launcher slurm: {command} is not on PATH ({role}); run this on a SLURM login "
                              "node, or print the batch script with --dry_run")  # fmt: skip
    known = subprocess.run(["sinfo", "-h", "-o", "%R"], capture_output=True, text=True, check=False)
    if known.returncode != 0:
        said = " ".join((known.stderr or "").split())[:200] or f"exit {known.returncode}"
        raise AblateError(f"--launcher slurm: no SLURM controller answers (sinfo: {said})")
    partitions = sorted(set(known.stdout.split()))
    if cfg.partition and cfg.partition not in partitions:
        raise AblateError(f"slurm.partition: no partition {cfg.partition!r} on this cluster; "
                          f"it has {', '.join(partitions)}")  # fmt: skip


def submit(plan: Plan, cfg: SlurmConfig, count: int) -> list[str]:
    """Submit `count` sweep workers as a job array; returns the job ids."""
    folder = Layout(plan.out.resolve()).jobs_dir(NAME)
    ex = executor(cfg, folder, _job_name(plan), count)
    ddp = {"devices": cfg.tasks_per_node, "num_nodes": cfg.nodes, "strategy": "ddp"} if cfg.ranks > 1 else {}
    job = SweepJob(runner.worker_argv(plan, **({"hardware": ddp} if ddp else {})), os.getcwd())
    os.environ[ENV_VAR] = plan.storage  # sbatch exports our environment to the jobs: no file holds it
    try:
        jobs = _submit_array(ex, job, count)
    except Exception as err:  # noqa: BLE001 - sbatch's refusal, as one line
        first = " ".join(str(err).split())[:300]
        raise AblateError(f"sbatch refused the job array: {first}; fix the slurm section (--dry_run prints the "
                          "script sbatch was given)") from None  # fmt: skip
    ids = [j.job_id for j in jobs]
    _remember(folder, ids, count)
    return ids


def _submit_array(ex, job: SweepJob, count: int):
    with ex.batch():
        return [ex.submit(job) for _ in range(count)]


def _remember(folder: Path, ids: list[str], count: int) -> None:
    path = folder / JOBS_FILE
    known = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {"submissions": []}
    known["submissions"].append({"jobs": ids, "workers": count, "submitted_at": time.time()})
    write_json_atomic(path, known)


# ------------------------------------------------------------------------------------------------ job states
def job_states(ids: list[str]) -> dict[str, str]:
    """Job id -> SLURM state (PENDING, RUNNING, REQUEUED, COMPLETED, ...): squeue for live jobs, sacct for the rest
    (without accounting, ended jobs show as 'ENDED')."""
    if not ids or shutil.which("squeue") is None:
        return {}
    states: dict[str, str] = {}
    live = subprocess.run(["squeue", "-h", "-o", "%i %T", "-j", ",".join(ids)], capture_output=True, text=True,
                          check=False)  # fmt: skip
    for line in live.stdout.splitlines():
        job, _, state = line.partition(" ")
        states[job] = state.strip()
    ended = [j for j in ids if j not in states]
    if ended and shutil.which("sacct"):
        done = subprocess.run(["sacct", "-X", "-n", "-P", "-o", "JobID,State", "-j", ",".join(ended)],
                              capture_output=True, text=True, check=False)  # fmt: skip
        for line in done.stdout.splitlines():
            job, _, state = line.partition("|")
            states.setdefault(job, state.split()[0] if state else "?")
    return {j: states.get(j, "ENDED") for j in ids}


def wait(plan, ids: list[str], title: str, poll_s: float = 3.0) -> None:
    """Follow the study until no trial is pending or running and no job is alive (`--wait`); the trials are the
    plan's and, at the sequential design, those the workers' looks queue as it runs (`queueing.current_keys`)."""
    queue = Queue.open(plan.storage, plan.name)
    live = runner.live_view(title)
    idle = 0
    try:
        while True:
            trials = queue.trials()
            rows = progress.collect(trials, current_keys(plan, trials))
            alive = [j for j, s in job_states(ids).items() if s in ALIVE]
            counts = progress.counts(rows)
            live(progress.render(rows, len(ids), title),
                 f"{progress.summary_line(rows, len(ids))}; {len(alive)} job(s) alive")  # fmt: skip
            if not counts["pending"] and not counts["running"]:
                return
            if not alive and not counts["running"] and plan.timed_out():
                return  # the workers stopped at --timeout (they start no trial after it): the rest stay queued
            idle = 0 if alive else idle + 1
            if idle >= 3:  # a few polls, as a job just submitted may not show yet
                raise AblateError(f"no worker job is alive and {counts['pending'] + counts['running']} trial(s) "
                                  "are left: see the jobs' logs, then rerun the same command")  # fmt: skip
            time.sleep(poll_s)
    finally:
        live(None, None)


__all__ = ["LAUNCHER", "SlurmConfig", "SweepJob", "submit", "batch_script", "job_states", "wait"]
