"""optuna-dashboard (the [dashboard] extra) opens a sweep's default storage and shows its trials."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from ablations.storage import Queue, storage_url
from ablations.studies import load_study
from ablations.sweep import Plan, enqueue

pytest.importorskip("optuna_dashboard")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(url: str, timeout: float = 30.0):
    deadline = time.time() + timeout
    while True:
        try:
            with urllib.request.urlopen(url, timeout=5) as response:
                return json.loads(response.read())
        except OSError:
            if time.time() > deadline:
                raise
            time.sleep(0.5)


def test_dashboard_serves_the_sweep_storage(tmp_path):
    study = load_study("table3")
    out = tmp_path / "out"
    plan = Plan(study=study, preset="smoke", seeds=[0], out=out, storage=storage_url(None, out), name="table3-smoke")
    assert enqueue(plan, Queue.open(plan.storage, plan.name)) == len(study.rows)
    port = free_port()
    exe = shutil.which("optuna-dashboard", path=str(Path(sys.executable).parent)) or "optuna-dashboard"
    journal = plan.storage.removeprefix("journal:")
    proc = subprocess.Popen([exe, journal, "--port", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        studies = get(f"http://127.0.0.1:{port}/api/studies")["study_summaries"]
        assert [s["study_name"] for s in studies] == ["table3-smoke"]
        detail = get(f"http://127.0.0.1:{port}/api/studies/{studies[0]['study_id']}")
        rows = {attr["value"] for t in detail["trials"] for attr in t["user_attrs"] if attr["key"] == "row"}
        assert rows == {r.name for r in study.rows}
    finally:
        proc.terminate()
        proc.wait(timeout=10)
