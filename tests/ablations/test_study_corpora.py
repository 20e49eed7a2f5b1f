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
