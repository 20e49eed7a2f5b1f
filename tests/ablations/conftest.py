"""Shared helpers for the sweep tests: real `ablate sweep` processes on tiny studies, and what they leave behind
(the Optuna storage, the local records, the trial directories).

Helpers are handed out as fixtures, not imported: pytest runs with --import-mode=importlib, so a test module cannot
import a sibling module.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
STUDIES = Path(__file__).resolve().parent / "studies"
PRESET = "smoke"  # every test study names it; the Optuna study is then called <study name>-smoke
SWEEP_TIMEOUT_S = 300


@dataclass
class Sweeps:
    """Runs `python -m ablations.cli sweep STUDY --out OUT --no_report ...` as a real process and reads back the
    storage and the files it writes. Every sweep runs with W&B offline and one shared, warm data cache."""

    env: dict[str, str]
    started: list[subprocess.Popen] = field(default_factory=list)

    def study(self, name: str) -> Path:
        return STUDIES / name

    def command(self, study: str | Path, out: Path, *args: str) -> list[str]:
        cli = [sys.executable, "-m", "ablate.ablations.cli", "sweep"]
        # One worker unless a test asks for more (the default, one per core, would vary with the machine).
        workers = () if any(a == "--workers" or a.startswith("--workers=") for a in args) else ("--workers", "1")
        return [*cli, str(self.study(study)), "--out", str(out), "--no_report", *workers, *args]

    def run(self, study: str | Path, out: Path, *args: str, timeout: float = SWEEP_TIMEOUT_S):
        """Run a sweep to its end; returns the CompletedProcess (stdout and stderr as text)."""
        return subprocess.run(
            self.command(study, out, *args),
            cwd=REPO,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )

    def start(self, study: str | Path, out: Path, *args: str, log: Path) -> subprocess.Popen:
        """Start a sweep in its own process group (so a test can SIGKILL it with everything it started); its
        stdout and stderr go to `log`."""
        log.parent.mkdir(parents=True, exist_ok=True)
        with open(log, "wb") as fh:
            proc = subprocess.Popen(
                self.command(study, out, *args),
                cwd=REPO,
                env=self.env,
                stdout=fh,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.started.append(proc)
        return proc

    def kill(self, proc: subprocess.Popen) -> None:
        """SIGKILL a started sweep and its whole process group (workers, W&B service), then reap it."""
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait(timeout=30)

    def kill_all(self) -> None:
        for proc in self.started:
            if proc.poll() is None:
                self.kill(proc)

    # --------------------------------------------------------------------------------------- what a sweep left
    @staticmethod
    def storage(url: str):
        """An Optuna storage opened directly with Optuna (not through the code under test)."""
        import optuna

        if url.startswith("journal:"):
            from optuna.storages.journal import JournalFileBackend, JournalFileOpenLock

            path = url[len("journal:") :]
            return optuna.storages.JournalStorage(JournalFileBackend(path, lock_obj=JournalFileOpenLock(path)))
        return optuna.storages.RDBStorage(url)

    def trials(self, out: Path | None, name: str, storage_url: str | None = None) -> list[Any]:
        """Every trial of the Optuna study `name`, from OUT's journal file or from `storage_url`."""
        import optuna

        optuna.logging.set_verbosity(optuna.logging.WARNING)
        url = storage_url or f"journal:{out / 'optuna.journal'}"
        return optuna.load_study(study_name=name, storage=self.storage(url)).get_trials(deepcopy=True)

    @staticmethod
    def records(out: Path) -> dict[str, dict[str, Any]]:
        """OUT/records/<row>__seed<seed>.json, by key."""
        return {p.stem: json.loads(p.read_text(encoding="utf-8")) for p in sorted((out / "records").glob("*.json"))}

    @staticmethod
    def wandb_runs(trial_dir: Path) -> list[Path]:
        """The offline W&B run directories of one trial."""
        return sorted((trial_dir / "wandb").glob("offline-run-*"))

    @staticmethod
    def wait_for(condition, timeout: float, poll: float = 0.05) -> bool:
        """Poll `condition` until it holds or `timeout` seconds pass; its last value."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if condition():
                return True
            time.sleep(poll)
        return condition()

    @staticmethod
    def snapshot(root: Path) -> dict[str, int]:
        """Every file under root with its mtime in ns: what a run that does nothing must leave untouched."""
        return {str(p.relative_to(root)): p.stat().st_mtime_ns for p in sorted(root.rglob("*")) if p.is_file()}


def _warm_cache(cache: Path) -> None:
    """Prepare the tiny built-in corpus every test study uses, once: sweeps started together then only read it."""
    from ablate.ablations.study.definition import load_study
    from ablate.data.prepare import prepare

    study = load_study(STUDIES / "sweep_rows.yaml")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ABLATE_CACHE", str(cache))
        prepare(study.run_config(study.rows[0], PRESET).data)


@pytest.fixture(scope="session")
def sweeps(tmp_path_factory) -> Sweeps:
    cache = tmp_path_factory.mktemp("ablate-cache")
    _warm_cache(cache)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("WANDB_", "ABLATE_")) and k != "LOCAL_RANK"}
    env.update(
        ABLATE_CACHE=str(cache),
        WANDB_MODE="offline",
        WANDB_SILENT="true",
        PYTHONUNBUFFERED="1",
        # Tiny models on a shared 2-core machine: one thread per process keeps concurrent workers from thrashing.
        OMP_NUM_THREADS="1",
        # These tests time signals and kills against training steps, which assumes CPU speed: on a GPU a smoke trial
        # ends before a Ctrl-C lands (seen on an H200). The GPU path has its own tests (`-m gpu`).
        CUDA_VISIBLE_DEVICES="",
    )
    helper = Sweeps(env=env)
    yield helper
    helper.kill_all()


@pytest.fixture(scope="session")
def finished_sweep(sweeps, tmp_path_factory) -> Path:
    """The OUT of one finished sweep of sweep_rows.yaml, shared: tests that change it take `finished_copy`."""
    out = tmp_path_factory.mktemp("finished") / "out"
    done = sweeps.run("sweep_rows.yaml", out)
    assert done.returncode == 0, done.stderr[-3000:]
    return out


@pytest.fixture
def finished_copy(finished_sweep, tmp_path, monkeypatch) -> Path:
    """A copy of `finished_sweep` without its trial directories (a trial trained again would recreate one), its
    study.json pointing at the copy's journal, ABLATE_STORAGE unset."""
    from ablate.ablations.runtime.urls import ENV_VAR

    monkeypatch.delenv(ENV_VAR, raising=False)
    out = tmp_path / "out"
    shutil.copytree(finished_sweep, out, ignore=shutil.ignore_patterns("trials"))
    spec = json.loads((out / "study.json").read_text(encoding="utf-8"))
    (out / "study.json").write_text(json.dumps({**spec, "storage": f"journal:{out / 'optuna.journal'}"}))
    return out


@pytest.fixture
def postgres_url() -> str:
    """The PostgreSQL server of the multi-machine tests (.ci/run starts one and sets ABLATE_TEST_POSTGRES_URL)."""
    url = os.environ.get("ABLATE_TEST_POSTGRES_URL")
    if not url:
        pytest.skip("ABLATE_TEST_POSTGRES_URL is not set (.ci/run starts PostgreSQL and sets it)")
    return url
