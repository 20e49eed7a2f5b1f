"""The HTML page in headless Chromium: it renders the table and every plot, asks for nothing over the network,
and logs no console error. Set ABLATE_REPORT_SCREENSHOT=/path/shot.png to keep the screenshot."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from cdp_pipe import CHROMIUM, Chromium
from reports_fixtures import TABLE3_ROWS, make_study

from reports.build import build_report

pytestmark = pytest.mark.skipif(
    not Path(CHROMIUM).exists(), reason=f"{CHROMIUM} not installed (Debian: apt-get install chromium)"
)


def test_html_renders_table_and_plots_offline_without_errors(tmp_path):
    plan = {("D1", 1): "running", ("E1", 0): "pending", ("E1", 1): "pending", ("C1", 1): "failed"}
    reasons = {("C1", 1): "diverged: training loss became nan at step 37"}
    out = make_study(tmp_path / "table3-smoke", plan=plan, reasons=reasons)
    written = build_report(out, ["html"], n_samples=200)
    html = written["html"]
    assert "<script" not in html.read_text() and "http" not in html.read_text().split("</style>")[0]

    # the page alone, away from its plot files: it must carry everything it shows
    alone = tmp_path / "alone" / "report.html"
    alone.parent.mkdir()
    shutil.copy(html, alone)
    shutil.rmtree(out / "report" / "plots")

    with Chromium() as chrome:
        chrome.open(alone.as_uri())
        page = chrome.evaluate(
            """(() => {
              const rows = [...document.querySelectorAll('#report-table tbody tr')];
              const images = [...document.images];
              return {
                rows: rows.map(r => r.cells[1].textContent),
                headers: [...document.querySelectorAll('#report-table thead th')].map(th => th.textContent),
                images: images.length,
                loaded: images.filter(i => i.complete && i.naturalWidth > 100 && i.naturalHeight > 100).length,
                visible: images.filter(i => i.getBoundingClientRect().width > 100).length,
                pending: document.querySelector('tr.pending') !== null,
                failed: document.querySelector('tr.failed').textContent,
                tableWidth: document.getElementById('report-table').getBoundingClientRect().width,
              };
            })()"""
        )
        shot = chrome.screenshot(tmp_path / "report.png")
        errors = chrome.console_errors()
        urls = chrome.requested_urls()

    assert page["rows"] == [name for name, *_ in TABLE3_ROWS]
    assert "BLEU (dev)" in page["headers"] and "paper BLEU" in page["headers"]
    n_plots = sum(key.startswith("plot:") and not key.endswith(".svg") for key in written)
    assert page["images"] == n_plots >= 3
    assert page["loaded"] == page["visible"] == n_plots
    assert page["pending"] and "nan at step 37" in page["failed"]
    assert page["tableWidth"] > 600
    assert errors == []
    assert all(url.startswith(("file:", "data:")) for url in urls), urls
    assert shot.read_bytes().startswith(b"\x89PNG") and shot.stat().st_size > 50_000
    if os.environ.get("ABLATE_REPORT_SCREENSHOT"):
        target = Path(os.environ["ABLATE_REPORT_SCREENSHOT"])
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(shot, target)
