"""Bad input: each case is one AblateError line naming the file/row and what to do, and leaves no cache behind."""

from __future__ import annotations

from pathlib import Path

import pytest
from ablate.data.errors import AblateError, ConfigError
from ablate.data.prepare import prepare
from ablate.data.sources import TsvSource


@pytest.fixture()
def fails(cache_entries):
    """prepare(cfg) must raise one AblateError line holding every fragment, and leave no cache entry."""

    def check(cfg, *fragments: str) -> str:
        with pytest.raises(AblateError) as caught:
            prepare(cfg)
        message = str(caught.value)
        assert "\n" not in message
        for fragment in fragments:
            assert fragment in message, message
        assert cache_entries(Path(cfg.cache_dir)) == []
        return message

    return check


def test_line_counts_differ_names_both_files_and_counts(tmp_path, small_config, write_parallel_dir, fails):
    data = write_parallel_dir(tmp_path / "d")
    lines = (data / "valid.en").read_text().splitlines()
    (data / "valid.en").write_text("\n".join(lines[:-1]) + "\n")
    fails(small_config(tmp_path / "c", corpus=str(data), src="de", tgt="en"), "valid.de has 30", "valid.en has 29")


def test_empty_file(tmp_path, small_config, write_parallel_dir, fails):
    data = write_parallel_dir(tmp_path / "d")
    (data / "test.de").write_text("\n\n")
    fails(small_config(tmp_path / "c", corpus=str(data), src="de", tgt="en"), "test.de is empty")


def test_missing_file(tmp_path, small_config, write_parallel_dir, fails):
    data = write_parallel_dir(tmp_path / "d")
    (data / "test.en").unlink()
    fails(small_config(tmp_path / "c", corpus=str(data), src="de", tgt="en"), "missing file", "test.en")


def test_missing_directory(tmp_path, small_config, fails):
    fails(small_config(tmp_path / "c", corpus=str(tmp_path / "nowhere"), src="de", tgt="en"), "no such directory")


def test_invalid_utf8_names_file_and_line(tmp_path, small_config, write_parallel_dir, fails):
    data = write_parallel_dir(tmp_path / "d")
    lines = (data / "train.en").read_bytes().split(b"\n")
    lines[41] = "caf\u00e9".encode("latin-1")
    (data / "train.en").write_bytes(b"\n".join(lines))
    fails(small_config(tmp_path / "c", corpus=str(data), src="de", tgt="en"), "train.en line 42", "UTF-8")


def test_vocabulary_too_large_says_which_value_works(tmp_path, small_config, write_parallel_dir, fails):
    data = write_parallel_dir(tmp_path / "d", sizes=(20, 5, 5))
    message = fails(small_config(tmp_path / "c", corpus=str(data), src="de", tgt="en", vocab_size=5000), "5000")
    limit = int(message.split("--data.vocab_size ")[1].split()[0])
    assert 50 < limit < 5000
    prepare(small_config(tmp_path / "c", corpus=str(data), src="de", tgt="en", vocab_size=limit))  # and it works


def test_vocabulary_smaller_than_the_alphabet_says_which_value_works(tmp_path, small_config, fails):
    fails(small_config(tmp_path, vocab_size=20), "data.vocab_size=20 is smaller", "or more")


def test_every_pair_filtered_is_an_error_not_an_empty_epoch(tmp_path, small_config, fails):
    message = fails(small_config(tmp_path, max_len=2), "max_len=2", "--data.truncate true")
    assert "no train pair is left of 600" in message


def test_language_pair_not_in_directory_lists_the_pairs_there(tmp_path, small_config, write_parallel_dir, fails):
    data = write_parallel_dir(tmp_path / "d")
    fails(small_config(tmp_path / "c", corpus=str(data), src="fr", tgt="en"), "no fr-en pair", "pairs there: de-en")


