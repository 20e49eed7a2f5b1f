"""`ablate report` and `ablate compare` through the dispatcher: resolution of study names, output, bad input."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest
from ablate.ablations.cli import main as ablate
from reports_fixtures import TABLE3_ROWS, make_study

ROWS = TABLE3_ROWS[:4]  # base, A1, A3, B1


@pytest.fixture
def runs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    make_study(tmp_path / "runs" / "table3-smoke", rows=ROWS, plan={("B1", 1): "running"})
    return tmp_path / "runs"


def test_report_by_study_name_writes_every_format(runs, capsys):
    assert ablate(["report", "table3", "--samples", "100"]) == 0
    printed = capsys.readouterr().out
    assert any(line.startswith("A1 ") for line in printed.splitlines()) and "1/2 · 1 running" in printed
    for fmt in ("md", "tex", "csv", "json", "html", "txt"):
        assert (runs / "table3-smoke" / "report" / f"table3-smoke.{fmt}").is_file()
        assert f"table3-smoke.{fmt}" in printed


def test_report_picks_the_preset_or_the_newest(runs, tmp_path, capsys):
    time.sleep(0.01)
    make_study(runs / "table3-tiny", rows=ROWS[:2], seeds=(0,), storage=None)
    assert ablate(["report", "table3", "--format", "csv", "--no_plots", "--quiet"]) == 0
    assert (runs / "table3-tiny" / "report" / "table3-smoke.csv").is_file()  # newest dir; preset 'smoke' inside
    assert ablate(["report", "table3", "--preset", "smoke", "--format", "md", "--out", "rep", "--quiet"]) == 0
    assert (tmp_path / "rep" / "table3-smoke.md").is_file()


def test_report_bad_input_is_one_line_and_exit_2(runs, capsys):
    assert ablate(["report", "runs/nope"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "runs/nope does not exist" in err

    assert ablate(["report", "lost-study"]) == 2
    assert "no results for study 'lost-study'" in capsys.readouterr().err

    assert ablate(["report", str(runs / "table3-smoke"), "--format", "md,pdf"]) == 2
    err = capsys.readouterr().err
    assert "unknown format 'pdf'" in err and "md,tex,csv,json,html" in err

    corrupt = runs / "table3-smoke" / "records" / "A1__seed0.json"
    corrupt.write_text('{"row": "A1", "seed": 0, "state": "compl')
    assert ablate(["report", str(runs / "table3-smoke")]) == 2
    err = capsys.readouterr().err.strip()
    assert str(corrupt) in err and "not valid JSON" in err and err.count("\n") == 0

    assert ablate(["report", str(runs)]) == 2  # a directory, but not a sweep's OUT
    assert "has no study.json" in capsys.readouterr().err


def table_rows(md: str) -> list[str]:
    """The row names of a report's Markdown table, in order."""
    lines = [line for line in md.split("### ")[0].splitlines() if line.startswith("| ")][1:]
    return [line.strip("|").split(" | ")[1].strip() for line in lines]


def test_report_of_some_rows_shows_them_and_what_they_are_compared_with(runs, capsys):
    """`--rows`: the rows named, the base, and the rows their claims compare them with (A1 against B1 here), with
    the claims that compare two of them; the whole study's numbers; its own folder, the full report left alone."""
    out = runs / "table3-smoke"
    claims = runs.parent / "claims.yaml"
    claims.write_text(
        "claims:\n"
        "  - {id: heads, text: one head against a small d_k, compare: [{row: A1, against: B1, metric: bleu, expect: "
        "lower}]}\n"
        "  - {id: deep, text: heads, compare: [{row: A3, metric: bleu, expect: lower}]}\n"
    )
    assert ablate(["report", "table3", "--samples", "100", "--format", "md,json", "--no_plots", "--quiet"]) == 0
    full = (out / "report" / "table3-smoke.md").read_text()
    capsys.readouterr()
    args = ["report", str(out), "--rows", "A1,A1", "--claims", str(claims), "--samples", "100", "--format", "md,json"]
    assert ablate(args) == 0
    md = (out / "report" / "rows-A1" / "table3-smoke.md").read_text()
    assert table_rows(md) == ["base", "A1", "B1"]  # display order; B1: A1's claim compares it with B1
    assert "one head against a small d_k" in md and "A3" not in md  # the claim of A3: not shown
    assert "rows shown: A1, and what they are compared with: base, B1 (of the study's 4;" in md
    assert (out / "report" / "table3-smoke.md").read_text() == full and table_rows(full) == ["base", "A1", "A3", "B1"]
    whole = json.loads((out / "report" / "table3-smoke.json").read_text())
    mine = json.loads((out / "report" / "rows-A1" / "table3-smoke.json").read_text())
    a1 = next(r for r in whole["rows"] if r["row"] == "A1")
    assert next(r for r in mine["rows"] if r["row"] == "A1")["bleu_p_holm"] == a1["bleu_p_holm"]  # the study's tests
    assert "rows-A1" in capsys.readouterr().out


