"""What a worker learns from its environment (`ablations.environment`): outside SLURM nothing; in a job array its
task's job name as squeue shows it; in a requeued job a new incarnation; in a job of several tasks who claims and who
follows; in a rank Lightning relaunched, that it is one; and the warning signal only where SLURM sends one."""

from __future__ import annotations

import signal

from ablate.ablations.environment import WorkerEnv, here


def test_outside_slurm_a_worker_is_alone_and_nothing_warns_it():
    env = WorkerEnv.read({})
    assert env == WorkerEnv()
    assert not (env.in_slurm_job or env.ranks_share_job or env.follower or env.relaunched_rank)
    assert env.slurm_job is None
    assert env.warning is None and env.local_workers == 1


def test_an_array_task_is_named_as_squeue_names_it_and_a_requeue_is_a_new_incarnation():
    task = {"SLURM_JOB_ID": "107", "SLURM_ARRAY_JOB_ID": "100", "SLURM_ARRAY_TASK_ID": "7"}
    assert WorkerEnv.read(task).slurm_job == "100_7"
    assert WorkerEnv.read({"SLURM_JOB_ID": "107"}).slurm_job == "107"
    assert WorkerEnv.read(task).incarnation == "107.0"
    assert WorkerEnv.read({**task, "SLURM_RESTART_COUNT": "2"}).incarnation == "107.2"


def test_in_a_job_of_several_tasks_rank_0_claims_and_the_others_follow():
    job = {"SLURM_JOB_ID": "5", "SLURM_NTASKS": "2"}
    assert WorkerEnv.read({**job, "SLURM_PROCID": "0"}).follower is False
    assert WorkerEnv.read({**job, "SLURM_PROCID": "1"}).follower is True
    assert WorkerEnv.read({**job, "SLURM_PROCID": "0"}).ranks_share_job is True


def test_a_slurm_job_is_warned_with_usr2_and_a_relaunched_rank_knows_it_is_one(monkeypatch):
    monkeypatch.setenv("SLURM_JOB_ID", "9")
    monkeypatch.setenv("LOCAL_RANK", "1")
    monkeypatch.setenv("ABLATE_WORKERS", "3")
    env = here()  # read afresh: what the process's environment says now
    assert env.warning is not None and env.warning[0] == signal.SIGUSR2
    assert env.relaunched_rank and env.local_workers == 3
