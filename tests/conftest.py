"""Shared test settings: GPU tests skip without CUDA; W&B never asks for a login; caches live in a temp dir. And the
gettext catalogues tests build with msgfmt (`write_mo`, `catalogue_root`), which data and sweep tests both use."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

os.environ.setdefault("WANDB_SILENT", "true")
os.environ.setdefault("WANDB_MODE", "offline")


def _own_cores() -> None:
    """Under pytest-xdist (`make test` runs `-n auto`: one worker per core), each worker keeps its own share of the
    cores, inherited by every process its tests start. Without it each worker's torch takes a thread per core of the
    machine, and on 2 cores two processes of two threads each train 20-50x slower than one (threads oversubscribed,
    measured on this project's machine). Pinned before torch is imported, torch's thread pool is the share's size;
    OMP_NUM_THREADS says the same to the processes the tests start (tests/test_own_cores.py)."""
    worker, count = os.environ.get("PYTEST_XDIST_WORKER"), int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    if not worker or count < 2 or not hasattr(os, "sched_setaffinity"):
        return
    cores, i = sorted(os.sched_getaffinity(0)), int(worker.removeprefix("gw"))
    share = cores[i * len(cores) // count : (i + 1) * len(cores) // count] or [cores[i % len(cores)]]
    os.sched_setaffinity(0, share)
    os.environ["OMP_NUM_THREADS"] = str(len(share))
    if "torch" in sys.modules:  # a plugin imported it first: its pool was sized for the whole machine
        sys.modules["torch"].set_num_threads(len(share))


_own_cores()


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist's own hook, which reads the xdist_group marks
def pytest_collection_modifyitems(config, items):
    """GPU tests skip without CUDA. Under pytest-xdist, a module's tests that share a module-scoped fixture run on one
    worker (`_one_worker_per_module_fixture`), and slow tests come first: xdist hands tests out in this order, so the
    long ones start while every worker is busy and the short ones fill the end. The sort is stable, and a run in one
    process keeps the file order (a module's tests stay together, so its module-scoped fixtures are built once)."""
    import torch

    if os.environ.get("PYTEST_XDIST_WORKER"):
        _one_worker_per_module_fixture(items)
        items.sort(key=lambda item: "slow" not in item.keywords)
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


def _one_worker_per_module_fixture(items) -> None:
    """A module-scoped fixture is built once on each worker that runs a test using it (six of them run a sweep): each
    such test joins an xdist_group named after its file, which `--dist loadgroup` sends to one worker. A test already
    in a group keeps it (the SLURM tests run one at a time)."""
    for item in items:
        info = getattr(item, "_fixtureinfo", None)  # pytest's resolved fixtures of a test function
        if info is None or item.get_closest_marker("xdist_group"):
            continue
        if any(d.scope == "module" for defs in info.name2fixturedefs.values() for d in defs):
            item.add_marker(pytest.mark.xdist_group(item.nodeid.split("::")[0]))


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


HEADER = 'msgid ""\nmsgstr ""\n"Content-Type: text/plain; charset={charset}\\n"\n"Last-Translator: {who}\\n"\n'


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def write_mo(path: Path, entries: list, charset: str = "UTF-8", who: str = "Jörg") -> Path:
    """Compile a .mo with msgfmt. An entry is (msgid, msgstr), (ctx, msgid, msgstr) or (msgid, plural, [forms])."""
    if shutil.which("msgfmt") is None:
        pytest.skip("needs msgfmt (the gettext package)")
    po = [HEADER.format(charset=charset, who=who)]
    for entry in entries:
        if len(entry) == 3 and isinstance(entry[2], list):
            forms = "".join(f"msgstr[{i}] {_quote(form)}\n" for i, form in enumerate(entry[2]))
            po.append(f"msgid {_quote(entry[0])}\nmsgid_plural {_quote(entry[1])}\n{forms}")
        elif len(entry) == 3:
            po.append(f"msgctxt {_quote(entry[0])}\nmsgid {_quote(entry[1])}\nmsgstr {_quote(entry[2])}\n")
        else:
            po.append(f"msgid {_quote(entry[0])}\nmsgstr {_quote(entry[1])}\n")
    path.parent.mkdir(parents=True, exist_ok=True)
    source = path.with_suffix(".po")
    source.write_bytes("\n".join(po).encode(charset))
    subprocess.run(["msgfmt", "--no-hash", "-o", str(path), str(source)], check=True)
    source.unlink()
    return path


def catalogue_root(root: Path, *, seed: int, pairs: int = 3200, lang: str = "xx") -> Path:
    """A locale root whose ROOT/LANG/LC_MESSAGES/app.mo holds `pairs` sentence pairs of the built-in generator (at
    least the 3000 a gettext corpus needs): another seed is another machine's catalogues. Returns the root."""
    from ablate.data import corpus

    generated = corpus.generate(seed, {"train": pairs, "valid": 0, "test": 0})["train"]
    write_mo(root / lang / "LC_MESSAGES" / "app.mo", list(zip(*generated, strict=True)))
    return root


@pytest.fixture(name="write_mo", scope="session")
def _write_mo_fixture():
    return write_mo


@pytest.fixture(name="catalogue_root", scope="session")
def _catalogue_root_fixture():
    return catalogue_root
