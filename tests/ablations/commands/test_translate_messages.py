"""`ablate translate` on a folder that cannot give it a model says what is there and how to get one, in one line."""

from __future__ import annotations

import tarfile
from pathlib import Path

import pytest
from ablate.ablations.cli import main

ARCHIVE = Path(__file__).resolve().parents[3] / "benchmarks" / "runs" / "table3-tiny-gettext.tar.xz"


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


@pytest.mark.parametrize("learned", [True, False])
def test_a_line_longer_than_the_model_was_trained_on_is_said_once(learned, capsys):
    """Before, a learned-position model cut a 10,000-word line silently, and a sinusoidal one gave an empty line."""
    from ablate.ablations.commands.translate import _warn_long

    _warn_long([[5] * 10, [5] * 300, [5] * 999, [5] * 255], max_len=256, learned=learned)
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "2 line(s) longer than the model's max_len of 256" in err
    assert "line 3: 999" in err and (("cut to its first 255" in err) == learned)
    _warn_long([[5] * 255], max_len=256, learned=learned)
    assert capsys.readouterr().err == ""


def test_a_beam_wider_than_the_vocabulary_or_over_64_is_said_in_one_line_and_decodes(finished_sweep, tmp_path, capsys):
    """`--beam 1000` ran for 42 s and 1.76 GB on 20 lines with no word that no beam that wide helps."""
    model = finished_sweep / "trials" / "ok1__seed0" / "model.pt"
    source = tmp_path / "source.txt"
    source.write_text("the house\n")
    vocabulary = 300  # tests/ablations/studies/sweep_rows.yaml's data.vocab_size
    for beam, said in ((vocabulary + 1, f"wider than the model's vocabulary of {vocabulary} subwords"),
                       (65, "over 64"), (4, None)):  # fmt: skip
        assert main(["translate", str(model), "--input", str(source), "--beam", str(beam)]) == 0
        printed = capsys.readouterr()
        assert len(printed.out.splitlines()) == 1  # it still translates
        warned = [line for line in printed.err.splitlines() if "warning" in line]
        if said is None:
            assert not warned, warned
        else:
            assert len(warned) == 1 and f"--beam {beam} is {said}" in warned[0], printed.err


@pytest.mark.parametrize(("encoding", "iconv"), [("utf-16", "utf-16"), ("latin-1", "latin1")])
def test_an_input_that_is_not_utf8_is_named_with_the_conversion_that_fixes_it(
    finished_sweep, tmp_path, capsys, encoding, iconv
):
    """Before, a UTF-16 input ended in 'unexpected error: UnicodeDecodeError' and a saved traceback."""
    model = finished_sweep / "trials" / "ok1__seed0" / "model.pt"
    source = tmp_path / "source.txt"
    source.write_bytes("the house é\n".encode(encoding))
    assert main(["translate", str(model), "--input", str(source)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("ablate translate: error: --input"), err
    assert f"iconv -f {iconv} -t utf-8" in err and "Traceback" not in err, err
