"""`ablate compare OUT_A OUT_B`: two results directories row by row, over seeds, on real sweep records.

A is the shared finished sweep of sweep_rows.yaml (one seed); B is that study rerun with a change (two seeds, twice
the steps), or a copy of A whose records are altered in a known way. Expected numbers are computed here from the
records and with sacreBLEU, not copied from the command's output.
"""

from __future__ import annotations

import csv
import io
import json
import shutil
import statistics
from pathlib import Path

import pytest
import sacrebleu
from ablate.ablations.cli import main as ablate


def copy_sweep(src: Path, dst: Path) -> Path:
    """A results directory as `ablate compare` reads it (study.json, records, hyps, refs), without trial dirs."""
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("trials"))
    return dst


def lines(path: Path) -> list[str]:
    text = path.read_text(encoding="utf-8")
    return text.split("\n")[:-1] if text.endswith("\n") else text.split("\n")


def edit_json(path: Path, change) -> None:
    data = json.loads(path.read_text(encoding="utf-8"))
    change(data)
    path.write_text(json.dumps(data), encoding="utf-8")


def compare_json(a: Path, b: Path, capsys, *extra: str) -> dict:
    assert ablate(["compare", str(a), str(b), "--format", "json", "--samples", "200", *extra]) == 0
    return json.loads(capsys.readouterr().out)


@pytest.fixture(scope="module")
def rerun(sweeps, tmp_path_factory) -> Path:
    """sweep_rows.yaml again with two seeds and 20 steps instead of 10: what a user reruns into another directory."""
    out = tmp_path_factory.mktemp("rerun") / "out"
    done = sweeps.run("sweep_rows.yaml", out, "--seeds", "2", "--train.max_steps", "20")
    assert done.returncode == 0, done.stderr[-3000:]
    return out


def test_rerun_with_a_change_row_by_row_over_seeds(finished_sweep, rerun, sweeps, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "160")  # the terminal table's width (pytest-xdist's workers set the controller's)
    doc = compare_json(finished_sweep, rerun, capsys)
    settings = {s["setting"]: (s["a"], s["b"]) for s in doc["settings"]}
    assert settings["train.max_steps"] == (10, 20) and settings["seeds"] == ([0], [0, 1])
    assert "train.seed" not in settings and "study" not in settings and "preset" not in settings
    rows = {r["row"]: r for r in doc["rows"]}
    assert [r["row"] for r in doc["rows"]] == ["ok1", "nan", "ok2"]  # A's order

    records_a, records_b = sweeps.records(finished_sweep), sweeps.records(rerun)
    for name in ("ok1", "ok2"):
        row = rows[name]
        assert (row["seeds_complete_a"], row["seeds_total_a"], row["seeds_complete_b"], row["seeds_total_b"]) == (
            1,
            1,
            2,
            2,
        )
        for metric in ("bleu", "ppl"):
            a = records_a[f"{name}__seed0"]["metrics"][metric]
            b = [records_b[f"{name}__seed{s}"]["metrics"][metric] for s in (0, 1)]
            assert row[f"{metric}_mean_a"] == pytest.approx(a, abs=1e-6) and row[f"{metric}_std_a"] is None
            assert row[f"{metric}_mean_b"] == pytest.approx(statistics.fmean(b), abs=1e-6)
            assert row[f"{metric}_std_b"] == pytest.approx(statistics.stdev(b), abs=1e-6)
            assert row[f"{metric}_delta"] == pytest.approx(statistics.fmean(b) - a, abs=1e-5)
            assert row[f"{metric}_ci_low"] <= row[f"{metric}_delta"] <= row[f"{metric}_ci_high"]
            assert 0 <= row[f"{metric}_p"] <= row[f"{metric}_p_holm"] <= 1
        # Same corpus: both sides scored the same dev sentences, so both kinds of noise are counted.
        assert row["same_sentences"] is True
        assert row["tests"]["bleu"]["se_seeds"] > 0 and row["tests"]["bleu"]["se_sentences"] is not None
        assert row["differences"] == []  # max_steps changed in every row: the intended change, not a flag
        # A validated once (10 steps, val_every 10): its plateau cannot be told; B's is read from its curve.
        assert row["plateau_a"] == "unknown" and "A: plateau unknown" in row["flags"]
        assert any(f.startswith("B: not at plateau") for f in row["flags"]) == (row["plateau_b"] != "plateau")
    # 10 -> 20 steps: dev PPL falls, and the two rows' PPL differences are told apart from noise.
    assert rows["ok1"]["ppl_delta"] < 0 and rows["ok1"]["ppl_ci_high"] < 0

    nan = rows["nan"]
    assert nan["seeds_complete_a"] == 0 and nan["seeds_complete_b"] == 0 and nan["bleu_delta"] is None
    assert nan["flags"] == ["A: no complete seed (1 failed)", "B: no complete seed (2 failed)"]

    assert ablate(["compare", str(finished_sweep), str(rerun), "--samples", "200"]) == 0  # the terminal table
    text = capsys.readouterr().out
    assert "B differs from A in every row in common:" in text and "train.max_steps: 10 → 20" in text
    assert "1/1 → 2/2" in text and "0/1 → 0/2" in text and "B − A [95% CI]" in text


