"""A stop always stops (`ablations/runtime/stopping.py`): real `ablate train` and `ablate sweep` processes with a
hang planted where a stop request is never read (a training step, a compile waiting on a dead worker, a decode),
SIGTERM'd. Each must be gone within its bound with every thread's stack in its log, one line naming what it was
doing, what was saved and how to resume, nothing half-written, and a resume that works. Under the watchdog a hung
trial fails with one line and the sweep goes on. The hangs are planted by `hangs/sitecustomize.py`."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
HANGS = Path(__file__).resolve().parent / "hangs"
STUDY = "sweep_interrupt.yaml"  # rows long and wide: 400 steps, a validation (and last.ckpt) every 40
BOUND_S = 5


def _env(sweeps, hang: str = "", only_in: str = "") -> dict[str, str]:
    env = {**sweeps.env, "PYTHONPATH": os.pathsep.join(filter(None, [str(HANGS), sweeps.env.get("PYTHONPATH")]))}
    if hang:
        env["ABLATE_PLANT_HANG"] = hang
    if only_in:
        env["ABLATE_PLANT_HANG_IN"] = only_in
    return env


def _train_cmd(sweeps, out: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "ablate.ablations.cli", "train", "--study", str(sweeps.study(STUDY)), "--row", "long",
            "--preset", "smoke", "--out", str(out), "--hardware.stop_within_s", str(BOUND_S), *args]  # fmt: skip


@contextmanager
def _running(cmd: list[str], env: dict[str, str], log: Path) -> Iterator[subprocess.Popen]:
    """`cmd` in a session of its own, its output into `log`; killed with everything it started if still alive."""
    with open(log, "wb") as fh:
        proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=fh, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        yield proc
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)


def _wait_for_text(path: Path, text: str, proc: subprocess.Popen, timeout: float) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if path.exists() and text in path.read_text(encoding="utf-8", errors="replace"):
            return
        if proc.poll() is not None:
            break
        time.sleep(0.1)
    raise AssertionError(f"{text!r} never appeared in {path}:\n" + (path.read_text()[-3000:] if path.exists() else ""))


def _stop_and_time(proc: subprocess.Popen, sig: int = signal.SIGTERM) -> float:
    start = time.monotonic()
    os.kill(proc.pid, sig)
    proc.wait(timeout=BOUND_S + 60)
    return time.monotonic() - start


def _half_written(out: Path) -> list[Path]:
    return [p for p in out.rglob("*") if p.is_file() and (".tmp" in p.name or p.name.startswith(".tmp"))]


def _bound_line(log: str) -> str:
    (line,) = [line for line in log.splitlines() if line.startswith("ablate: still ")]
    return line


@pytest.mark.slow
@pytest.mark.parametrize(
    ("hang", "args", "doing", "saved"),
    [
        ("step:50", (), "training step 50", "step 40 saved in"),
        ("compile", ("--train.compile", "true"), "compiling the model", "finished results are kept"),
        ("decode:2", (), "validating at step 40", "finished results are kept"),
    ],
    ids=["step", "compile", "decode"],
)
def test_sigterm_during_a_hang_ends_the_run_within_its_bound_with_its_stacks_and_a_resume_line_that_works(
    sweeps, tmp_path, hang, args, doing, saved
):
    out, log = tmp_path / "run", tmp_path / "train.log"
    with _running(_train_cmd(sweeps, out, *args), _env(sweeps, hang), log) as proc:
        _wait_for_text(log, "planted hang", proc, timeout=240)
        took = _stop_and_time(proc)
    text = log.read_text(encoding="utf-8", errors="replace")

    assert proc.returncode == 124, text[-3000:]
    assert BOUND_S - 1 < took < BOUND_S + 10, (took, text[-3000:])
    line = _bound_line(text)
    assert f"still {doing}" in line and "after SIGTERM" in line and saved in line, line
    resume = line.partition("resume with: ")[2]
    assert resume.startswith("ablate train") and resume.endswith("--resume"), line
    # Every thread's stack, the hung frame among them, before the line (stderr is this log, not a terminal).
    assert "Current thread" in text and "sitecustomize.py" in text, text[-3000:]
    assert not _half_written(out)
    if hang == "compile":
        assert "set --train.compile false" not in line  # a stop, not a failure: the hint is the watchdog's

    # The resume line, as printed, ends the run (without the hang, and without compiling: a CPU's 30 s).
    argv = [sys.executable, "-m", "ablate.ablations.cli", *resume.split()[1:]]
    argv += ["--train.compile", "false"] if hang == "compile" else []
    done = subprocess.run(argv, cwd=REPO, env=_env(sweeps), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    if hang == "step":
        assert "resuming at step 40" in done.stderr, done.stderr[-3000:]
    assert (out / "result.json").is_file()


@pytest.mark.slow
def test_sigterm_to_a_sweep_whose_workers_hang_ends_it_and_them_within_the_bounds_and_the_rerun_finishes_once(
    sweeps, tmp_path
):
    out, log = tmp_path / "out", tmp_path / "sweep.log"
    cmd = sweeps.command(STUDY, out, "--workers", "2", "--hardware.stop_within_s", str(BOUND_S))
    logs = [out / "logs" / f"worker-{i}.log" for i in range(2)]
    with _running(cmd, _env(sweeps, "step:3"), log) as proc:
        for worker_log in logs:
            _wait_for_text(worker_log, "planted hang", proc, timeout=240)
        took = _stop_and_time(proc)
    text = log.read_text(encoding="utf-8", errors="replace")

    assert proc.returncode == 130, text[-3000:]
    assert took < BOUND_S + 15, (took, text[-3000:])  # the workers' bound; the coordinator's is 15 s more
    assert "interrupted:" in text and "Resume with: ablate sweep" in text, text[-3000:]
    assert "Traceback" not in text, text[-3000:]
    for worker_log in logs:
        said = worker_log.read_text(encoding="utf-8", errors="replace")
        assert "still training step 3" in _bound_line(said) and "Current thread" in said, said[-3000:]
    assert not _alive(out), "a worker outlived its sweep"

    rerun = subprocess.run(sweeps.command(STUDY, out, "--workers", "2"), cwd=REPO, env=_env(sweeps),
                           capture_output=True, text=True, timeout=600)  # fmt: skip
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    records = sweeps.records(out)
    assert {k: r["state"] for k, r in records.items()} == {"long__seed0": "complete", "wide__seed0": "complete"}


@pytest.mark.slow
def test_under_the_watchdog_a_hung_trial_fails_with_one_line_and_the_sweep_goes_on(sweeps, tmp_path):
    out = tmp_path / "out"
    done = subprocess.run(sweeps.command(STUDY, out, "--hardware.stall_s", "6"), cwd=REPO,
                          env=_env(sweeps, "step:3", only_in="long__"), capture_output=True, text=True,
                          timeout=600)  # fmt: skip
    records = sweeps.records(out)
    assert records["wide__seed0"]["state"] == "complete", done.stderr[-3000:]
    hung = records["long__seed0"]
    assert hung["state"] == "failed", hung
    reason = hung["reason"]
    assert re.search(r"hung: no progress for \d+ s while training step 3 \(hardware.stall_s 6\)", reason), reason
    assert "\n" not in reason
    assert "Current thread" in done.stderr or "Current thread" in _worker_logs(out), done.stderr[-3000:]


def _worker_logs(out: Path) -> str:
    return "".join(p.read_text(errors="replace") for p in sorted((out / "logs").glob("*.log")))


def _alive(out: Path) -> list[int]:
    pids = []
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            argv = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if str(out).encode() in argv:
            pids.append(int(proc.name))
    return pids


@pytest.mark.slow
def test_two_ctrl_cs_during_corpus_preparation_end_in_the_clean_line_and_no_traceback(sweeps, tmp_path):
    """Two Ctrl-C's 0.3 s apart while `ablate train` prepares its corpus once ended in a KeyboardInterrupt traceback
    from torch's atexit hook, after the clean line. The second now stops the process at once, whatever runs."""
    env = {**_env(sweeps), "ABLATE_CACHE": str(tmp_path / "cold-cache")}  # a corpus to prepare, not a warm one
    log = tmp_path / "train.log"
    with _running(_train_cmd(sweeps, tmp_path / "run"), env, log) as proc:
        _wait_for_text(log, "ablate data:", proc, timeout=120)
        os.kill(proc.pid, signal.SIGINT)
        time.sleep(0.3)
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGINT)
        proc.wait(timeout=BOUND_S + 30)
    text = log.read_text(encoding="utf-8", errors="replace")
    # 130, or killed by the second SIGINT itself once Python's shutdown has put back the default handler (a shell
    # shows both as 130)
    assert proc.returncode in (130, -signal.SIGINT), text[-3000:]
    assert "Traceback" not in text and "KeyboardInterrupt" not in text, text[-3000:]
    assert "ablate train: interrupted:" in text or "stopping at once" in text, text[-3000:]
