"""`ablate sweep` with faults and with several workers: a worker SIGKILLed mid-trial, then a rerun, finishes every
row exactly once (the killed trial resumes from its checkpoint); workers started together on one storage (a
journal file, or PostgreSQL shared by two "machines") split the rows and never run one twice; a DDP trial over two
CPU processes records one result; one worker on a terminal shows the live table, and Ctrl-C typed there saves it.

Every sweep here is a real process on a real storage; nothing of Optuna, W&B or Lightning is mocked. The terminal
is a real pseudo-terminal, the sweep's controlling terminal, so a typed Ctrl-C reaches it as it would a user's.
"""

from __future__ import annotations

import fcntl
import os
import pty
import re
import socket
import struct
import subprocess
import termios
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[3]

KILL_STUDY, KILL_NAME, LONG_STEPS = "sweep_kill.yaml", "sweep-kill-smoke", 60
SPLIT_STUDY, SPLIT_NAME = "sweep_split.yaml", "sweep-split-smoke"
SPLIT_KEYS = {f"{row}__seed{seed}" for row in ("s1", "s2") for seed in (0, 1)}


def key(trial) -> str:
    return f"{trial.user_attrs['row']}__seed{trial.user_attrs['seed']}"


def by_key(trials) -> dict[str, list[Any]]:
    out: dict[str, list[Any]] = {}
    for t in trials:
        out.setdefault(key(t), []).append(t)
    return out


def wait_all(procs, timeout: float) -> list[int]:
    deadline = time.monotonic() + timeout
    return [p.wait(timeout=max(1.0, deadline - time.monotonic())) for p in procs]


def tail(path: Path, n: int = 3000) -> str:
    return path.read_text(encoding="utf-8", errors="replace")[-n:] if path.exists() else f"({path} missing)"


def checkpoint_step(path: Path) -> int:
    import torch

    return int(torch.load(path, map_location="cpu", weights_only=False)["global_step"])


def assert_each_key_ran_once(sweeps, trials, keys: set[str], outs: list[Path]) -> dict[str, Any]:
    """One COMPLETE trial per key, any other trial a duplicate closed without training, every OUT holding every
    record, and each key trained in exactly one trial directory (one result, one W&B run). Returns the COMPLETE
    trial of each key."""
    from optuna.trial import TrialState

    assert {key(t) for t in trials} == keys
    complete = {}
    for k, ts in by_key(trials).items():
        done = [t for t in ts if t.state == TrialState.COMPLETE]
        assert len(done) == 1, (k, [(t.number, t.state) for t in ts])
        complete[k] = done[0]
        for t in ts:
            if t is done[0]:
                continue
            # A key enqueued twice by coordinators racing: closed as a duplicate, never trained.
            assert t.state == TrialState.PRUNED, (k, t.number, t.state)
            assert t.user_attrs["reason"].startswith("duplicate"), t.user_attrs["reason"]
            assert "progress" not in t.user_attrs and "record" not in t.user_attrs
    for out in outs:
        records = sweeps.records(out)
        assert set(records) == keys, out
        for k, record in records.items():
            assert record["state"] == "complete"
            assert record["optuna"]["trial_number"] == complete[k].number
    trained = [out / "trials" / k for out in outs for k in keys if (out / "trials" / k).exists()]
    assert sorted(p.name for p in trained) == sorted(keys)  # each key trained in one place only
    for trial_dir in trained:
        assert (trial_dir / "result.json").is_file()
        assert len(sweeps.wandb_runs(trial_dir)) == 1, trial_dir
    return complete