def test_report_of_unknown_rows_is_one_line_exit_2_and_writes_nothing(runs, capsys):
    out = runs / "table3-smoke"
    for rows, said in [("A1,B9", "the study has no row 'B9' (did you mean 'B1'?); rows are base, A1, A3, B1"),
                       ("zz", "the study has no row 'zz'; rows are"), (",", "--rows: no row given")]:  # fmt: skip
        assert ablate(["report", str(out), "--rows", rows, "--samples", "100"]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and said in err and "Traceback" not in err, err
    assert not (out / "report").exists()


def test_compare_rows_and_record_files(runs, capsys):
    out = runs / "table3-smoke"
    assert ablate(["compare", "A1", "base@1", "--study", str(out), "--plot", str(out / "cmp.png")]) == 0
    captured = capsys.readouterr()
    text = captured.out
    assert "A: A1@0" in text and "B: base@1" in text and captured.err == ""
    assert "model.n_heads" in text and "model.d_k" in text and "train.seed" in text
    assert "model.d_model" not in text  # only fields that differ
    assert "paired bootstrap p =" in text and "val bleu" in text
    assert (out / "cmp.png").read_bytes().startswith(b"\x89PNG")

    a, b = out / "records/B1__seed0.json", out / "records/B1__seed0.json"
    assert ablate(["compare", str(a), str(b)]) == 0
    text = capsys.readouterr().out
    assert "(same configuration)" in text and "0/80 lines differ" in text and "p = 1.0000" in text


def test_compare_out_is_where_to_write_in_every_mode(runs, capsys, monkeypatch):
    """--out is a file to write for two results directories and was the INPUT of two rows; the rows' directory is
    --study (a directory, or a study name under --runs_dir) and --out writes their comparison too. The old spelling
    still reads the rows, with a one-line notice on stderr."""
    out = runs / "table3-smoke"
    monkeypatch.chdir(runs.parent)
    assert ablate(["compare", "A1", "base", "--study", "table3", "--runs_dir", str(runs)]) == 0  # by study name
    printed = capsys.readouterr().out
    assert "A: A1@0" in printed

    target = runs.parent / "rows.txt"
    assert ablate(["compare", "A1", "base", "--study", str(out), "--out", str(target)]) == 0
    assert target.read_text() == printed and str(target) in capsys.readouterr().out
    assert not list(out.glob("*.txt"))  # nothing written into the results directory

    assert ablate(["compare", "A1", "base", "--out", str(out)]) == 0  # the old spelling
    captured = capsys.readouterr()
    assert captured.out == printed
    assert captured.err.count("\n") == 1 and "deprecated: use --study " + str(out) in captured.err

    assert ablate(["compare", str(out), str(out), "--study", str(out)]) == 2
    assert "leave --study out" in capsys.readouterr().err


def test_compare_bad_input(runs, capsys):
    out = runs / "table3-smoke"
    assert ablate(["compare", "A1", "base"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "ablate compare A1 base --study OUT" in err
    assert ablate(["compare", "B1@1", "base", "--study", str(out)]) == 2  # still running: no record
    assert "that seed has no record yet" in capsys.readouterr().err
    assert ablate(["compare", "Z9", "base", "--study", str(out)]) == 2
    assert "no such row" in capsys.readouterr().err
    assert ablate(["compare", "A1@x", "base", "--study", str(out)]) == 2
    assert "must be an integer" in capsys.readouterr().err
    assert ablate(["compare", "A1", "base", "--study", "lost-study", "--runs_dir", str(runs)]) == 2
    assert "no results for study 'lost-study'" in capsys.readouterr().err


def test_help_does_not_import_heavy_modules():
    code = (
        "import sys\n"
        "from ablate.reports.commands import report, compare\n"
        "import ablate.reports.build, ablate.reports.compare\n"
        "heavy = [m for m in ('torch', 'lightning', 'pytorch_lightning', 'matplotlib', 'wandb', 'optuna', 'sacrebleu')"
        " if m in sys.modules]\n"
        "assert not heavy, heavy\n"
        # Of data/ and lightning_modules/, only the stdlib-only modules reports share: errors, the corpus
        # fingerprint, the cache's digests, atomic writes, the metric facts, and the config dataclasses that come
        # with the study's definition (`ablate.ablations.study`'s face: its rows are configs).
        "training = [m for m in sys.modules if m.startswith(('ablate.lightning_modules', 'ablate.data.'))"
        " and m not in ('ablate.data.errors', 'ablate.data.fingerprint', 'ablate.data.cache', 'ablate.data.atomic',"
        " 'ablate.data.config', 'ablate.lightning_modules', 'ablate.lightning_modules.metrics',"
        " 'ablate.lightning_modules.config', 'ablate.lightning_modules.card')]\n"
        "assert not training, training\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