def test_altered_copy_known_differences_and_flags(finished_copy, tmp_path, capsys):
    a = finished_copy
    b = copy_sweep(a, tmp_path / "b")
    refs = lines(b / "refs" / "valid.txt")
    # ok1 in B translates every dev sentence perfectly; its record says so, as sacreBLEU scores it.
    shutil.copyfile(b / "refs" / "valid.txt", b / "hyps" / "ok1__seed0.txt")
    perfect = sacrebleu.corpus_bleu(refs, [refs]).score
    edit_json(b / "records" / "ok1__seed0.json", lambda r: r["metrics"].update(bleu=perfect))
    # ok2 in B also has a wider feed-forward layer: a difference beyond the directories' (none).
    edit_json(b / "records" / "ok2__seed0.json", lambda r: r["config"]["model"].update(d_ff=64))
    edit_json(
        b / "study.json", lambda s: next(r for r in s["rows"] if r["name"] == "ok2")["config"]["model"].update(d_ff=64)
    )
    # nan is missing from B; ok3 (a copy of ok2) is only in B.
    (b / "records" / "nan__seed0.json").unlink()
    edit_json(b / "study.json", lambda s: s.update(rows=[r for r in s["rows"] if r["name"] != "nan"]))
    ok3 = json.loads((b / "records" / "ok2__seed0.json").read_text(encoding="utf-8")) | {"row": "ok3"}
    (b / "records" / "ok3__seed0.json").write_text(json.dumps(ok3), encoding="utf-8")
    edit_json(b / "study.json", lambda s: s["rows"].append(s["rows"][-1] | {"name": "ok3"}))

    doc = compare_json(a, b, capsys)
    assert doc["settings"] == []  # no field changes in every row in common
    rows = {r["row"]: r for r in doc["rows"]}
    assert [r["row"] for r in doc["rows"]] == ["ok1", "nan", "ok2", "ok3"]

    ok1 = rows["ok1"]
    bleu_a = json.loads((a / "records" / "ok1__seed0.json").read_text())["metrics"]["bleu"]
    chrf_a = sacrebleu.corpus_chrf(lines(a / "hyps" / "ok1__seed0.txt"), [refs]).score
    assert ok1["bleu_mean_b"] == pytest.approx(100.0) and ok1["bleu_delta"] == pytest.approx(100.0 - bleu_a, abs=1e-5)
    assert ok1["chrf_mean_a"] == pytest.approx(chrf_a, abs=1e-5)
    assert ok1["chrf_delta"] == pytest.approx(100.0 - chrf_a, abs=1e-5)
    # One seed each side: the sentence bootstrap alone decides, and a jump to perfect output is significant.
    assert ok1["tests"]["bleu"]["se_seeds"] is None and ok1["tests"]["bleu"]["se_sentences"] > 0
    assert ok1["bleu_p_holm"] < 0.01 and ok1["bleu_ci_low"] > 0
    # PPL was not touched: the same per-sentence NLL on both sides is no difference at all.
    assert ok1["ppl_delta"] == 0 and ok1["ppl_p"] == 1.0
    assert not any(f.startswith("also differs") for f in ok1["flags"])

    assert rows["ok2"]["differences"] == [{"field": "model.d_ff", "a": 32, "b": 64}]
    assert "also differs: model.d_ff 32 → 64" in rows["ok2"]["flags"]
    assert rows["ok2"]["bleu_delta"] == 0
    assert "missing in B" in rows["nan"]["flags"] and rows["nan"]["in_b"] is False
    assert "missing in A" in rows["ok3"]["flags"] and rows["ok3"]["seeds_complete_b"] == 1
    assert rows["ok3"]["bleu_delta"] is None
    assert any("seed noise is not estimated" in line for line in doc["legend"])


def test_other_dev_sentences_count_seed_noise_only(finished_sweep, rerun, tmp_path, capsys):
    b = copy_sweep(rerun, tmp_path / "b")
    refs = b / "refs" / "valid.txt"
    refs.write_text("\n".join(reversed(lines(refs))) + "\n", encoding="utf-8")  # another order: other pairs

    doc = compare_json(finished_sweep, b, capsys)
    ok1 = next(r for r in doc["rows"] if r["row"] == "ok1")
    assert ok1["same_sentences"] is False
    assert ok1["tests"]["bleu"]["se_sentences"] is None and ok1["tests"]["bleu"]["se_seeds"] > 0
    assert ok1["bleu_ci_low"] < ok1["bleu_delta"] < ok1["bleu_ci_high"]
    assert any("scored different dev sentences" in line for line in doc["legend"])  # said once, not per row
    assert not any("different dev sentences" in f for f in ok1["flags"])


