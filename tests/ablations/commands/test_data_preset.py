"""`ablate data export|prepare --preset NAME [--study S --row R]` (issue 85): the corpus a preset trains on, exactly,
not DataConfig's defaults (the default built-in corpus is another synthetic language from the tiny preset's, on which a
tiny model scores BLEU 2 instead of 45)."""

from __future__ import annotations

import json
from dataclasses import replace

from ablate.ablations.cli import main
from ablate.ablations.study.definition import load_study
from ablate.data.prepare import prepare

STUDY = """\
name: sizes
rows:
  - {name: base, group: base}
  - {name: less-data, data: {builtin_train: 700}}
"""


def test_export_with_a_preset_writes_the_corpus_that_preset_trains_on(tmp_path, capsys):
    cache = str(tmp_path / "cache")
    copy = tmp_path / "smoke-corpus"
    assert main(["data", "export", str(copy), "--preset", "smoke", "--data.cache_dir", cache, "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["of"] == {"study": "table3", "row": "base", "preset": "smoke"}
    assert summary["pairs"] == {"train": 6000, "valid": 200, "test": 200}  # the smoke preset's sizes
    trained = replace(load_study("table3").run_config("base", "smoke").data, cache_dir=cache)  # what a trial reads
    assert summary["fingerprint"] == prepare(trained).fingerprint.to_json()
    assert (copy / "test.src").read_text(encoding="utf-8").splitlines() == prepare(trained).sources("test")


def test_prepare_takes_a_studys_row_at_a_preset_and_says_whose_corpus_it_is(tmp_path, capsys):
    study = tmp_path / "sizes.yaml"
    study.write_text(STUDY, encoding="utf-8")
    common = ["--study", str(study), "--preset", "smoke", "--data.cache_dir", str(tmp_path / "cache")]
    assert main(["data", "prepare", *common, "--row", "less-data", "--json"]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert stats["splits"]["train"]["pairs"] == 700 and stats["vocab_size"] == 500  # the row's data at smoke
    assert stats["of"] == {"study": str(study), "row": "less-data", "preset": "smoke"}
    assert main(["data", "prepare", *common, "--data.builtin_train", "650"]) == 0  # the base, a field on top
    out = capsys.readouterr().out
    assert out.startswith(f"corpus      builtin (src -> tgt), the corpus {study} row base trains on at preset smoke\n")
    assert "\ntrain       650 " in out


def test_a_bad_preset_study_or_row_is_one_line(tmp_path, capsys):
    study = tmp_path / "nobase.yaml"
    study.write_text("name: nobase\nrows:\n  - {name: a}\n  - {name: b}\n", encoding="utf-8")
    cases = [
        (["--preset", "huge"], "unknown preset 'huge': choose one of"),
        (
            ["--preset", "smoke", "--row", "B9"],
            "study 'table3' has no row 'B9' (did you mean 'B2'?): rows are base, A1",
        ),
        (["--study", "nowhere"], "no study 'nowhere': give a YAML file or one of the built-in studies"),
        (["--study", str(study)], f"{study}: the study has no base row: name the row with --row (one of a, b)"),
    ]
    for extra, says in cases:
        assert main(["data", "export", str(tmp_path / "copy"), *extra]) == 2, extra
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith("ablate data: error: ") and says in err, err
        assert not (tmp_path / "copy").exists()


def test_export_without_a_preset_says_it_is_no_presets_corpus(tmp_path, capsys):
    args = ["--data.builtin_train", "300", "--data.builtin_valid", "30", "--data.builtin_test", "30",
            "--data.vocab_size", "300", "--data.cache_dir", str(tmp_path / "cache")]  # fmt: skip
    assert main(["data", "export", str(tmp_path / "copy"), *args]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert first.startswith(
        f"exported builtin (DataConfig's defaults, not a preset's corpus: --preset NAME exports the one a preset "
        f"trains on) to {tmp_path / 'copy'}: train 300, valid 30, test 30 pairs"
    )
