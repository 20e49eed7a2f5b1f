"""How many workers a sweep starts by default: one per CPU core on a CPU (measured faster than one process with
every core's threads), never more than there are trials, one when a trial spans several devices. And what the live
view writes where there is no terminal (CI logs, pipes)."""

from __future__ import annotations

import os
from dataclasses import replace

import pytest
from ablate.ablations.launchers.local import default_workers, placement
from ablate.ablations.results import ledger
from ablate.ablations.results.record import Layout, Record
from ablate.ablations.study.definition import load_study
from ablate.ablations.sweep.plan import Plan
from ablate.ablations.sweep.runner import live_view, saved_summary

cpu_rule = pytest.mark.skipif(
    __import__("torch").cuda.is_available(), reason="the CPU rule; with GPUs it is one worker per GPU"
)


def plan(tmp_path, seeds: int = 2, **hardware) -> Plan:
    study = load_study("table3")
    extra = {"hardware": hardware} if hardware else {}
    return Plan(study=study, preset="smoke", seeds=list(range(seeds)), out=tmp_path, storage="", name="t", extra=extra)


@cpu_rule
def test_one_single_thread_worker_per_core(tmp_path):
    cores = len(os.sched_getaffinity(0))
    assert default_workers(plan(tmp_path)) == min(cores, 21 * 2)


@cpu_rule
def test_never_more_workers_than_trials(tmp_path, monkeypatch):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(64)))
    assert default_workers(plan(tmp_path, seeds=1)) == 21


@cpu_rule
def test_one_worker_when_a_trial_spans_several_devices(tmp_path):
    assert default_workers(plan(tmp_path, devices=2, strategy="ddp_spawn")) == 1


def test_without_a_terminal_the_live_view_writes_a_line_per_state_change_and_a_moving_eta_at_most_each_minute(capsys):
    update = live_view("t", every_s=60.0)
    for line in (
        "0/2 done, 1 running, 1 pending, 0 failed",
        "0/2 done, 1 running, 1 pending, 0 failed, ETA 50s",  # the first estimate: shown
        "0/2 done, 1 running, 1 pending, 0 failed, ETA 47s",  # only the ETA moved, a second later: not shown
        "0/2 done, 1 running, 1 pending, 0 failed, ETA 44s",
        "1/2 done, 1 running, 0 pending, 0 failed, ETA 20s",  # a trial finished: shown
        "1/2 done, 1 running, 0 pending, 0 failed, ETA 20s",  # nothing changed
        "2/2 done, 0 running, 0 pending, 0 failed",
    ):
        update(None, line)
    update(None, None)

    assert capsys.readouterr().err.splitlines() == [
        "[sweep] 0/2 done, 1 running, 1 pending, 0 failed",
        "[sweep] 0/2 done, 1 running, 1 pending, 0 failed, ETA 50s",
        "[sweep] 1/2 done, 1 running, 0 pending, 0 failed, ETA 20s",
        "[sweep] 2/2 done, 0 running, 0 pending, 0 failed",
    ]


def test_an_interrupted_retry_of_failed_trials_does_not_count_their_old_records_as_finished(tmp_path):
    """Ctrl-C's line says what was saved: under --retry_failed a failed record is a trial still to train (its
    checkpoint, if any, is what resumes), not a finished one."""
    for row, seed, state in (("base", 0, "complete"), ("A1", 0, "failed")):
        record = Record.started(
            study="table3", preset="smoke", row=row, group=row[0], seed=seed, overrides={}, optuna={}
        )
        ledger.write_record(tmp_path, record if state == "complete" else record.failed("NaN loss"))
    checkpoint = Layout(tmp_path).trial_dir("A1", 0) / "checkpoints" / "last.ckpt"
    checkpoint.parent.mkdir(parents=True)
    checkpoint.write_bytes(b"")
    keys = [("base", 0), ("A1", 0), ("B1", 0)]
    assert saved_summary(plan(tmp_path), keys).startswith("2 of 3 trials finished")
    retry = replace(plan(tmp_path), retry_failed=True)
    assert saved_summary(retry, keys) == (
        f"1 of 3 trials finished (records in {tmp_path / 'records'}); 1 unfinished trial(s) resume from their "
        f"checkpoints in {tmp_path / 'trials'}"
    )


def test_workers_share_the_cores_this_process_may_run_on_not_the_machines(monkeypatch):
    """Under taskset, a container's or a SLURM job's cpuset, os.cpu_count() counts every core of the machine:
    8 workers on a 64-core node's 8-core job would start 8 threads each, 64 threads on 8 cores."""
    import torch
    from ablate.ablations.sweep.worker import set_threads

    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(8)))
    monkeypatch.setattr(os, "cpu_count", lambda: 64)
    before = torch.get_num_threads()
    try:
        set_threads(4)
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)


def test_workers_share_fewer_gpus_round_robin_and_split_the_cores():
    """Eight workers on one card: all on it, two threads each of 16 cores. Five on two cards: alternating. The GPU
    names are what CUDA_VISIBLE_DEVICES takes (an outer list of UUIDs stays a list of UUIDs)."""
    one_card = placement(8, ["0"], 16)
    assert [p["CUDA_VISIBLE_DEVICES"] for p in one_card] == ["0"] * 8
    assert {p["OMP_NUM_THREADS"] for p in one_card} == {"2"}
    two = placement(5, ["GPU-a", "GPU-b"], 6)
    assert [p["CUDA_VISIBLE_DEVICES"] for p in two] == ["GPU-a", "GPU-b", "GPU-a", "GPU-b", "GPU-a"]
    assert {p["OMP_NUM_THREADS"] for p in two} == {"1"}  # 6 // 5, never 0 threads
    assert placement(3, [], 2) == [{"OMP_NUM_THREADS": "1"}] * 3  # no GPU: only the cores are shared
    assert placement(1, ["0", "1"], 8) == [{"OMP_NUM_THREADS": "8"}]  # a lone worker keeps every GPU (DDP trials)


def test_the_gpus_a_sweep_places_on_are_the_ones_it_may_see(monkeypatch):
    from ablate.ablations.launchers import local

    monkeypatch.setattr(local, "_gpus", lambda: 2)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,5")
    assert local.visible_gpus() == ["3", "5"]
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    assert local.visible_gpus() == ["0", "1"]
