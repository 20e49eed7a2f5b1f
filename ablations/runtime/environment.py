"""What a worker process learns from its environment: the one module that reads it.

Whatever launched a sweep worker tells it where it stands through ablate's own environment variables, whichever
scheduler runs it: the launcher translates its scheduler's account (SLURM's `SLURM_*`) into these when it starts
the worker (`job_variables`), so nothing outside the launcher's module knows the scheduler. They say the job, this
run of it (a requeued job runs again), the job's tasks and this one's rank, and the signal that warns of its end;
Lightning sets `LOCAL_RANK` in the ranks it relaunches for plain DDP; the local launcher says how many workers share
this machine (`ABLATE_WORKERS`). Everything else asks `here()`, read afresh at each call (a test sets the variables
it needs).

Application settings that are not about where a worker stands (the storage URL, the data cache) are read where
they are used.
"""

from __future__ import annotations

import os
import platform
import signal
from collections.abc import Mapping
from dataclasses import dataclass

WORKERS_VAR = "ABLATE_WORKERS"
"""How many local worker processes share this machine's cores (the local launcher sets it)."""
SCHEDULER_VAR = "ABLATE_SCHEDULER"
"""The launcher whose scheduler runs this worker as a job ('slurm'); unset outside a job."""
JOB_VAR = "ABLATE_JOB"
"""The job as its scheduler's queue names it ('100_7': task 7 of array 100); `ablate status` shows it."""
JOB_RUN_VAR = "ABLATE_JOB_RUN"
"""This run of the job: a job requeued after preemption keeps its name and runs again ('107.0', then '107.1')."""
TASKS_VAR = "ABLATE_JOB_TASKS"
"""The job's tasks: above 1 they are the DDP ranks of one trial at a time."""
RANK_VAR = "ABLATE_JOB_RANK"
"""This task's rank among them: 0 claims the trials, the others follow it."""
WARNING_VAR = "ABLATE_JOB_WARNING"
"""The name of the signal the scheduler sends before it stops the job ('SIGUSR2'): the worker saves its trial and
queues it for retry, and the job is requeued."""


@dataclass(frozen=True)
class WorkerEnv:
    """Where this process stands: the scheduler's job it runs in (if any), its rank, and how many workers share its
    machine."""

    scheduler: str | None = None
    """SCHEDULER_VAR: the launcher whose job this is; None outside a job (a local worker, `ablate train`)."""
    job: str | None = None
    """JOB_VAR: the job's name in its scheduler's queue."""
    job_run: str | None = None
    """JOB_RUN_VAR: this run of the job (a requeue is a new run)."""
    tasks: int = 1
    """TASKS_VAR: the job's tasks."""
    rank: int = 0
    """RANK_VAR: this task's rank among them."""
    warning_signal: int | None = None
    """WARNING_VAR, as a signal number: what warns this worker of its job's end; None where nothing does."""
    local_rank: int = 0
    """LOCAL_RANK: above 0 in a process Lightning relaunched as an extra rank of a plain-DDP trial."""
    local_workers: int = 1
    """ABLATE_WORKERS: the local worker processes sharing this machine's cores."""

    @classmethod
    def read(cls, environ: Mapping[str, str] | None = None) -> WorkerEnv:
        env = os.environ if environ is None else environ
        warning = env.get(WARNING_VAR)
        return cls(
            scheduler=env.get(SCHEDULER_VAR) or None,
            job=env.get(JOB_VAR) or None,
            job_run=env.get(JOB_RUN_VAR) or None,
            tasks=int(env.get(TASKS_VAR) or 1),
            rank=int(env.get(RANK_VAR) or 0),
            warning_signal=int(signal.Signals[warning]) if warning else None,
            local_rank=int(env.get("LOCAL_RANK") or 0),
            local_workers=int(env.get(WORKERS_VAR) or 1),
        )

    @property
    def in_job(self) -> bool:
        return self.job is not None

    @property
    def ranks_share_job(self) -> bool:
        """The job's tasks are the ranks of one trial at a time (task 0 claims, the others follow)."""
        return self.in_job and self.tasks > 1

    @property
    def follower(self) -> bool:
        """A task other than 0 of such a job: it trains the trials task 0 starts."""
        return self.ranks_share_job and self.rank > 0

    @property
    def relaunched_rank(self) -> bool:
        """A rank that Lightning relaunched for plain DDP, as a child of rank 0."""
        return self.local_rank > 0

    @property
    def warning(self) -> tuple[int, str] | None:
        """The signal that warns this worker of its end (preemption, a time limit), and what to call it; None where
        nothing warns (outside a job, or a scheduler that sends nothing)."""
        if self.warning_signal is None:
            return None
        return self.warning_signal, f"the {self.scheduler} job's warning signal (preemption or time limit)"


def here() -> WorkerEnv:
    """This process's environment, as it is now."""
    return WorkerEnv.read()


def job_variables(scheduler: str, job: str, run: str, *, tasks: int = 1, rank: int = 0,
                  warning: signal.Signals | None = None) -> dict[str, str]:  # fmt: skip
    """What a launcher adds to a worker's environment when its scheduler runs the worker as a job (read back by
    `WorkerEnv.read`): the scheduler's account of the job, in ablate's words."""
    env = {SCHEDULER_VAR: scheduler, JOB_VAR: job, JOB_RUN_VAR: run, TASKS_VAR: str(tasks), RANK_VAR: str(rank)}
    return {**env, **({WARNING_VAR: warning.name} if warning is not None else {})}


def for_local_worker(workers: int, **extra: str) -> dict[str, str]:
    """The environment the local launcher starts a worker with: this one, plus how many workers share the cores
    (`extra`: the storage URL, a GPU)."""
    return {**os.environ, WORKERS_VAR: str(workers), "PYTHONUNBUFFERED": "1", **extra}


def process_state(pid: int) -> str | None:
    """A process's state letter from /proc ('R', 'S', ..., 'Z': exited, not yet reaped by its parent), or None when
    there is no such process or no /proc to read (not Linux)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return None


def cpu_cores() -> int:
    """The CPU cores this process may run on: its affinity (taskset, a SLURM job's or a container's cpuset), not every
    core of the machine that os.cpu_count() counts."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def cpu_model() -> str:
    """The processor's model name (/proc/cpuinfo on Linux, else the platform's), '' where unknown."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()
