"""What a worker process learns from its environment: the one module that reads it.

Whatever launched a sweep worker tells it where it stands through environment variables. SLURM sets the job, the
array task, how often the job was requeued and the task's rank among the job's tasks (`SLURM_*`); Lightning sets
`LOCAL_RANK` in the ranks it relaunches for plain DDP; the local launcher says how many workers share this machine
(`ABLATE_WORKERS`). Everything else asks `here()`, read afresh at each call (a test sets the variables it needs).

Application settings that are not about where a worker stands (the storage URL, the data cache) are read where
they are used.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Mapping
from dataclasses import dataclass

WORKERS_VAR = "ABLATE_WORKERS"
"""How many local worker processes share this machine's cores (the local launcher sets it)."""
SAVE_S_VAR = "ABLATE_SLURM_SAVE_S"
"""Seconds a SLURM job waits, after passing the warning signal on, for its worker to save the running trial."""
WARNING_SIGNAL = signal.SIGUSR2
"""What SLURM sends a job before preemption or its time limit (`--signal=USR2@N` in the batch script submitit
writes): the worker saves its trial and queues it for retry, and the job is requeued."""


@dataclass(frozen=True)
class WorkerEnv:
    """Where this process stands: its SLURM job (if any), its rank, and how many workers share its machine."""

    job_id: str | None = None
    """SLURM_JOB_ID: set in every process of a SLURM job (an array task has its own)."""
    array_job_id: str | None = None
    """SLURM_ARRAY_JOB_ID: the array this job belongs to, if any."""
    array_task_id: str | None = None
    """SLURM_ARRAY_TASK_ID: this job's index in its array."""
    restarts: int = 0
    """SLURM_RESTART_COUNT: how often the job was requeued (a requeued job keeps its id)."""
    tasks: int = 1
    """SLURM_NTASKS: the job's tasks; above 1 they are the DDP ranks of one trial at a time."""
    rank: int = 0
    """SLURM_PROCID: this task's rank among them (0 claims the trials, the others follow it)."""
    local_rank: int = 0
    """LOCAL_RANK: above 0 in a process Lightning relaunched as an extra rank of a plain-DDP trial."""
    local_workers: int = 1
    """ABLATE_WORKERS: the local worker processes sharing this machine's cores."""

    @classmethod
    def read(cls, environ: Mapping[str, str] | None = None) -> WorkerEnv:
        env = os.environ if environ is None else environ
        return cls(
            job_id=env.get("SLURM_JOB_ID") or None,
            array_job_id=env.get("SLURM_ARRAY_JOB_ID") or None,
            array_task_id=env.get("SLURM_ARRAY_TASK_ID") or None,
            restarts=int(env.get("SLURM_RESTART_COUNT") or 0),
            tasks=int(env.get("SLURM_NTASKS") or 1),
            rank=int(env.get("SLURM_PROCID") or 0),
            local_rank=int(env.get("LOCAL_RANK") or 0),
            local_workers=int(env.get(WORKERS_VAR) or 1),
        )

    @property
    def in_slurm_job(self) -> bool:
        return self.job_id is not None

    @property
    def slurm_job(self) -> str | None:
        """The job as `squeue` and `ablate status` name it: '<array job>_<task>' in an array, else the job id."""
        if self.array_job_id and self.array_task_id:
            return f"{self.array_job_id}_{self.array_task_id}"
        return self.job_id

    @property
    def incarnation(self) -> str:
        """This run of this SLURM job: its id and how often it was requeued ('123.0', then '123.1')."""
        return f"{self.job_id or ''}.{self.restarts}"

    @property
    def ranks_share_job(self) -> bool:
        """The job's tasks are the ranks of one trial at a time (task 0 claims, the others follow)."""
        return self.tasks > 1

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
        nothing warns (outside SLURM)."""
        if not self.in_slurm_job:
            return None
        return WARNING_SIGNAL, "SLURM's warning signal (preemption or time limit)"


def here() -> WorkerEnv:
    """This process's environment, as it is now."""
    return WorkerEnv.read()


def save_s(default: int = 60) -> int:
    """How long a SLURM job waits for its warned worker to save (`SAVE_S_VAR`)."""
    return int(os.environ.get(SAVE_S_VAR) or default)


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
    import platform

    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()