# ------------------------------------------------------------------------------------------------- SIGKILL, rerun
@pytest.mark.slow
def test_a_worker_killed_mid_trial_then_a_rerun_finishes_every_row_exactly_once(sweeps, tmp_path):
    from optuna.trial import TrialState

    out, log = tmp_path / "out", tmp_path / "killed.log"
    long_dir = out / "trials" / "long__seed0"
    ckpt = long_dir / "checkpoints" / "last.ckpt"
    # Row 'short' finishes first (a sweep of it alone: the whole study queues its longest row first); then the
    # whole study, whose row 'long' (60 steps) checkpoints every 10 steps: kill once it has one.
    first = sweeps.run(KILL_STUDY, out, "--rows", "short")
    assert first.returncode == 0, first.stderr[-3000:]
    proc = sweeps.start(KILL_STUDY, out, log=log)
    try:
        sweeps.wait_for(lambda: ckpt.exists() or proc.poll() is not None, timeout=240)
    finally:
        sweeps.kill(proc)
    assert ckpt.exists(), tail(log)
    assert not (out / "records" / "long__seed0.json").exists(), "the trial finished before the kill"
    killed_at = checkpoint_step(ckpt)
    assert 0 < killed_at < LONG_STEPS
    wandb_id = (long_dir / "wandb_id").read_text(encoding="utf-8").strip()
    short_record = out / "records" / "short__seed0.json"
    short_mtime = short_record.stat().st_mtime_ns
    (dead,) = [t for t in sweeps.trials(out, KILL_NAME) if t.state == TrialState.RUNNING]
    assert key(dead) == "long__seed0" and dead.user_attrs["pid"] == proc.pid  # as the dead worker left it

    rerun = sweeps.run(KILL_STUDY, out)

    assert rerun.returncode == 0, rerun.stderr[-3000:]
    trials = sweeps.trials(out, KILL_NAME)
    complete = {key(t): t for t in trials if t.state == TrialState.COMPLETE}
    assert sorted(complete) == ["long__seed0", "short__seed0"]
    assert len(by_key(trials)["short__seed0"]) == 1  # finished before the kill: not run again
    assert short_record.stat().st_mtime_ns == short_mtime
    # The killed trial is failed as a dead worker's, and exactly one retry of it ran.
    killed, retry = by_key(trials)["long__seed0"]
    assert killed.number == dead.number and killed.state == TrialState.FAIL
    assert killed.user_attrs["reason"].startswith("worker died"), killed.user_attrs["reason"]
    assert retry.state == TrialState.COMPLETE and retry.user_attrs["retry_of"] == killed.number
    # The retry resumed from the checkpoint (the record says where), and its record holds the whole curve.
    records = sweeps.records(out)
    assert set(records) == {"short__seed0", "long__seed0"}
    record = records["long__seed0"]
    assert record["state"] == "complete" and record["optuna"]["trial_number"] == retry.number
    assert record["metrics"]["steps"] == LONG_STEPS
    assert record["metrics"]["resumed_at_steps"] == [killed_at], record["metrics"]
    assert record["curves"]["train"][0]["step"] == 2, record["curves"]["train"][:3]
    assert [p["step"] for p in record["curves"]["val"]] == list(range(10, LONG_STEPS + 1, 10))
    assert record["wandb"]["run_id"] == wandb_id  # the same W&B run continues


# ----------------------------------------------------------------------------------------- workers on one storage
@pytest.mark.slow
def test_two_workers_started_together_on_one_journal_split_the_rows(sweeps, tmp_path):
    out = tmp_path / "out"
    procs = [sweeps.start(SPLIT_STUDY, out, log=tmp_path / f"coordinator-{i}.log") for i in range(2)]
    codes = wait_all(procs, timeout=300)
    assert codes == [0, 0], [tail(tmp_path / f"coordinator-{i}.log") for i in range(2)]

    complete = assert_each_key_ran_once(sweeps, sweeps.trials(out, SPLIT_NAME), SPLIT_KEYS, [out])
    assert {t.user_attrs["pid"] for t in complete.values()} == {p.pid for p in procs}  # both did work
    assert {t.user_attrs["host"] for t in complete.values()} == {socket.gethostname()}


@pytest.mark.slow
def test_workers_option_splits_the_rows_and_closes_duplicates_without_training(sweeps, tmp_path):
    """`--workers 2` on a queue that holds every key twice, as two coordinators that enqueued at the same moment
    leave it: each key runs once, each second copy is closed as a duplicate without training."""
    import optuna

    out = tmp_path / "out"
    out.mkdir()
    storage = sweeps.storage(f"journal:{out / 'optuna.journal'}")
    study = optuna.create_study(study_name=SPLIT_NAME, storage=storage, direction="maximize")
    for _ in range(2):
        for row, group in (("s1", "A"), ("s2", "B")):
            for seed in (0, 1):
                study.enqueue_trial({}, user_attrs={"row": row, "seed": seed, "group": group})

    result = sweeps.run(SPLIT_STUDY, out, "--workers", "2")

    assert result.returncode == 0, result.stderr[-3000:]
    assert "(0 newly queued)" in result.stderr
    trials = sweeps.trials(out, SPLIT_NAME)
    complete = assert_each_key_ran_once(sweeps, trials, SPLIT_KEYS, [out])
    assert sorted(t.number for t in complete.values()) == [0, 1, 2, 3]  # the first copy of each key is the run
    assert sum(t.state == optuna.trial.TrialState.PRUNED for t in trials) == 4
    assert len({t.user_attrs["pid"] for t in complete.values()}) == 2  # both --worker processes ran trials
    assert sorted(p.name for p in (out / "logs").glob("worker-*.log")) == ["worker-0.log", "worker-1.log"]


