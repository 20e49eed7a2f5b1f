"""How many workers a sweep starts by default: one per CPU core on a CPU (measured faster than one process with
every core's threads), never more than there are trials, one when a trial spans several devices."""

from __future__ import annotations

import os

import pytest

from ablations.runner import default_workers
from ablations.studies import load_study
from ablations.sweep import Plan

pytestmark = pytest.mark.skipif(
    __import__("torch").cuda.is_available(), reason="the CPU rule; with GPUs it is one worker per GPU"
)


def plan(tmp_path, seeds: int = 2, **hardware) -> Plan:
    study = load_study("table3")
    extra = {"hardware": hardware} if hardware else {}
    return Plan(study=study, preset="smoke", seeds=list(range(seeds)), out=tmp_path, storage="", name="t", extra=extra)


def test_one_single_thread_worker_per_core(tmp_path):
    cores = len(os.sched_getaffinity(0))
    assert default_workers(plan(tmp_path)) == min(cores, 21 * 2)


def test_never_more_workers_than_trials(tmp_path, monkeypatch):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(64)))
    assert default_workers(plan(tmp_path, seeds=1)) == 21


def test_one_worker_when_a_trial_spans_several_devices(tmp_path):
    assert default_workers(plan(tmp_path, devices=2, strategy="ddp_spawn")) == 1