def test_missing_language_flags_are_inferred_or_asked_for(tmp_path, small_config, write_parallel_dir, fails):
    data = write_parallel_dir(tmp_path / "d")
    corpus = prepare(small_config(tmp_path / "c", corpus=str(data), src="de"))
    assert (corpus.src_lang, corpus.tgt_lang) == ("de", "en")
    fails(small_config(tmp_path / "c2", corpus=str(data)), "pass --data.src and --data.tgt")


@pytest.mark.parametrize(
    ("row", "fragment"),
    [("only one column", "found 1 column"), ("a\tb\tc\td", "has 4 tab-separated columns"),
     ("\tempty source", "empty side"),
     ("x\ty\tholdout", "its third, 'holdout', names no split: a tab inside a sentence?")],
)  # fmt: skip
def test_malformed_tsv_row_is_named(tmp_path, row, fragment, small_config, fails):
    good = [f"sentence {i}\tSatz {i}" for i in range(30)]
    path = tmp_path / "pairs.tsv"
    path.write_text("\n".join(good[:7] + [row] + good[7:]) + "\n")
    fails(small_config(tmp_path / "c", corpus=str(path), vocab_size=60), "pairs.tsv row 8", fragment)


def test_tsv_holds_out_disjoint_valid_and_test_by_content(tmp_path):
    rows = [f"source number {i % 150}\ttarget number {i % 150}" for i in range(400)]  # repeated sources
    path = tmp_path / "pairs.tsv"
    path.write_text("\n".join(rows) + "\n")
    splits = TsvSource(path, None, None, tmp_path).read()
    sets = {name: set(pairs.src) for name, pairs in splits.items()}
    assert len(splits["test"].src) >= 20 and len(splits["valid"].src) >= 20
    assert not sets["train"] & sets["valid"] and not sets["train"] & sets["test"] and not sets["valid"] & sets["test"]
    path.write_text("\n".join(reversed(rows)) + "\n")  # row order does not move pairs between splits
    assert {name: set(p.src) for name, p in TsvSource(path, None, None, tmp_path).read().items()} == sets


def test_tsv_with_split_column_is_used_as_given(tmp_path, small_config):
    rows = [f"s{i} words here\tt{i} words there\t{('train', 'valid', 'dev', 'test')[i % 4]}" for i in range(80)]
    (tmp_path / "p.tsv").write_text("\n".join(rows) + "\n")
    corpus = prepare(small_config(tmp_path / "c", corpus=str(tmp_path / "p.tsv"), vocab_size=60))
    assert corpus.manifest["stats"]["splits"]["valid"]["pairs"] == 40 and len(corpus.references("test")) == 20


def test_hub_without_datasets_says_what_to_download_and_where(tmp_path, monkeypatch, small_config, fails):
    import builtins

    real_import = builtins.__import__

    def no_datasets(name, *args, **kwargs):
        if name == "datasets":
            raise ImportError("no datasets here")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_datasets)
    message = fails(
        small_config(tmp_path / "c", corpus="hub:wmt14"), "pip install 'ablate[hub]'", "train.de", "test.en",
        str(tmp_path / "c" / "hub" / "wmt14-de-en"), "--data.corpus DIR --data.src de --data.tgt en",
    )  # fmt: skip
    assert "Traceback" not in message


def test_hub_reads_files_placed_where_the_message_says(tmp_path, small_config, write_parallel_dir):
    write_parallel_dir(tmp_path / "c" / "hub" / "wmt14-de-en")
    corpus = prepare(small_config(tmp_path / "c", corpus="hub:wmt14"))
    assert (corpus.src_lang, corpus.tgt_lang) == ("de", "en")
    assert len(corpus.references("valid")) == 30


def test_bad_config_values_are_config_errors(tmp_path, small_config):
    with pytest.raises(ConfigError, match="tokens_per_batch"):
        small_config(tmp_path, tokens_per_batch=10)
    with pytest.raises(AblateError, match="must end in .tsv"):
        (tmp_path / "pairs.csv").write_text("a,b\n")
        prepare(small_config(tmp_path / "c", corpus=str(tmp_path / "pairs.csv")))
