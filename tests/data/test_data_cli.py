"""`ablate data prepare`, called through ablations.commands.data.main."""

from __future__ import annotations

import json

import pytest
from ablate.ablations.commands.data import main
from ablate.data.errors import AblateError


@pytest.fixture()
def flags(small_sizes):
    """`prepare` arguments for the small built-in corpus in the given cache directory."""

    def build(cache, *extra: str) -> list[str]:
        sizes = [f"--data.{name}={value}" for name, value in small_sizes.items()]
        return [
            "prepare",
            "--data.cache_dir",
            str(cache),
            "--data.vocab_size",
            "400",
            "--data.tokens_per_batch",
            "1024",
            *sizes,
            *extra,
        ]

    return build


def test_prepare_json_prints_the_statistics(tmp_path, capsys, flags):
    assert main(flags(tmp_path, "--json")) == 0
    stats = json.loads(capsys.readouterr().out)
    assert stats["vocab_size"] == 400 and stats["warm"] is False
    assert {name: s["pairs"] for name, s in stats["splits"].items()} == {"train": 600, "valid": 40, "test": 40}
    assert {"p50", "p90", "p99", "max"} <= set(stats["splits"]["train"]["src_len"])
    assert stats["padding"]["bucketed"]["overhead"] < stats["padding"]["random"]["overhead"]
    assert main(flags(tmp_path, "--json")) == 0
    assert json.loads(capsys.readouterr().out)["warm"] is True


def test_prepare_text_on_a_directory(tmp_path, capsys, write_parallel_dir, flags):
    data = write_parallel_dir(tmp_path / "d")
    corpus = ["--data.corpus", str(data), "--data.src", "de", "--data.tgt", "en"]
    assert main(flags(tmp_path / "c", *corpus, "--data.truncate", "true")) == 0
    captured = capsys.readouterr()
    assert "de -> en" in captured.out and "length-bucketed (ours)" in captured.out and "random batching" in captured.out
    assert "encoding splits" in captured.err  # progress goes to stderr


def test_bad_input_raises_ablate_error(tmp_path, flags):
    with pytest.raises(AblateError, match="no such directory"):
        main(flags(tmp_path, "--data.corpus", str(tmp_path / "missing"), "--data.src", "de", "--data.tgt", "en"))
    with pytest.raises(AblateError, match="max_len"):
        main(flags(tmp_path, "--data.max_len", "1000"))


def test_dispatcher_turns_bad_input_into_one_line_and_exit_2(tmp_path, capsys, flags):
    cli = pytest.importorskip("ablate.ablations.cli")
    data = tmp_path / "d"
    data.mkdir()
    (data / "train.de").write_text("ein Satz\nzwei Sätze\n")
    (data / "train.en").write_text("one sentence\n")
    corpus = ["--data.corpus", str(data), "--data.src", "de", "--data.tgt", "en"]
    assert cli.main(["data", *flags(tmp_path / "c", *corpus)]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and err.startswith("ablate data: error: missing file") and "Traceback" not in err