def test_formats_written_atomically_and_study_names(finished_sweep, rerun, tmp_path, capsys):
    report = tmp_path / "report"
    report.mkdir()
    for name, fmt in (("cmp.md", None), ("cmp.csv", None), ("cmp.json", None), ("cmp.txt", "md")):
        extra = ["--format", fmt] if fmt else []
        target = report / name
        target.write_text("old contents\n")
        assert (
            ablate(["compare", str(finished_sweep), str(rerun), "--out", str(target), "--samples", "100", *extra]) == 0
        )
        assert str(target) in capsys.readouterr().out
    assert sorted(p.name for p in report.iterdir()) == ["cmp.csv", "cmp.json", "cmp.md", "cmp.txt"]  # no temp file
    md = (report / "cmp.md").read_text()
    assert md.startswith("## ") and "| ok1 | 1/1 → 2/2 | BLEU |" in md and "  - train.max_steps: 10 → 20" in md
    assert (report / "cmp.txt").read_text() == md  # --format wins over the suffix
    rows = list(csv.DictReader(io.StringIO((report / "cmp.csv").read_text())))
    assert [r["row"] for r in rows] == ["ok1", "nan", "ok2"] and rows[0]["seeds_complete_b"] == "2"
    assert json.loads((report / "cmp.json").read_text())["b"]["seeds"] == [0, 1]

    assert ablate(["compare", str(finished_sweep), str(rerun), "--out", str(report), "--samples", "100"]) == 0
    assert (report / f"{finished_sweep.name}-vs-{rerun.name}.txt").read_text().startswith("A: ")
    capsys.readouterr()

    runs = tmp_path / "runs"  # two studies named as `ablate report` names them: RUNS_DIR/<study>-<preset>
    copy_sweep(finished_sweep, runs / "before-smoke")
    copy_sweep(rerun, runs / "after-smoke")
    assert ablate(["compare", "before", "after", "--runs_dir", str(runs), "--json", "--samples", "100"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["a"]["out_dir"] == str(runs / "before-smoke") and doc["b"]["out_dir"] == str(runs / "after-smoke")


def test_two_rows_of_one_sweep_still_compare(finished_sweep, capsys):
    assert ablate(["compare", "ok1", "ok2", "--out", str(finished_sweep)]) == 0
    text = capsys.readouterr().out
    assert "A: ok1@0" in text and "B: ok2@0" in text and "model.n_heads" in text
    record = finished_sweep / "records" / "ok1__seed0.json"
    assert ablate(["compare", str(record), str(record)]) == 0
    assert "(same configuration)" in capsys.readouterr().out
    from ablate.reports.commands.compare import build_parser

    help_text = build_parser().format_help()
    assert "Two results directories" in help_text and "Two runs" in help_text


def one_line_error(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0, err
    return err


def test_bad_input_is_one_line_and_exit_2(finished_sweep, tmp_path, capsys):
    empty = tmp_path / "empty"
    empty.mkdir()
    assert ablate(["compare", str(empty), str(finished_sweep)]) == 2
    err = one_line_error(capsys)
    assert str(empty) in err and "has no study.json" in err

    started = tmp_path / "started"  # a sweep that has written study.json and no record yet
    (started / "records").mkdir(parents=True)
    shutil.copyfile(finished_sweep / "study.json", started / "study.json")
    assert ablate(["compare", str(finished_sweep), str(started)]) == 2
    err = one_line_error(capsys)
    assert str(started) in err and "no trial record yet" in err and "wait until" in err

    other = copy_sweep(finished_sweep, tmp_path / "other")  # every row renamed: nothing in common
    for path in sorted((other / "records").glob("*.json")):
        edit_json(path, lambda r: r.update(row=f"x{r['row']}"))
        path.rename(path.with_name(f"x{path.name}"))
    edit_json(other / "study.json", lambda s: [r.update(name=f"x{r['name']}") for r in s["rows"]])
    assert ablate(["compare", str(finished_sweep), str(other)]) == 2
    err = one_line_error(capsys)
    assert "no row in common" in err and str(other) in err and "xok1" in err

    assert ablate(["compare", str(finished_sweep), str(tmp_path / "nope" / "out")]) == 2
    assert "does not exist" in one_line_error(capsys)
    assert ablate(["compare", "ok1", "ok2", "--runs_dir", str(tmp_path)]) == 2  # rows, but no --out
    assert "--study OUT" in one_line_error(capsys)
    assert ablate(["compare", str(finished_sweep), str(finished_sweep), "--plot", str(tmp_path / "c.png")]) == 2
    assert "--plot" in one_line_error(capsys)
    assert ablate(["compare", "ok1", "ok2", "--out", str(finished_sweep), "--format", "csv"]) == 2
    assert "two results directories" in one_line_error(capsys)
