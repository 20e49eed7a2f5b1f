"""prepare(): cache reuse (never retrains), atomic writes, filtering vs truncation, references in index order."""

from __future__ import annotations

import os
import time

import pytest
from ablate.data import prepare as prepare_module
from ablate.data import tokenizer
from ablate.data.prepare import prepare
from ablate.data.tokenizer import BOS_ID, EOS_ID, PAD_ID, Tokenizer


def test_second_prepare_reuses_tokenizer_and_encoded_cache(tmp_path, small_config):
    cfg = small_config(tmp_path)
    cold = prepare(cfg)
    model = os.stat(cold.tokenizer.path)
    calls = tokenizer.TRAIN_CALLS
    started = time.perf_counter()
    warm = prepare(cfg)
    assert time.perf_counter() - started < 1.0
    assert (cold.cached, warm.cached) == (False, True)
    assert tokenizer.TRAIN_CALLS == calls
    after = os.stat(warm.tokenizer.path)
    assert (after.st_ino, after.st_mtime_ns) == (model.st_ino, model.st_mtime_ns)
    assert warm.cache_key == cold.cache_key and warm.directory == cold.directory


def test_settings_that_do_not_change_the_tokenizer_do_not_retrain_it(tmp_path, small_config):
    first = prepare(small_config(tmp_path))
    calls = tokenizer.TRAIN_CALLS
    other = prepare(small_config(tmp_path, max_len=30, tokens_per_batch=2048))  # new encoded cache, same tokenizer
    assert tokenizer.TRAIN_CALLS == calls
    assert other.tokenizer.path == first.tokenizer.path and other.cache_key != first.cache_key
    prepare(small_config(tmp_path, vocab_size=300))
    assert tokenizer.TRAIN_CALLS == calls + 1


def test_interrupted_prepare_leaves_nothing_trusted_and_next_run_rebuilds(tmp_path, monkeypatch, small_config):
    cfg = small_config(tmp_path)
    real = prepare_module._encode_split

    def interrupted(tok, pairs, split, *args):
        if split == "valid":
            raise KeyboardInterrupt  # Ctrl-C after the training split was written
        return real(tok, pairs, split, *args)

    monkeypatch.setattr(prepare_module, "_encode_split", interrupted)
    with pytest.raises(KeyboardInterrupt):
        prepare(cfg)
    assert list((tmp_path / "encoded").iterdir()) == []
    monkeypatch.setattr(prepare_module, "_encode_split", real)
    corpus = prepare(cfg)
    assert not corpus.cached and len(corpus.split("valid")) == 40


def test_killed_prepare_leftovers_are_not_trusted(tmp_path, cache_entries, small_config):
    cfg = small_config(tmp_path)
    corpus = prepare(cfg)
    # A hard kill (no cleanup) leaves a temporary directory and could leave an entry without its manifest.
    (corpus.directory.parent / f"{corpus.directory.name}.tmp-123-abcd").mkdir()
    (corpus.directory / "manifest.json").unlink()
    (corpus.directory / "train.src.npy").write_bytes(b"half a file")
    calls = tokenizer.TRAIN_CALLS
    rebuilt = prepare(cfg)
    assert not rebuilt.cached and tokenizer.TRAIN_CALLS == calls  # the tokenizer itself was complete
    assert len(rebuilt.split("train")) == 600
    # A half-written tokenizer never has the final name: write_atomic moves a complete file into place.
    os.unlink(corpus.tokenizer.path)
    again = prepare(cfg)
    assert not again.cached and tokenizer.TRAIN_CALLS == calls + 1 and len(cache_entries(tmp_path)) == 2


def test_filtering_and_truncation_are_counted(tmp_path, small_config):
    long_cfg = {"max_len": 12}
    filtered = prepare(small_config(tmp_path, **long_cfg)).manifest["stats"]["splits"]["train"]
    truncated = prepare(small_config(tmp_path, truncate=True, **long_cfg)).manifest["stats"]["splits"]["train"]
    assert filtered["filtered_long"] > 0 and filtered["truncated"] == 0
    assert truncated["truncated"] == filtered["filtered_long"] and truncated["filtered_long"] == 0
    assert filtered["pairs"] + filtered["filtered_long"] == truncated["pairs"] == 600
    assert filtered["src_len"]["max"] <= 12 and truncated["tgt_len"]["max"] <= 12


def test_references_follow_the_encoded_order_after_filtering(tmp_path, small_config):
    corpus = prepare(small_config(tmp_path, max_len=14))
    valid = corpus.split("valid")
    refs, srcs = corpus.references("valid"), corpus.sources("valid")
    assert len(refs) == len(srcs) == len(valid) < 40
    for i in range(len(valid)):
        x, y = valid.pair(i)
        assert corpus.tokenizer.decode([y.tolist()])[0] == refs[i]
        assert corpus.tokenizer.decode([x.tolist()])[0] == srcs[i]
    with pytest.raises(ValueError):
        corpus.references("train")


def test_directory_corpus_prepares_and_counts_empty_lines(tmp_path, small_config, write_parallel_dir):
    data = write_parallel_dir(tmp_path / "d")
    lines = (data / "train.de").read_text().splitlines()
    lines[3] = ""
    (data / "train.de").write_text("\n".join(lines) + "\n")
    corpus = prepare(small_config(tmp_path / "c", corpus=str(data), src="de", tgt="en"))
    train = corpus.manifest["stats"]["splits"]["train"]
    assert train["pairs"] == 299 and train["filtered_empty"] == 1


def test_tokenizer_contract(small_corpus):
    tok = Tokenizer.load(small_corpus.tokenizer.path)
    assert (PAD_ID, tok._sp.unk_id(), BOS_ID, EOS_ID) == (tok._sp.pad_id(), 1, tok._sp.bos_id(), tok._sp.eos_id())
    text = small_corpus.references("test")[0]
    ids = tok.encode([text])[0]
    assert BOS_ID not in ids and EOS_ID not in ids
    assert tok.decode([[BOS_ID, *ids, EOS_ID, PAD_ID, *ids, PAD_ID]]) == [text]
    assert tok.decode([[PAD_ID, BOS_ID, *ids, PAD_ID]]) == [text]
    assert tok.vocab_size == small_corpus.vocab_size == 400


def test_padding_statistics_bucketed_beats_random(small_corpus):
    padding = small_corpus.padding(1024)
    assert padding["bucketed"]["overhead"] < 0.1 < padding["random"]["overhead"]