@pytest.mark.slow
@pytest.mark.postgres
def test_two_machines_share_one_postgresql_study(sweeps, tmp_path, postgres_url):
    """Two coordinators with their own output directories (two machines) and one PostgreSQL storage."""
    import optuna

    sweeps.storage(postgres_url)  # Optuna's tables exist before both start: see the test below for a fresh database
    name = f"sweep-split-{uuid.uuid4().hex[:10]}"
    outs = [tmp_path / f"machine-{i}" for i in range(2)]
    logs = [tmp_path / f"machine-{i}.log" for i in range(2)]
    procs = [
        sweeps.start(SPLIT_STUDY, out, "--storage", postgres_url, "--name", name, log=log)
        for out, log in zip(outs, logs, strict=True)
    ]
    try:
        codes = wait_all(procs, timeout=300)
        assert codes == [0, 0], [tail(log) for log in logs]
        trials = sweeps.trials(None, name, storage_url=postgres_url)
        complete = assert_each_key_ran_once(sweeps, trials, SPLIT_KEYS, outs)
        assert {t.user_attrs["pid"] for t in complete.values()} == {p.pid for p in procs}  # both did work
        # Each machine trained some keys and wrote the others' records (and hypotheses) from the storage.
        trained = [{p.name for p in (out / "trials").iterdir()} for out in outs]
        assert trained[0] and trained[1] and not trained[0] & trained[1]
        for out, mine in zip(outs, trained, strict=True):
            for k in SPLIT_KEYS - mine:
                assert (out / sweeps.records(out)[k]["hypotheses"]).is_file()
    finally:
        sweeps.kill_all()
        optuna.delete_study(study_name=name, storage=sweeps.storage(postgres_url))


@pytest.mark.postgres
def test_two_workers_opening_a_fresh_postgresql_database_together_both_get_it(postgres_url):
    """What `.ci/run` gives the test above: a database without Optuna's tables, opened by two workers at once. Each
    round uses a fresh schema (search_path), so the tables are created anew."""
    import sqlalchemy as sa
    from ablate.ablations.results.storage.opening import open_storage

    engine = sa.create_engine(postgres_url)
    errors: list[str] = []
    for _ in range(3):
        schema = f"ablate_test_{uuid.uuid4().hex[:10]}"
        with engine.begin() as conn:
            conn.execute(sa.text(f"CREATE SCHEMA {schema}"))
        url = f"{postgres_url}{'&' if '?' in postgres_url else '?'}options=-csearch_path%3D{schema}"
        barrier = threading.Barrier(2)

        def open_it(url=url, barrier=barrier) -> None:
            barrier.wait()
            try:
                open_storage(url).engine.dispose()
            except Exception as err:  # noqa: BLE001 - collected and asserted below
                errors.append(str(err))

        threads = [threading.Thread(target=open_it) for _ in range(2)]
        try:
            for t in threads:
                t.start()
            for t in threads:
                t.join(timeout=60)
        finally:
            with engine.begin() as conn:
                conn.execute(sa.text(f"DROP SCHEMA {schema} CASCADE"))
    engine.dispose()
    assert errors == []


# ------------------------------------------------------------------------------------------------------------ DDP
@pytest.mark.slow
def test_a_ddp_trial_on_two_cpu_processes_records_one_result(sweeps, tmp_path):
    from optuna.trial import TrialState

    out = tmp_path / "out"
    ddp = ["--hardware.devices", "2", "--hardware.strategy", "ddp_spawn", "--hardware.accelerator", "cpu"]
    result = sweeps.run("sweep_ddp.yaml", out, *ddp)

    assert result.returncode == 0, result.stderr[-3000:]
    trials = sweeps.trials(out, "sweep-ddp-smoke")
    assert len(trials) == 1
    records = sweeps.records(out)
    assert list(records) == ["d1__seed0"]
    record = records["d1__seed0"]
    assert record["state"] == "complete", record["reason"]
    assert trials[0].state == TrialState.COMPLETE
    assert record["metrics"]["device"].endswith("x2")  # both ranks trained
    assert len(sweeps.wandb_runs(out / "trials" / "d1__seed0")) == 1  # rank 0 alone logs to W&B


