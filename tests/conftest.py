"""Shared test settings: GPU tests skip without CUDA; W&B never asks for a login; caches live in a temp dir."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("WANDB_SILENT", "true")
os.environ.setdefault("WANDB_MODE", "offline")


def pytest_collection_modifyitems(config, items):
    import torch

    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(autouse=True, scope="session")
def _cache_dir(tmp_path_factory):
    """Tokenizers and encoded corpora of the tests go to one temp dir (warm across tests, never the user's cache)."""
    if "ABLATE_CACHE" not in os.environ:
        os.environ["ABLATE_CACHE"] = str(tmp_path_factory.mktemp("ablate-cache"))
    yield
