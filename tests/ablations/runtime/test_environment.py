"""What a worker learns from its environment (`ablations.runtime.environment`), in ablate's own variables: outside a job
nothing; in a job its name and this run of it; in a job of several tasks who claims and who follows; in a rank
Lightning relaunched, that it is one; the warning signal only where the scheduler sends one.

And the SLURM launcher's translation into them (`launchers.slurm.worker_environment`), the one place that reads
SLURM's variables: an array task named as squeue names it, a requeue a new run, tasks and ranks, USR2 as the warning.
"""

from __future__ import annotations

import signal

from ablate.ablations.launchers.slurm import worker_environment
from ablate.ablations.runtime.environment import WorkerEnv, here, job_variables


def test_outside_a_job_a_worker_is_alone_and_nothing_warns_it():
    env = WorkerEnv.read({})
    assert env == WorkerEnv()
    assert not (env.in_job or env.ranks_share_job or env.follower or env.relaunched_rank)
    assert env.job is None and env.scheduler is None
    assert env.warning is None and env.local_workers == 1


def test_a_launchers_job_variables_read_back_as_where_the_worker_stands():
    env = WorkerEnv.read(job_variables("pbs", "42.server", "42.server.1", tasks=4, rank=2, warning=signal.SIGTERM))
    assert (env.scheduler, env.job, env.job_run, env.tasks, env.rank) == ("pbs", "42.server", "42.server.1", 4, 2)
    assert env.ranks_share_job and env.follower
    assert env.warning is not None and env.warning[0] == signal.SIGTERM and "pbs job" in env.warning[1]
    quiet = WorkerEnv.read(job_variables("pbs", "43", "43.0"))
    assert quiet.in_job and quiet.warning is None and not quiet.ranks_share_job  # a scheduler that sends nothing


def test_an_array_task_is_named_as_squeue_names_it_and_a_requeue_is_a_new_run():
    task = {"SLURM_JOB_ID": "107", "SLURM_ARRAY_JOB_ID": "100", "SLURM_ARRAY_TASK_ID": "7"}
    assert WorkerEnv.read(worker_environment(task)).job == "100_7"
    assert WorkerEnv.read(worker_environment({"SLURM_JOB_ID": "107"})).job == "107"
    assert WorkerEnv.read(worker_environment(task)).job_run == "107.0"
    assert WorkerEnv.read(worker_environment({**task, "SLURM_RESTART_COUNT": "2"})).job_run == "107.2"
    assert worker_environment({}) == {}  # outside a job the worker reads nothing of SLURM


def test_in_a_slurm_job_of_several_tasks_rank_0_claims_and_the_others_follow():
    job = {"SLURM_JOB_ID": "5", "SLURM_NTASKS": "2"}
    assert WorkerEnv.read(worker_environment({**job, "SLURM_PROCID": "0"})).follower is False
    assert WorkerEnv.read(worker_environment({**job, "SLURM_PROCID": "1"})).follower is True
    assert WorkerEnv.read(worker_environment({**job, "SLURM_PROCID": "0"})).ranks_share_job is True


def test_a_slurm_job_is_warned_with_usr2_and_a_relaunched_rank_knows_it_is_one(monkeypatch):
    for name, value in worker_environment({"SLURM_JOB_ID": "9"}).items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("LOCAL_RANK", "1")
    monkeypatch.setenv("ABLATE_WORKERS", "3")
    env = here()  # read afresh: what the process's environment says now
    assert env.warning is not None and env.warning[0] == signal.SIGUSR2 and env.scheduler == "slurm"
    assert env.relaunched_rank and env.local_workers == 3


def test_slurms_own_variables_alone_say_nothing_to_a_worker():
    """Only the launcher reads SLURM_*: a worker that its launcher did not start (a user's `ablate sweep --worker`
    in an salloc shell) stands outside any job, as a local worker does."""
    assert WorkerEnv.read({"SLURM_JOB_ID": "9", "SLURM_NTASKS": "2", "SLURM_PROCID": "1"}) == WorkerEnv()
