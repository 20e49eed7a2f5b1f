"""Every format is written and parses; Markdown and LaTeX keep the paper's layout; ΔPPL and test-set columns in every
format; `--columns` chooses what the tables show."""

from __future__ import annotations

import csv
import io
import json
import re

import pytest
from ablate.ablations.cli import main as ablate
from ablate.ablations.results.load import load_results
from ablate.reports.build import build_report, describe_corpus
from ablate.reports.csvfile import to_csv
from ablate.reports.htmlpage import to_html
from ablate.reports.jsonfile import to_json
from ablate.reports.latex import tex_escape, to_latex
from ablate.reports.markdown import to_markdown
from ablate.reports.plots import bleu_vs_params_figure
from ablate.reports.table import Stat, build_table
from ablate.reports.writers import format_names
from reports_fixtures import TABLE3_ROWS, make_study
from test_latex import table3_tiny


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
    for fmt in format_names():
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
    assert rows["A1"]["bleu_p_holm"] < 0.01 and rows["A1"]["significance"] == "‡"  # the mark is that test's
    assert rows["E1"]["other"] == {"model.positions": "learned"}


def test_markdown_has_the_paper_layout(report):
    _, written = report
    md = written["md"].read_text(encoding="utf-8")
    table = [line for line in md.splitlines() if line.startswith("|")]
    header = [c.strip() for c in table[0].strip("|").split("|")]
    assert header[:11] == ["", "row", "N", "d_model", "d_ff", "h", "d_k", "d_v", "P_drop", "ε_ls", "train steps"]
    shown = {"PPL (dev)", "BLEU (dev)", "params ×10⁶", "paper PPL", "paper BLEU", "ΔPPL vs base", "ΔBLEU vs base"}
    assert shown <= set(header)
    assert header.index("ΔPPL vs base") + 1 == header.index("ΔBLEU vs base")
    assert not any("test" in h for h in header)  # no row scored the test set
    assert {"wall time", "tok/s", "seeds"} <= set(header) and "device" not in header  # one device: in the legend
    assert "every trial on " in md
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
    assert body["base"][col["ΔPPL vs base"]] == "" and body["A1"][col["ΔPPL vs base"]].startswith("+")  # A1 worse
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
    assert r"_{\pm " in tex and r"{}^{\ddagger}$" in tex and "±" not in tex and "‡" not in tex
    assert r"$\Delta$PPL" in tex and r"$\Delta$BLEU" in tex
    assert tex.count(r"\begin{") == tex.count(r"\end{")
    n_cols = len(tex.split(r"\begin{tabular}{")[1].split("}")[0])
    rows = [line for line in tex.splitlines() if line.endswith(r"\\") and "&" in line]
    assert len(rows) == 1 + len(TABLE3_ROWS)  # the header and every row
    for line in rows:
        spans = sum(int(n) - 1 for n in re.findall(r"\\multicolumn\{(\d+)\}", line))
        assert line.count("&") + spans == n_cols - 1, line
    e1 = next(line for line in rows if " & E1 & " in line)
    assert r"\multicolumn{9}{l}{positions=learned}" in e1  # as the paper's row (E)


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


def test_tex_escape_puts_comparisons_in_math():
    assert tex_escape("significant at p < 0.05 / p < 0.01.") == "significant at $p<0.05$ / $p<0.01$."
    assert tex_escape("p(Holm) <0.001, a>b") == "p(Holm) $<$0.001, a$>$b"


@pytest.fixture(scope="module")
def scored(report):
    """The report's table with test-set scores on every complete row, as the test-set evaluation fills them."""
    out, _ = report
    table = build_table(load_results(out), n_samples=100)
    for row in table.rows:
        if row.bleu is not None and row.chrf is not None:
            row.test_bleu = Stat(values={seed: bleu - 2.0 for seed, bleu in row.bleu.values.items()})
            row.test_chrf = Stat(values={seed: chrf - 1.0 for seed, chrf in row.chrf.values.items()})
    return table


def test_test_set_columns_in_every_format_apart_from_dev(scored, report):
    base = scored.row("base")
    md = to_markdown(scored)
    header = [c.strip() for c in md.splitlines()[2].strip("|").split("|")]
    assert header.index("BLEU (test)") == header.index("chrF (dev)") + 1 and "chrF (test)" not in header
    base_line = next(line for line in md.splitlines() if line.startswith("| base | base |"))
    assert f"{base.test_bleu.mean:.2f} ± {base.test_bleu.std:.2f}" in base_line
    assert "BLEU (test): on the test set" in md

    tex = to_latex(scored)
    assert r"\shortstack{BLEU\\(dev)}" in tex and r"\shortstack{BLEU\\(test)}" in tex
    assert "dev set; BLEU (test) on the test set" in tex

    html = to_html(scored)
    assert '<th class="r col-test_bleu">BLEU (test)</th>' in html and '<th class="r col-bleu">BLEU (dev)</th>' in html

    rows = {r["row"]: r for r in csv.DictReader(io.StringIO(to_csv(scored)))}
    assert float(rows["base"]["test_bleu_mean"]) == pytest.approx(base.test_bleu.mean, abs=1e-6)
    assert float(rows["base"]["test_chrf_std"]) == pytest.approx(base.test_chrf.std, abs=1e-6)
    assert rows["E1"]["test_bleu_mean"] == ""  # pending: not scored
    doc = json.loads(to_json(scored))
    base_json = next(r for r in doc["rows"] if r["row"] == "base")
    assert base_json["test_chrf_mean"] == pytest.approx(base.test_chrf.mean, abs=1e-6)
    assert base_json["seeds"]["1"]["test_bleu"] == pytest.approx(base.test_bleu.values[1])

    # the same study before any test-set score: no test column anywhere
    _, written = report
    assert "test_bleu_mean" not in written["csv"].read_text().splitlines()[0]
    base_json = json.loads(written["json"].read_text())["rows"][0]
    assert not [key for key in [*base_json, *base_json["seeds"]["0"]] if key.startswith("test_")]
    assert "(test)" not in written["html"].read_text() and "(test)" not in written["tex"].read_text()


