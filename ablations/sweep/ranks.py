"""How the other ranks of a DDP trial find the trial to train: its TRIAL_DIR/trial.json (`TrialSpec`).

Two ways a trial has several ranks. Under plain DDP on one machine, Lightning relaunches this command once per extra
rank as a child of rank 0 (`ddp_rank`). In a scheduler's job of several tasks (`WorkerEnv.ranks_share_job`: SLURM's
nodes x tasks_per_node), task 0 claims trials as any worker does and the other tasks follow it (`follow`), each
trial's spec naming the run of the job that started it, until task 0 leaves its `done_file`.
"""

from __future__ import annotations

import dataclasses
import json
import os
import socket
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ablate.ablations.results.record import Layout
from ablate.ablations.runtime import environment
from ablate.ablations.study.config import build_run_config
from ablate.data.atomic import write_json_atomic, write_text_atomic

if TYPE_CHECKING:
    from ablate.ablations.sweep.plan import Plan


@dataclass(frozen=True)
class TrialSpec:
    """What a trial's training needs besides its config, kept in TRIAL_DIR/trial.json. Under plain DDP, Lightning
    relaunches this command once per extra rank as a child of rank 0: the child finds its trial by the file whose
    `pid` is its parent's (`find_for_parent`), trains it as a follower rank, and leaves."""

    run: dict[str, Any]
    trial_dir: str
    name: str
    group: str
    wandb_id: str
    host: str
    pid: int
    job: str | None = None
    """The run of the job whose other tasks are this trial's other ranks (`WorkerEnv.job_run`, a job of several
    tasks), else None."""
    started_at: float = 0.0

    FILE = "trial.json"

    @classmethod
    def for_trial(cls, trial_dir: Path, run, *, name: str, group: str) -> TrialSpec:
        """The spec of a trial about to train in this process, written to its directory. The W&B run id (in
        TRIAL_DIR/wandb_id) is kept across retries: a resumed trial continues its W&B run."""
        id_file = trial_dir / "wandb_id"
        if not id_file.exists():
            write_text_atomic(id_file, uuid.uuid4().hex[:12])
        wandb_id = id_file.read_text(encoding="utf-8").strip()
        here = environment.here()
        job = here.job_run if here.ranks_share_job else None
        spec = cls(run.to_dict(), str(trial_dir), name, group, wandb_id, socket.gethostname(), os.getpid(), job,
                   time.time())  # fmt: skip
        write_json_atomic(trial_dir / cls.FILE, dataclasses.asdict(spec))
        return spec

    @classmethod
    def read(cls, path: Path) -> TrialSpec | None:
        try:
            return cls(**json.loads(path.read_text(encoding="utf-8")))
        except (OSError, ValueError, TypeError):
            return None

    @classmethod
    def find_for_job(cls, out: Path, job: str, seen: set) -> TrialSpec | None:
        """A trial that task 0 of this run of a job (`WorkerEnv.job_run`) started, not in `seen`."""
        for path in sorted(Layout(out).trials_dir.glob(f"*/{cls.FILE}")):
            spec = cls.read(path)
            if spec and spec.job == job and (spec.trial_dir, spec.started_at) not in seen:
                return spec
        return None

    @classmethod
    def find_for_parent(cls, out: Path) -> TrialSpec | None:
        """The trial that this process's parent (rank 0 of a plain-DDP trial) is training, if any."""
        for path in sorted(Layout(out).trials_dir.glob(f"*/{cls.FILE}")):
            spec = cls.read(path)
            if spec and spec.pid == os.getppid() and spec.host == socket.gethostname():
                return spec
        return None


def done_file(out: Path) -> Path:
    """What task 0 of this run of a job of several tasks leaves when it has no trial left: its followers stop."""
    here = environment.here()
    return Layout(out).jobs_dir(here.scheduler or "jobs") / f"{here.job_run}.done"


def follow(plan: Plan, poll_s: float = 0.5) -> int:
    """A job's task other than 0 (`WorkerEnv.follower`): train, as a follower rank, each trial task 0 of this run of
    the job starts (its TRIAL_DIR/trial.json names the run), until task 0 says it is done (`done_file`)."""
    from ablate.ablations.training.train import train  # lazy: loads torch and Lightning (seconds)

    job, seen = environment.here().job_run or "", set()
    while True:
        spec = TrialSpec.find_for_job(plan.out, job, seen)
        if spec is not None:
            seen.add((spec.trial_dir, spec.started_at))
            try:
                train(build_run_config(spec.run), Path(spec.trial_dir), name=spec.name, group=spec.group,
                      wandb_id=spec.wandb_id)  # fmt: skip
            except Exception as err:  # noqa: BLE001 - task 0 records the failure; this rank must stay for the next
                print(f"follower rank: trial {spec.name} failed ({type(err).__name__}); waiting for the next",
                      file=sys.stderr, flush=True)  # fmt: skip
            continue
        if done_file(plan.out).is_file():
            return 0
        time.sleep(poll_s)


def ddp_rank(out: Path) -> int | None:
    """If this process is a rank that Lightning relaunched for plain DDP (a child of rank 0, LOCAL_RANK > 0), train
    the trial rank 0 is running (TRIAL_DIR/trial.json) and return 0; else None."""
    if not environment.here().relaunched_rank:
        return None
    spec = TrialSpec.find_for_parent(out)
    if spec is None:
        return None
    from ablate.ablations.training.train import train  # lazy: loads torch and Lightning (seconds)

    run = build_run_config(spec.run)
    train(run, Path(spec.trial_dir), name=spec.name, group=spec.group, wandb_id=spec.wandb_id)
    return 0
