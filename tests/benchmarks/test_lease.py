"""The lease a card would run (`scripts/device/lease.sh`), rehearsed on this CPU at smoke sizes with the card's
stages and time shares: every stage writes its JSON into the packed archive, the stages' limits add up to at most
80% of the call's deadline, and the card's arm (ABLATE_CARD=all) runs to its record."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
STAGES = ("before", "after", "study", "status", "paper")
DEADLINE_S = 540  # the card's own deadline: the same limits as a lease


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
        "OMP_NUM_THREADS": "1",
    }
    done = subprocess.run(
        ["bash", "scripts/device/lease.sh"], cwd=REPO, env=env, capture_output=True, text=True, timeout=DEADLINE_S + 120
    )
    with tarfile.open(out / "lease.tgz") as tar:
        files = {
            Path(m.name).name: tar.extractfile(m).read()  # pyright: ignore[reportOptionalMemberAccess]
            for m in tar.getmembers()
            if m.isfile()
        }
    return done, files


@pytest.mark.slow
def test_the_stages_limits_leave_a_fifth_of_the_deadline(rehearsal):
    done, files = rehearsal
    plan = json.loads(files["plan.json"])
    assert plan["deadline_s"] == DEADLINE_S
    assert set(plan["limits_s"]) >= set(STAGES) and plan["sum_s"] <= 0.8 * DEADLINE_S, plan


@pytest.mark.slow
def test_every_stage_writes_its_json(rehearsal):
    done, files = rehearsal
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    missing = [s for s in STAGES if f"{s}.json" not in files]
    assert not missing, (missing, sorted(files), done.stdout[-3000:])
    for stage in STAGES:
        assert json.loads(files[f"{stage}.json"]), stage


@pytest.mark.slow
def test_the_short_runs_train_on_the_cards_defaults_and_on_every_card_value(rehearsal):
    _, files = rehearsal
    before, after = json.loads(files["before.json"]), json.loads(files["after.json"])
    assert before["rc"] == 0 and after["rc"] == 0, (before, after)
    assert before["path"]["decoding"] == "dynamic" and before["path"]["card"] is None
    assert after["path"] | {"torch": None} == {
        "decoding": "static",
        "kernels": "reference",
        "compile": None,
        "cuda_graphs": False,
        "precision": "bf16-mixed",
        "torch": None,
        "card": "all",
    }
    paper = json.loads(files["paper.json"])
    assert paper["config"]["precision"] == "32-true"  # a CPU's precision: the bench ran outside the card's switch
