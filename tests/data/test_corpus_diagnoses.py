"""Corpus diagnoses name the real cause (issue 85), through the commands a user types: a tab inside a TSV sentence is
not read as a split, UTF-16 (or any byte-order mark but UTF-8's) is named with the conversion that fits it, and
`ablate train` says what it left out of the corpus and shows its progress while it prepares one."""

from __future__ import annotations

from pathlib import Path

import pytest
from ablate.ablations.cli import main
from ablate.data import corpus

PAIRS = corpus.generate(5, {"train": 400, "valid": 30, "test": 30})
"""Real parallel text (the built-in generator's), enough for a small SentencePiece vocabulary."""


def refused(capsys, *argv: str) -> str:
    """The one error line a command ends with on bad input (exit 2, no traceback), after any progress lines."""
    assert main(list(argv)) == 2, argv
    lines = capsys.readouterr().err.splitlines()
    assert "Traceback" not in "\n".join(lines) and all(line.endswith(("...", "s")) for line in lines[:-1]), lines
    return lines[-1]


def prepare_args(tmp_path: Path, corpus_path: Path, *extra: str) -> list[str]:
    return ["data", "prepare", "--data.corpus", str(corpus_path), "--data.vocab_size", "200",
            "--data.cache_dir", str(tmp_path / "cache"), *extra]  # fmt: skip


def write_tsv(path: Path, bad: str, row: int = 11, split: bool = False) -> Path:
    src, tgt = PAIRS["train"]
    names = ("train", "valid", "dev", "test")
    rows = [f"{s}\t{t}" + (f"\t{names[i % 4]}" if split else "") for i, (s, t) in enumerate(zip(src, tgt, strict=True))]
    rows[row - 1] = bad
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("bad", "split", "says"),
    [
        ("A cat sleeps.\tEine Katze\tschläft.", False,
         "row 11 has 3 tab-separated columns, where a row is source<TAB>target, and its third, 'schläft.', names no "
         "split: a tab inside a sentence? replace it with a space"),
        ("A cat\tsleeps.\tEine Katze schläft.\ttrain", True,
         "row 11 has 4 tab-separated columns, where a row is source<TAB>target<TAB>split: a tab inside a sentence? "
         "replace it with a space"),
        ("A cat sleeps.\tEine Katze schläft.\ttrian", True,
         "row 11: split column is 'trian'; use train, valid or test"),
    ],
    ids=["tab in a sentence", "tab in a sentence, split column", "a split misspelt"],
)  # fmt: skip
def test_a_tsv_row_with_too_many_columns_says_a_tab_is_inside_a_sentence(tmp_path, capsys, bad, split, says):
    path = write_tsv(tmp_path / "pairs.tsv", bad, split=split)
    line = refused(capsys, *prepare_args(tmp_path, path))
    assert line == f"ablate data: error: {path} {says}", line


def write_dir(directory: Path) -> Path:
    directory.mkdir()
    for split, (src, tgt) in PAIRS.items():
        (directory / f"{split}.de").write_text("\n".join(src) + "\n", encoding="utf-8")
        (directory / f"{split}.en").write_text("\n".join(tgt) + "\n", encoding="utf-8")
    return directory


@pytest.mark.parametrize(
    ("encoding", "named", "iconv"),
    [
        ("utf-16", "UTF-16 (little-endian) text (it starts with the byte-order mark FF FE)", "utf-16"),
        ("utf-16-be-bom", "UTF-16 (big-endian) text (it starts with the byte-order mark FE FF)", "utf-16"),
        ("utf-16-le", "UTF-16 (little-endian) text (every other byte is NUL, with no byte-order mark)", "utf-16le"),
        ("utf-32", "UTF-32 (little-endian) text (it starts with the byte-order mark FF FE 00 00)", "utf-32"),
    ],
    ids=["UTF-16", "UTF-16 big-endian", "UTF-16 without a mark", "UTF-32"],
)
def test_a_file_in_utf16_or_with_another_byte_order_mark_is_named_with_its_conversion(
    tmp_path, capsys, encoding, named, iconv
):
    data = write_dir(tmp_path / "d")
    text = (data / "train.de").read_text(encoding="utf-8")
    raw = ("\ufeff" + text).encode("utf-16-be") if encoding == "utf-16-be-bom" else text.encode(encoding)
    (data / "train.de").write_bytes(raw)
    line = refused(capsys, *prepare_args(tmp_path, data, "--data.src", "de", "--data.tgt", "en"))
    path = data / "train.de"
    assert line == (
        f"ablate data: error: {path} is {named}, not UTF-8: convert it to UTF-8, e.g. iconv -f {iconv} -t utf-8 "
        f"{path} > {path}.utf8"
    )


