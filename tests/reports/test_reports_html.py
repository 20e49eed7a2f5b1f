"""The HTML page in headless Chromium: it renders the table and every plot, asks for nothing over the network,
logs no console error, and its table fits a 1400 px window without scrolling sideways. Set
ABLATE_REPORT_SCREENSHOT=/path/shot.png to keep the screenshot."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from ablate.reports.build import build_report
from ablate.reports.htmlpage import to_html
from browser import CHROMIUM, MISSING, open_page
from reports_fixtures import TABLE3_ROWS, make_study
from test_latex import table3_tiny

pytestmark = pytest.mark.skipif(CHROMIUM is None, reason=MISSING)

WIDTH = 1400
"""The window width the table must fit without a sideways scroll bar (a laptop's browser, full screen)."""

FITS = """const fits = () => {
  const box = document.getElementById('report-table').parentElement;  // the div that would scroll sideways
  return {table: box.scrollWidth, box: box.clientWidth, page: document.documentElement.scrollWidth};
};
"""


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

    with open_page(alone.as_uri(), width=WIDTH) as visit:
        page = visit.page.evaluate(
            FITS
            + """(() => {
              const rows = [...document.querySelectorAll('#report-table tbody tr')];
              const images = [...document.images];
              return {
                rows: rows.map(r => r.cells[1].textContent),
                headers: [...document.querySelectorAll('#report-table thead th')].map(th => th.textContent),
                images: images.length,
                loaded: images.filter(i => i.complete && i.naturalWidth > 100 && i.naturalHeight > 100).length,
                visible: images.filter(i => i.getBoundingClientRect().width > 100).length,
                pending: document.querySelector('tr.pending') !== null,
                failed: document.querySelector('tr.failed td.col-seeds').title,  // the reason, on hover
                tableWidth: document.getElementById('report-table').getBoundingClientRect().width,
                fits: fits(),
              };
            })()"""
        )
        shot = tmp_path / "report.png"
        visit.page.screenshot(path=shot, full_page=True)
        errors, urls = visit.errors, visit.urls

    assert page["rows"] == [name for name, *_ in TABLE3_ROWS]
    assert "BLEU (dev)" in page["headers"] and "paper BLEU" in page["headers"]
    n_plots = sum(key.startswith("plot:") and not key.endswith(".svg") for key in written)
    assert page["images"] == n_plots >= 3
    assert page["loaded"] == page["visible"] == n_plots
    assert page["pending"] and "nan at step 37" in page["failed"]
    assert page["tableWidth"] > 600
    assert page["fits"]["table"] <= page["fits"]["box"] and page["fits"]["page"] <= WIDTH, page["fits"]
    assert errors == []
    assert all(url.startswith(("file:", "data:")) for url in urls), urls
    assert shot.read_bytes().startswith(b"\x89PNG") and shot.stat().st_size > 50_000
    if os.environ.get("ABLATE_REPORT_SCREENSHOT"):
        target = Path(os.environ["ABLATE_REPORT_SCREENSHOT"])
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(shot, target)


def test_widest_table_fits_1400px(tmp_path):
    """Every Table 3 row with every default column, test BLEU included: headers wrap, deviations are set smaller."""
    table, corpus = table3_tiny(tmp_path / "table3-tiny")
    page = tmp_path / "page.html"
    page.write_text(to_html(table, corpus=corpus), encoding="utf-8")
    with open_page(page.as_uri(), width=WIDTH) as visit:
        fits = visit.page.evaluate(FITS + "fits()")
        headers = visit.page.evaluate(
            "[...document.querySelectorAll('#report-table thead th')].map(th => th.textContent)"
        )
    assert {"BLEU (dev)", "BLEU (test)", "ΔPPL vs base", "ΔBLEU vs base", "source use", "device"} <= set(headers)
    assert fits["table"] <= fits["box"] and fits["page"] <= WIDTH, fits


def test_the_modern_study_fits_1400px_and_every_row_says_what_it_changes(tmp_path):
    """The modern study's 29 rows: each row's differences outside the paper's columns written across its blank
    configuration cells (an 'other' column wrapped them to a few characters a line, 2972 px tall), the M rows' from
    the paper's base (row paper), so that each names its own component."""
    table, corpus = table3_tiny(tmp_path / "modern-tiny", "modern")
    page = tmp_path / "page.html"
    page.write_text(to_html(table, corpus=corpus), encoding="utf-8")
    with open_page(page.as_uri(), width=WIDTH) as visit:
        fits = visit.page.evaluate(FITS + "fits()")
        shown = visit.page.evaluate(
            """(() => ({
              headers: [...document.querySelectorAll('#report-table thead th')].map(th => th.textContent),
              other: Object.fromEntries([...document.querySelectorAll('#report-table td.col-other')].map(
                td => [td.parentElement.cells[1].textContent, [td.textContent, td.colSpan]])),
              tallest: Math.max(...[...document.querySelectorAll('#report-table tbody tr')].map(
                tr => tr.getBoundingClientRect().height)),
              line: document.querySelector('#report-table tbody tr').getBoundingClientRect().height,
            }))()"""
        )
    assert fits["table"] <= fits["box"] and fits["page"] <= WIDTH, fits
    assert "other" not in shown["headers"]
    assert shown["other"]["M-qknorm"] == ["vs paper: qk_norm=true", 9]  # in no claim: read against its group's row
    assert shown["other"]["M-swiglu"] == ["vs paper: activation=swiglu", 6]  # beside its d_ff
    assert shown["other"]["E1"] == ["positions=sinusoidal", 9] and "base" not in shown["other"]
    assert shown["other"]["paper"][0].startswith("activation=relu, bias=true, norm=post")
    assert shown["tallest"] <= 6 * shown["line"], shown  # the paper row's six differences wrap over a few lines
