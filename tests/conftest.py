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


def pytest_runtest_logreport(report):
    """With ABLATE_TEST_FAILURES=PATH, each failure's traceback is appended to PATH as it happens, not in the summary
    at the end: a run cut off by a time limit (a lent GPU machine's call) still shows why its tests failed. Only the
    controller writes (pytest-xdist hands it every worker's reports)."""
    path = os.environ.get("ABLATE_TEST_FAILURES")
    if path and report.failed and "PYTEST_XDIST_WORKER" not in os.environ:
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(f"==== {report.nodeid} ({report.when})\n{report.longreprtext}\n\n")


@pytest.fixture(autouse=True, scope="session")
def _cache_dir(tmp_path_factory):
    """Tokenizers and encoded corpora of the tests go to one temp dir (warm across tests, never the user's cache)."""
    if "ABLATE_CACHE" not in os.environ:
        os.environ["ABLATE_CACHE"] = str(tmp_path_factory.mktemp("ablate-cache"))
    yield