# ---------------------------------------------------------------------------------------------- one worker, a terminal
@dataclass
class Terminal:
    """A command whose stdin, stdout and stderr are a pseudo-terminal (140 columns) that is its controlling
    terminal: what it shows is `text()`, and `type()` writes keys to it (Ctrl-C is b"\x03")."""

    proc: subprocess.Popen
    master: int
    shown: bytearray = field(default_factory=bytearray)
    reader: threading.Thread | None = None

    @classmethod
    def start(cls, cmd: list[str], env: dict[str, str], cwd: Path) -> Terminal:
        master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 140, 0, 0))

        def own_terminal() -> None:  # in the child, after setsid: the pty becomes its controlling terminal
            fcntl.ioctl(0, termios.TIOCSCTTY, 0)

        env = {**env, "TERM": "xterm-256color", "COLUMNS": "140"}
        proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdin=slave, stdout=slave, stderr=slave,
                                start_new_session=True, preexec_fn=own_terminal)  # fmt: skip
        os.close(slave)
        term = cls(proc, master)
        term.reader = threading.Thread(target=term._read, daemon=True)
        term.reader.start()
        return term

    def _read(self) -> None:
        while True:
            try:
                data = os.read(self.master, 65536)
            except OSError:  # EIO: every process holding the terminal has gone
                return
            if not data:
                return
            self.shown.extend(data)

    def text(self) -> str:
        return bytes(self.shown).decode("utf-8", "replace")

    def type(self, keys: bytes) -> None:
        os.write(self.master, keys)

    def wait(self, timeout: float) -> int:
        code = self.proc.wait(timeout=timeout)
        if self.reader is not None:
            self.reader.join(timeout=5)  # until the terminal is closed (EIO), with what is left to read
        os.close(self.master)
        return code


def _plain(text: str) -> str:
    """Terminal output without its escape sequences."""
    return re.sub(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07", "", text)


@pytest.mark.slow
def test_one_worker_on_a_terminal_shows_the_live_table_not_the_trials_lines(sweeps, tmp_path):
    """The default (one worker) on a terminal: the same live table as several workers (trials in a worker process
    whose lines go to its log), refreshed while trials run; then the final table. No `srun` hint from Lightning."""
    out = tmp_path / "out"
    term = Terminal.start(sweeps.command("sweep_rows.yaml", out, "--workers", "1"), sweeps.env, REPO)
    sweeps.started.append(term.proc)  # killed with its process group if the test fails
    try:
        code = term.wait(timeout=300)
    finally:
        sweeps.kill_all()
    shown = _plain(term.text())

    assert code == 0, shown[-3000:]
    assert "Traceback" not in shown and "srun" not in shown, shown[-3000:]
    frames = shown.count("sweep-rows (smoke):")
    assert frames >= 3, shown[-3000:]  # refreshed: several frames, then the final table
    assert re.search(r"│ ok1 +│ +0 │ running +│", shown), shown[-3000:]  # a trial seen running
    assert "left" in shown  # the time-left column while trials are left
    assert re.search(r"│ nan +│ +0 │ failed", shown), shown[-3000:]
    assert "sweep-rows (smoke): 2/3 done, 0 running, 0 pending, 1 failed" in shown, shown[-3000:]
    # The trials' own progress lines went to the worker's log, not over the table.
    log = (out / "logs" / "worker-0.log").read_text(encoding="utf-8")
    assert re.search(r"\[ok1\S*\] step 10/10 loss", log), log[-3000:]
    assert "srun" not in log, log[-3000:]
    assert not re.search(r"step \d+/\d+ loss", shown), shown[-3000:]
    assert set(sweeps.records(out)) == {"ok1__seed0", "nan__seed0", "ok2__seed0"}


@pytest.mark.slow
def test_ctrl_c_typed_at_a_one_worker_sweeps_terminal_saves_the_trial_and_prints_the_resume_line(sweeps, tmp_path):
    from optuna.trial import TrialState

    out, study = tmp_path / "out", "sweep_interrupt.yaml"
    ckpt = out / "trials" / "long__seed0" / "checkpoints" / "last.ckpt"
    term = Terminal.start(sweeps.command(study, out, "--workers", "1"), sweeps.env, REPO)
    sweeps.started.append(term.proc)
    try:
        assert sweeps.wait_for(lambda: ckpt.exists() or term.proc.poll() is not None, 240), term.text()[-3000:]
        term.type(b"\x03")  # Ctrl-C, as typed: SIGINT to the terminal's foreground process group
        code = term.wait(timeout=120)
    finally:
        sweeps.kill_all()
    shown = _plain(term.text())

    assert code == 130, shown[-3000:]
    assert "Traceback" not in shown, shown[-3000:]
    (line,) = [line for line in shown.splitlines() if line.startswith("ablate sweep: interrupted:")]
    assert "0 of 2 trials finished" in line and "1 unfinished trial(s) resume from their checkpoints" in line, line
    assert f"Resume with: ablate sweep {sweeps.study(study)}" in line, line
    stopped_at = checkpoint_step(ckpt)
    assert 0 < stopped_at < 400
    (stopped,) = [t for t in sweeps.trials(out, "sweep-interrupt-smoke") if t.state == TrialState.FAIL]
    assert stopped.user_attrs["reason"].startswith("interrupted (Ctrl-C)"), stopped.user_attrs["reason"]

    rerun = sweeps.run(study, out)

    assert rerun.returncode == 0, rerun.stderr[-3000:]
    assert sweeps.records(out)["long__seed0"]["metrics"]["resumed_at_steps"] == [stopped_at]
