"""The lease a card would run (`scripts/device/lease.sh`), rehearsed on this CPU at smoke sizes with the card's
stages and time shares and a planted hang: the `after` stage never returns (it sleeps with SIGTERM ignored), and
still every stage writes its JSON into the packed archive, the call ends inside its deadline, the hung stage's
stack is in its log, and the stages after it run to their records."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
STAGES = ("replayed", "before", "study", "status", "paper", "after", "compiled")
DEADLINE_S = 240  # a card's is 560: the same shares, each stage's limit a smaller number of seconds


@pytest.fixture(scope="module")
def rehearsal(tmp_path_factory) -> tuple[subprocess.CompletedProcess, dict[str, bytes]]:
    root = tmp_path_factory.mktemp("lease")
    out = root / "out"
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        "OUT": str(out),
        "WORK": str(root / "work"),
        "RUNS": str(root / "runs"),
        "DEADLINE": str(DEADLINE_S),
        "PRESET": "smoke",
        "BENCH_PRESET": "smoke",
        "SHORT_STEPS": "10",
        "WORKERS": "1",
        "PEERS": "torch",
        "GRAPHS": "--data.buckets 8",  # the card's compile and CUDA graphs are the card's to time
        "HANG": "after",
        "NO_WHEELS": "1",  # a checkout that made `.whl/` for a card installs nothing here
        "OMP_NUM_THREADS": "1",
    }
    start = time.monotonic()
    done = subprocess.run(
        ["bash", "scripts/device/lease.sh"], cwd=REPO, env=env, capture_output=True, text=True, timeout=DEADLINE_S + 120
    )
    with tarfile.open(out / "lease.tgz") as tar:
        files = {
            Path(m.name).name: tar.extractfile(m).read()  # pyright: ignore[reportOptionalMemberAccess]
            for m in tar.getmembers()
            if m.isfile()
        }
    return done, files, time.monotonic() - start


@pytest.mark.slow
def test_the_stages_limits_leave_room_for_the_install_and_the_packing(rehearsal):
    _, files, _ = rehearsal
    plan = json.loads(files["plan.json"])
    assert plan["deadline_s"] == DEADLINE_S
    assert set(plan["limits_s"]) >= set(STAGES) and plan["sum_s"] <= 0.96 * DEADLINE_S, plan


@pytest.mark.slow
def test_a_hung_stage_is_killed_with_its_stack_and_the_call_ends_inside_its_deadline(rehearsal):
    done, files, wall = rehearsal
    assert wall < DEADLINE_S, (wall, done.stdout[-3000:])
    stages = files["stages.txt"].decode()
    assert re.search(r"after end rc=124 after \d+ s; killed after 10 s of grace", stages), stages
    log = files["after.log"].decode()
    # the stack, written by faulthandler on SIGABRT before the group's SIGKILL
    assert "Fatal Python error: Aborted" in log and "Current thread" in log and 'File "<string>", line 1' in log, log
    assert re.search(r"compiled end rc=0", stages), stages  # the stage after the hang ran to its end


@pytest.mark.slow
def test_every_stage_writes_its_json(rehearsal):
    done, files, _ = rehearsal
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    missing = [s for s in STAGES if f"{s}.json" not in files]
    assert not missing, (missing, sorted(files), done.stdout[-3000:])
    for stage in STAGES:
        assert json.loads(files[f"{stage}.json"]), stage


@pytest.mark.slow
def test_the_short_runs_train_on_the_cards_defaults_and_on_every_card_value(rehearsal):
    _, files, _ = rehearsal
    before, after = json.loads(files["before.json"]), json.loads(files["compiled.json"])
    assert before["rc"] == 0 and after["rc"] == 0, (before, after)
    assert json.loads(files["after.json"])["rc"] == 124  # the planted hang, cut at its limit
    assert before["path"]["decoding"] == "dynamic" and before["path"]["card"] is None
    assert after["path"] | {"torch": None} == {
        "decoding": "static",
        "kernels": "reference",
        "compile": None,
        "cuda_graphs": False,
        "replay_step": None,
        "precision": "bf16-mixed",
        "torch": None,
        "card": "all",
    }
    paper = json.loads(files["paper.json"])
    assert paper["config"]["precision"] == "32-true"  # a CPU's precision: the bench ran outside the card's switch
