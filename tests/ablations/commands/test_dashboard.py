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
from ablate.ablations.results.storage.queue import Queue
from ablate.ablations.runtime.urls import storage_url
from ablate.ablations.study.definition import load_study
from ablate.ablations.sweep.plan import Plan
from ablate.ablations.sweep.queueing import enqueue

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


def load_browser():
    """tests/reports/browser.py (a sibling test package: loaded by path under --import-mode=importlib); skips the
    test without a system Chromium."""
    import importlib.util

    path = Path(__file__).resolve().parents[2] / "reports" / "browser.py"
    spec = importlib.util.spec_from_file_location("browser_for_dashboard", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    if module.CHROMIUM is None:
        pytest.skip(module.MISSING)
    return module


@pytest.mark.slow
def test_dashboard_compares_rows_by_name_over_the_knobs(finished_copy, tmp_path):
    """A finished sweep in optuna-dashboard: named objectives, the row, seed and knobs as parameters (parallel
    coordinates, slice, importance), learning curves, and no bulky record among the user attributes. Then the page
    itself, in headless Chromium: the parallel-coordinate plot has an axis per knob and the rows by name."""
    port = free_port()
    exe = shutil.which("optuna-dashboard", path=str(Path(sys.executable).parent)) or "optuna-dashboard"
    proc = subprocess.Popen(
        [exe, str(finished_copy / "optuna.journal"), "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        (summary,) = get(f"http://127.0.0.1:{port}/api/studies")["study_summaries"]
        detail = get(f"http://127.0.0.1:{port}/api/studies/{summary['study_id']}")
        assert detail["objective_names"] == ["dev BLEU", "dev PPL"]
        assert detail["directions"] == ["maximize", "minimize"]
        space = {p["name"] for p in detail["intersection_search_space"]}
        assert {"row", "seed", "model.n_heads", "train.lr_factor"} <= space
        complete = [t for t in detail["trials"] if t["state"] == "Complete"]
        assert {p["param_external_value"] for t in complete for p in t["params"] if p["name"] == "row"} == {
            "ok1",
            "ok2",
        }
        assert all(t["intermediate_values"] for t in complete)
        assert all(a["key"] != "record" and len(a["value"]) < 200 for t in detail["trials"] for a in t["user_attrs"])

        browser = load_browser()
        url = f"http://127.0.0.1:{port}/dashboard/studies/{summary['study_id']}/smartSelection"
        with browser.open_page(url, 1600, 1000) as visit:
            visit.page.locator(".parcoords").first.wait_for(state="attached", timeout=60_000)
            axes = visit.page.evaluate(
                "[...document.querySelectorAll('.parcoords .axis-title')].map(e => e.textContent)"
            )
            ticks = visit.page.evaluate(
                "[...document.querySelectorAll('.parcoords .tick text')].map(e => e.textContent)"
            )
            visit.page.screenshot(path=tmp_path / "parallel_coordinates.png", full_page=True)
            assert visit.errors == []
        assert {"dev BLEU", "dev PPL", "row", "seed", "model.n_heads", "train.lr_factor"} <= set(axes), axes
        assert {"ok1", "ok2"} <= set(ticks)  # the row axis names the rows (the failed 'nan' row has no values)
    finally:
        proc.terminate()
        proc.wait(timeout=10)