def test_latin1_is_still_told_as_latin1(tmp_path, capsys):
    data = write_dir(tmp_path / "d")
    lines = (data / "train.en").read_bytes().split(b"\n")
    lines[41] = "café".encode("latin-1")
    (data / "train.en").write_bytes(b"\n".join(lines))
    line = refused(capsys, *prepare_args(tmp_path, data, "--data.src", "de", "--data.tgt", "en"))
    assert line.endswith("train.en line 42 is not valid UTF-8 (byte 0xe9): re-encode the file as UTF-8, e.g. iconv "
                         "-f latin1 -t utf-8")  # fmt: skip


def with_a_long_pair(directory: Path) -> Path:
    """A corpus folder whose 101st training pair has a 50,000-character source."""
    write_dir(directory)
    src = (directory / "train.de").read_text(encoding="utf-8").splitlines()
    src[100] = " ".join(["lang"] * 10_000)
    (directory / "train.de").write_text("\n".join(src) + "\n", encoding="utf-8")
    return directory


def test_data_prepare_says_what_it_filtered_in_one_line(tmp_path, capsys):
    data = with_a_long_pair(tmp_path / "d")
    assert main(prepare_args(tmp_path, data, "--data.src", "de", "--data.tgt", "en", "--data.max_len", "200")) == 0
    out = capsys.readouterr().out
    assert (
        f"filtered 1 of 460 pairs of {data}: 1 (train) longer than max_len=200 subwords on a side; --data.max_len or "
        "--data.truncate true keeps the long ones"
    ) in out.splitlines()


@pytest.mark.slow
def test_train_says_what_it_filtered_and_shows_progress_while_it_prepares(tmp_path, capsys, monkeypatch):
    """`ablate train` used to drop a 50,000-character pair without a word, and print nothing while it prepared the
    corpus: now `ablate data prepare`'s progress lines, then one line with what was left out and why (the second
    run, from the cache, says it again and prepares nothing)."""
    monkeypatch.setenv("WANDB_MODE", "disabled")
    data = with_a_long_pair(tmp_path / "d")
    argv = ["train", "--preset", "smoke", "--data.corpus", str(data), "--data.src", "de", "--data.tgt", "en",
            "--data.vocab_size", "200", "--data.max_len", "200", "--data.cache_dir", str(tmp_path / "cache"),
            "--train.max_steps", "2", "--train.budgets", "[]", "--train.test_eval", "false", "--train.beam_size", "1",
            "--train.max_len_b", "5", "--train.val_max_sentences", "10", "--out", str(tmp_path / "run")]  # fmt: skip
    said = (
        f"ablate data: filtered 1 of 460 pairs of {data}: 1 (train) longer than max_len=200 subwords on a side; "
        "--data.max_len or --data.truncate true keeps the long ones"
    )
    assert main(argv) == 0
    err = capsys.readouterr().err.splitlines()
    steps = [line for line in err if line.startswith("ablate data: ") and line != said]
    assert [line.split(" ...")[0] for line in steps if line.endswith(" ...")] == [
        f"ablate data: reading {data}",
        "ablate data: training SentencePiece bpe (vocabulary 200)",
        "ablate data: encoding splits",
    ]
    assert err.count(said) == 1 and err.index(said) > err.index("ablate data: encoding splits ...")
    assert main([*argv, "--replace"]) == 0
    err = capsys.readouterr().err.splitlines()
    assert err.count(said) == 1 and not any(line.endswith(" ...") for line in err)
