"""Shared fixtures for the data tests: small real corpora in temporary directories, real SentencePiece.

Helpers are handed out as fixtures (not imported), so the tests work under any pytest import mode.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from ablate.data import corpus
from ablate.data.config import DataConfig

SMALL = {"builtin_train": 600, "builtin_valid": 40, "builtin_test": 40}
"""A built-in corpus small enough to prepare in well under a second."""


def small_config(cache_dir: Path, **overrides) -> DataConfig:
    settings = {"vocab_size": 400, "tokens_per_batch": 1024, "max_len": 120, "cache_dir": str(cache_dir), **SMALL}
    return DataConfig(**{**settings, **overrides})


def write_parallel_dir(directory: Path, src: str = "de", tgt: str = "en", sizes=(300, 30, 30), seed: int = 5) -> Path:
    """train/valid/test.{src,tgt} files made from the built-in generator (real text, real line alignment)."""
    directory.mkdir(parents=True, exist_ok=True)
    splits = corpus.generate(seed, dict(zip(("train", "valid", "test"), sizes, strict=True)))
    for split, (src_lines, tgt_lines) in splits.items():
        (directory / f"{split}.{src}").write_text("\n".join(src_lines) + "\n", encoding="utf-8")
        (directory / f"{split}.{tgt}").write_text("\n".join(tgt_lines) + "\n", encoding="utf-8")
    return directory


def cache_entries(cache_dir: Path) -> list[Path]:
    """Everything a later run could trust: tokenizer models and encoded directories (not digests or leftovers)."""
    found = list((cache_dir / "spm").glob("*.model")) + list((cache_dir / "encoded").glob("*"))
    return [path for path in found if ".tmp-" not in path.name]


@pytest.fixture(name="small_config", scope="session")
def _small_config_fixture():
    return small_config


@pytest.fixture(name="write_parallel_dir", scope="session")
def _write_parallel_dir_fixture():
    return write_parallel_dir


@pytest.fixture(name="cache_entries", scope="session")
def _cache_entries_fixture():
    return cache_entries


@pytest.fixture(scope="session")
def small_sizes() -> dict[str, int]:
    return dict(SMALL)


@pytest.fixture(scope="session")
def shared_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("ablate-cache")


@pytest.fixture(scope="session")
def small_corpus(shared_cache: Path):
    from ablate.data.prepare import prepare

    return prepare(small_config(shared_cache))
