"""`ablate translate` on a folder that cannot give it a model says what is there and how to get one, in one line."""

from __future__ import annotations

import tarfile
from pathlib import Path

import pytest
from ablate.ablations.cli import main

ARCHIVE = Path(__file__).resolve().parents[2] / "benchmarks" / "runs" / "table3-tiny-gettext.tar.xz"


@pytest.fixture(scope="module")
def archive(tmp_path_factory) -> Path:
    """An archived study unpacked: records, hypotheses, references and study.json, no weights."""
    root = tmp_path_factory.mktemp("archive")
    with tarfile.open(ARCHIVE) as tar:
        tar.extractall(root, filter="data")
    [study] = {p.parent for p in root.rglob("study.json")}
    return study


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (
            ["--row", "B1"],
            "finished trial(s) but no model weights (an archive keeps records only): retrain one, e.g. "
            "ablate train --study table3 --row B1 --seed 0 --preset tiny --out DIR",
        ),
        ([], "no model weights"),
        (["--row", "B9"], "the study has no row 'B9' (did you mean 'B2'?); its rows: base, A1, "),
    ],
)
def test_an_archive_or_an_unknown_row_says_what_is_there(archive, args, said, capsys):
    assert main(["translate", str(archive), *args]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and said in err and "none yet" not in err, err