def test_columns_choose_what_md_tex_and_html_show(report, tmp_path, capsys):
    out, _ = report
    keys = "row,N,d_model,ppl,bleu,delta_ppl,delta_bleu"
    argv = ["report", str(out), "--columns", keys, "--out", str(tmp_path), "--no_plots", "--quiet", "--samples", "50"]
    assert ablate(argv) == 0
    md = (tmp_path / "table3-smoke.md").read_text()
    header = [c.strip() for c in md.splitlines()[2].strip("|").split("|")]
    assert header == ["row", "N", "d_model", "PPL (dev)", "BLEU (dev)", "ΔPPL vs base", "ΔBLEU vs base"]
    tex = (tmp_path / "table3-smoke.tex").read_text()
    assert tex.split(r"\begin{tabular}{")[1].startswith("lrrrrrr}")
    html = (tmp_path / "table3-smoke.html").read_text()
    assert re.findall(r'<th class="\w+ col-(\w+)"', html) == keys.split(",")
    fields = (tmp_path / "table3-smoke.csv").read_text().splitlines()[0].split(",")
    assert {"d_ff", "chrf_mean", "wall_time_s", "device", "delta_chrf"} <= set(fields)  # CSV keeps every value

    assert ablate([*argv[:3], "row,bleuu,N", *argv[4:]]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "unknown column 'bleuu'" in err and "delta_ppl" in err and "test_bleu" in err


def test_corpus_is_named_from_the_data_config(tmp_path):
    out = make_study(tmp_path / "s", rows=TABLE3_ROWS[:2], seeds=(0,), storage=None)
    study = json.loads((out / "study.json").read_text())
    data = {"corpus": "/data/wmt14", "src": "de", "tgt": "en", "vocab_size": 37000, "spm_model_type": "bpe"}
    for row in study["rows"]:
        row["config"]["data"] = dict(data)
    (out / "study.json").write_text(json.dumps(study))
    for path in (out / "records").glob("*.json"):  # the records trained on it too: one study in the folder
        record = json.loads(path.read_text())
        record["config"]["data"] = dict(data)
        path.write_text(json.dumps(record))
    results = load_results(out)
    assert describe_corpus(results) == "wmt14 (de-en, SentencePiece bpe vocabulary of 37000)"
    legend = to_markdown(build_table(results, n_samples=50), corpus=describe_corpus(results))
    assert "preset 'smoke', corpus wmt14 (de-en, SentencePiece bpe vocabulary of 37000), seeds 0" in legend


def test_bleu_vs_params_labels_do_not_overlap(tmp_path):
    """Table 3 puts ten rows at the base's parameter count: their labels must still be apart and inside the axes."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    table, _ = table3_tiny(tmp_path / "table3-tiny")
    fig = bleu_vs_params_figure(table)
    renderer = FigureCanvasAgg(fig).get_renderer()
    (ax,) = fig.axes
    labels = {t.get_text(): t.get_window_extent(renderer) for t in ax.texts}
    assert set(labels) == {r.name for r in table.rows}
    overlaps = [
        (a, b)
        for i, (a, box) in enumerate(labels.items())
        for b, other in list(labels.items())[i + 1 :]
        if box.overlaps(other)
    ]
    assert overlaps == []
    inside, legend = ax.get_window_extent(renderer), ax.get_legend().get_window_extent(renderer)
    assert all(inside.x0 <= box.x0 and box.x1 <= inside.x1 and not box.overlaps(legend) for box in labels.values())


def test_a_format_without_plots_draws_none_and_the_same_inputs_draw_them_once(tmp_path):
    """`--format csv` draws no plot; the page draws them, a second report of the same records reuses them (same
    files, untouched), and a changed record draws them again."""
    import time

    from ablate.ablations.results.record import Record
    from ablate.reports.build import PLOTS_DRAWN

    out = make_study(tmp_path / "s", rows=TABLE3_ROWS[:3], seeds=(0, 1), storage=None)
    written = build_report(out, ["csv"], n_samples=100)
    assert not any(key.startswith("plot:") for key in written) and not (out / "report" / "plots").exists()

    first = build_report(out, ["html"], n_samples=100)
    pngs = {key: path for key, path in first.items() if key.startswith("plot:")}
    assert pngs and (out / "report" / "plots" / PLOTS_DRAWN).is_file()
    stamps = {key: path.stat().st_mtime_ns for key, path in pngs.items()}
    time.sleep(0.05)
    again = build_report(out, ["html"], n_samples=100)
    assert {k: p for k, p in again.items() if k.startswith("plot:")} == pngs
    assert {key: path.stat().st_mtime_ns for key, path in pngs.items()} == stamps
    assert again["html"].read_text().count("data:image/png;base64") == first["html"].read_text().count(
        "data:image/png;base64"
    )

    record_path = next((out / "records").glob("*.json"))
    record = json.loads(record_path.read_text())
    record["metrics"]["bleu"] = record["metrics"]["bleu"] + 3.0
    record_path.write_text(json.dumps(record))
    assert Record.read(record_path).metrics["bleu"] == record["metrics"]["bleu"]
    build_report(out, ["html"], n_samples=100)
    assert any(path.stat().st_mtime_ns != stamps[key] for key, path in pngs.items())
