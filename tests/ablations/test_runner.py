"""How many workers a sweep starts by default: one per CPU core on a CPU (measured faster than one process with
every core's threads), never more than there are trials, one when a trial spans several devices. And what the live
view writes where there is no terminal (CI logs, pipes)."""

from __future__ import annotations

import os

import pytest
from ablate.ablations.launchers.local import default_workers
from ablate.ablations.runner import live_view
from ablate.ablations.studies import load_study
from ablate.ablations.sweep import Plan

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
