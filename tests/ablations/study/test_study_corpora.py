"""`ablate studies FILE` checks that every corpus the study's rows read is there, as `ablate sweep` will need it."""

from __future__ import annotations

import pytest
from ablate.ablations import cli

STUDY = """\
name: corpus-check
description: "rows reading corpora"
scale: none
preset: smoke
seeds: 1
base:
  data: {{corpus: {base}}}
rows:
  - {{name: r1}}
  - {{name: r2, data: {{corpus: {other}}}}}
"""


@pytest.mark.parametrize("missing", ["base", "row"])
def test_a_study_whose_corpus_is_missing_is_refused_naming_the_row(tmp_path, capsys, missing):
    folder = tmp_path / "corpus"
    folder.mkdir()
    for split in ("train", "valid", "test"):
        for side in ("src", "tgt"):
            (folder / f"{split}.{side}").write_text("a b c\n")
    gone = tmp_path / "gone"
    base, other = (gone, folder) if missing == "base" else (folder, gone)
    study = tmp_path / "study.yaml"
    study.write_text(STUDY.format(base=base, other=other))
    assert cli.main(["studies", str(study)]) == 2
    err = capsys.readouterr().err.strip()
    row = "r1" if missing == "base" else "r2"
    assert len(err.splitlines()) == 1 and f"row '{row}': --data.corpus {gone}: no such directory" in err, err
    study.write_text(STUDY.format(base=folder, other=folder))
    assert cli.main(["studies", str(study)]) == 0
    assert "ok (2 rows" in capsys.readouterr().out


def test_a_row_that_changes_the_heads_but_not_d_k_is_warned_with_what_it_gives(tmp_path, capsys):
    study = tmp_path / "heads.yaml"
    study.write_text(
        "name: heads\ndescription: d\nscale: paper\npreset: tiny\nseeds: 1\nrows:\n  - {name: base}\n"
        "  - {name: h2, model: {n_heads: 2}}\n  - {name: h2ok, model: {n_heads: 2, d_k: 256, d_v: 256}}\n"
    )
    assert cli.main(["studies", str(study)]) == 0
    warnings = [line for line in capsys.readouterr().out.splitlines() if "warning" in line]
    assert len(warnings) == 1, warnings  # h2ok keeps h x d_k = d_model, as Table 3's rows A do
    assert (
        "row 'h2' sets n_heads without d_k: h 2 x d_k 8 = 16, not d_model 64 (0.30M parameters at tiny)" in warnings[0]
    )
    assert cli.main(["studies", "table3"]) == 0  # its rows A set d_k with h; its rows B change d_k alone, on purpose
    assert "warning" not in capsys.readouterr().out
