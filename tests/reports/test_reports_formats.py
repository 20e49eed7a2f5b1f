"""Every format is written and parses; Markdown and LaTeX keep the paper's layout."""

from __future__ import annotations

import csv
import json

import pytest
from reports_fixtures import TABLE3_ROWS, make_study

from reports.build import build_report
from reports.formats import FORMATS, tex_escape


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    base = tmp_path_factory.mktemp("fmt")
    plan = {("D1", 1): "running", ("E1", 0): "pending", ("E1", 1): "pending", ("C1", 1): "failed"}
    reasons = {("C1", 1): "diverged: training loss became nan at step 37"}
    out = make_study(base / "table3-smoke", plan=plan, reasons=reasons)
    written = build_report(out, report_dir=base / "report", n_samples=200)
    return out, written


def test_every_format_and_plot_is_written(report):
    _, written = report
    for fmt in FORMATS:
        assert written[fmt].is_file() and written[fmt].stat().st_size > 0
    assert {"plot:bleu_vs_params", "plot:bleu_deltas", "plot:curves_A", "plot:curves_big"} <= set(written)
    assert "plot:curves_E" not in written  # E1 has no finished trial yet
    for key, path in written.items():
        if key.startswith("plot:"):
            head = path.read_bytes()[:8]
            assert head.startswith(b"\x89PNG") if path.suffix == ".png" else b"<?xml" in head


def test_csv_parses_and_holds_the_record_values(report):
    out, written = report
    rows = list(csv.DictReader(written["csv"].open(encoding="utf-8")))
    assert [r["row"] for r in rows] == [name for name, *_ in TABLE3_ROWS]
    base = next(r for r in rows if r["row"] == "base")
    seed0 = json.loads((out / "records/base__seed0.json").read_text())["metrics"]["bleu"]
    seed1 = json.loads((out / "records/base__seed1.json").read_text())["metrics"]["bleu"]
    assert float(base["bleu_mean"]) == pytest.approx((seed0 + seed1) / 2, abs=1e-6)
    b1 = next(r for r in rows if r["row"] == "B1")
    assert (b1["d_k"], b1["d_model"]) == ("4", "32")  # every value spelled out in CSV
    assert b1["paper_bleu"] == "25.1"
    c1 = next(r for r in rows if r["row"] == "C1")
    assert c1["state"] == "failed" and "nan at step 37" in c1["reason"]
    assert next(r for r in rows if r["row"] == "E1")["state"] == "pending"


def test_json_parses_with_per_seed_details(report):
    _, written = report
    doc = json.loads(written["json"].read_text(encoding="utf-8"))
    assert doc["study"] == "table3" and doc["base"] == "base" and doc["seeds"] == [0, 1]
    rows = {r["row"]: r for r in doc["rows"]}
    assert rows["D1"]["seeds"]["1"]["state"] == "running"
    assert rows["B1"]["same_as_base"]["d_model"] is True and rows["B1"]["same_as_base"]["d_k"] is False
    assert rows["A1"]["seeds"]["0"]["bleu_p_value"] < 0.01 and rows["A1"]["significance"] == "‡"
    assert rows["E1"]["other"] == {"model.positions": "learned"}


def test_markdown_has_the_paper_layout(report):
    _, written = report
    md = written["md"].read_text(encoding="utf-8")
    table = [line for line in md.splitlines() if line.startswith("|")]
    header = [c.strip() for c in table[0].strip("|").split("|")]
    assert header[:11] == ["", "row", "N", "d_model", "d_ff", "h", "d_k", "d_v", "P_drop", "ε_ls", "train steps"]
    assert {"PPL (dev)", "BLEU (dev)", "params ×10⁶", "paper PPL", "paper BLEU", "ΔBLEU vs base"} <= set(header)
    assert {"wall time", "tok/s", "device", "seeds"} <= set(header)
    body = {cells[1]: cells for cells in ([c.strip() for c in line.strip("|").split("|")] for line in table[2:])}
    assert list(body) == [name for name, *_ in TABLE3_ROWS]
    col = {name: i for i, name in enumerate(header)}
    assert body["base"][0] == "base" and body["A1"][0] == "(A)" and body["A3"][0] == "" and body["big"][0] == "big"
    assert body["B1"][col["d_k"]] == "4" and body["B1"][col["d_model"]] == ""  # blank = same as base
    assert body["D1"][col["P_drop"]] == "0.0"
    assert body["base"][col["d_model"]] == "32"
    assert body["C1"][col["paper BLEU"]] == "23.7" and body["F1"][col["paper BLEU"]] == ""
    assert "±" in body["base"][col["BLEU (dev)"]]
    assert body["A1"][col["ΔBLEU vs base"]].endswith("‡")
    assert body["E1"][col["seeds"]] == "pending"
    assert body["D1"][col["seeds"]] == "1/2 · 1 running"
    assert body["C1"][col["seeds"]].startswith("1/2 · 1 failed: diverged")
    assert "C1 seed 1 failed: diverged: training loss became nan at step 37" in md


def test_latex_is_booktabs(report):
    _, written = report
    tex = written["tex"].read_text(encoding="utf-8")
    for command in (r"\toprule", r"\midrule", r"\bottomrule", r"\begin{tabular}", r"\end{table*}"):
        assert command in tex
    assert tex.count(r"\midrule") == 8  # one above each of the 8 row groups
    assert r"$\pm$" in tex and r"$^\ddagger$" in tex and "±" not in tex and "‡" not in tex
    assert tex.count(r"\begin{") == tex.count(r"\end{")
    n_cols = len(tex.split(r"\begin{tabular}{")[1].split("}")[0])
    for line in tex.splitlines():
        if line.endswith(r"\\") and "&" in line:
            assert line.count("&") == n_cols - 1, line


def test_tex_escape():
    assert tex_escape("p_drop 50% & #1") == r"p\_drop 50\% \& \#1"
    assert tex_escape("1.0 ± 0.1 †") == r"1.0 $\pm$ 0.1 $^\dagger$"


def test_only_requested_formats(tmp_path):
    out = make_study(tmp_path / "s", rows=TABLE3_ROWS[:2], seeds=(0,), storage=None)
    written = build_report(out, ["md", "csv"], plots=False, n_samples=100)
    assert set(written) == {"md", "csv"}
    assert written["md"].parent == out / "report"
    assert written["md"].name == "table3-smoke.md"


def test_tex_minus_signs():
    assert tex_escape("-14.79 ± 0.43") == r"$-$14.79 $\pm$ 0.43"
    assert tex_escape("pre-norm 1e-4") == "pre-norm 1e-4"
