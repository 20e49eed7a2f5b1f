"""`make test` runs pytest-xdist with one worker per core: each worker pins itself to its own cores on import of
tests/conftest.py, so two workers' torch threads never share a core; and tests of one `xdist_group` (`--dist
loadgroup`) run on one worker: the SLURM tests one at a time, a module's sweep fixture built once."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

CONFTEST = Path(__file__).resolve().parent / "conftest.py"
# The probe first widens its cores to the machine's: under `make test` this test's own worker is pinned already.
PROBE = f"""
import json, os, runpy
os.sched_setaffinity(0, range(os.cpu_count()))
machine = sorted(os.sched_getaffinity(0))
runpy.run_path({str(CONFTEST)!r})
import torch
print(json.dumps({{"machine": machine, "cores": sorted(os.sched_getaffinity(0)), "threads": torch.get_num_threads(),
                  "omp": os.environ.get("OMP_NUM_THREADS")}}))
"""


def _probe(worker: str | None, count: int) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_XDIST_", "OMP_NUM_THREADS"))}
    if worker:
        env.update(PYTEST_XDIST_WORKER=worker, PYTEST_XDIST_WORKER_COUNT=str(count))
    done = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, check=True)
    return json.loads(done.stdout.splitlines()[-1])


@pytest.mark.slow
@pytest.mark.skipif(not hasattr(os, "sched_setaffinity") or (os.cpu_count() or 1) < 2, reason="needs 2 cores")
def test_two_workers_take_disjoint_cores_and_size_torch_and_their_children_to_them():
    first, second = _probe("gw0", 2), _probe("gw1", 2)
    assert set(first["cores"]).isdisjoint(second["cores"])
    assert sorted(first["cores"] + second["cores"]) == first["machine"]  # every core used, none twice
    for probe in (first, second):
        assert probe["threads"] == len(probe["cores"]) and probe["omp"] == str(len(probe["cores"]))


def test_outside_xdist_nothing_is_pinned():
    probe = _probe(None, 1)
    assert probe["cores"] == probe["machine"]


GROUPED = """
import os, time
import pytest

pytestmark = pytest.mark.xdist_group("one")


@pytest.mark.parametrize("i", range(4))
def test_grouped(i):
    time.sleep(0.2)  # both workers are up and idle while these are handed out
    with open(os.environ["WORKERS_FILE"], "a") as fh:
        fh.write("grouped " + os.environ["PYTEST_XDIST_WORKER"] + "\\n")
"""
SHARED = """
import os, time
import pytest


def write(what):
    with open(os.environ["WORKERS_FILE"], "a") as fh:
        fh.write(what + " " + os.environ["PYTEST_XDIST_WORKER"] + "\\n")


@pytest.fixture(scope="module")
def shared():
    write("built")


@pytest.mark.parametrize("i", range(4))
def test_shared(shared, i):
    time.sleep(0.2)
    write("shared")
"""


def test_tests_of_one_xdist_group_or_module_fixture_run_on_one_worker(tmp_path):
    """pytest 9.2 keeps node ids where pytest-xdist 3.8 no longer writes a group's suffix (pytest-xdist#1386): there
    `--dist loadgroup` quietly hands a group's tests to every worker, as plain `--dist load`; pyproject.toml pins
    pytest below 9.2, and this fails if that pin goes before xdist is fixed. The tests sharing a module-scoped fixture
    join a group of their own (tests/conftest.py, loaded here beside the probe's tests): it is built once."""
    (tmp_path / "pytest.ini").write_text("[pytest]\n", encoding="utf-8")
    ours = f"runpy.run_path({str(CONFTEST)!r})"  # its hooks and fixtures, not its __file__
    (tmp_path / "conftest.py").write_text(
        f"import runpy\nglobals().update((k, v) for k, v in {ours}.items() if k[0] != '_')\n"
    )
    (tmp_path / "test_grouped.py").write_text(GROUPED, encoding="utf-8")
    (tmp_path / "test_shared.py").write_text(SHARED, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    env["WORKERS_FILE"] = str(tmp_path / "workers.txt")
    pytest_command = [sys.executable, "-m", "pytest", "-n", "2", "--dist", "loadgroup", "-p", "no:cacheprovider", "-q"]
    done = subprocess.run([*pytest_command, str(tmp_path)], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:]
    lines = [line.split() for line in (tmp_path / "workers.txt").read_text(encoding="utf-8").splitlines()]
    by_kind = {kind: [worker for k, worker in lines if k == kind] for kind in ("grouped", "shared", "built")}
    assert len(by_kind["grouped"]) == 4 and len(set(by_kind["grouped"])) == 1, lines
    assert len(by_kind["shared"]) == 4 and len(set(by_kind["shared"])) == 1, lines
    assert len(by_kind["built"]) == 1, lines
