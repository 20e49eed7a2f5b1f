"""CUDA MPS for local workers that share a card: their kernels run side by side instead of in turns.

Without MPS, the processes on one GPU are time-sliced: each gets the whole card for its slice, and a small trial
(the tiny preset's step is a few hundred short kernels) leaves most of it idle in its own slice as in everyone
else's. The Multi-Process Service (NVIDIA's `nvidia-cuda-mps-control`) funnels every client's work into one context,
so kernels of different trials run at once. Nothing in a trial changes: each worker is still its own process, with
its own seed, record and checkpoint.

`for_workers` starts a control daemon of the sweep's own (its pipe and log folders in a fresh temporary folder, so
it never touches a daemon the machine already runs) when more workers than cards are started, hands the workers the
environment that connects them to it, and stops it when they are done, Ctrl-C included. Where it cannot (no such
program, a daemon that does not start, ABLATE_MPS=0), it says why in one line and the workers share the card in
turns, as they would without it. Where an MPS daemon already serves this machine (CUDA_MPS_PIPE_DIRECTORY is set),
the workers use that one and it is left running.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

from ablate.data.errors import AblateError

CONTROL = "nvidia-cuda-mps-control"
OFF_SWITCH = "ABLATE_MPS"
"""ABLATE_MPS=0 keeps MPS off (a card in exclusive-process mode for someone else's daemon, or a timing without it)."""
WORKER_MARK = "ABLATE_MPS_WORKER"
"""Set for the workers put on a daemon of the sweep's: a worker that then sees no GPU stops (`check_worker`)."""
CLIENT_PROBE = (
    "import sys, torch; sys.exit(0 if torch.cuda.is_available() and torch.cuda.device_count() else "
    "'no GPU through the MPS daemon')"
)
"""A client of the daemon: the server starts only when one connects, and a daemon whose server cannot start (a card
in another compute mode, a driver mismatch) answers `-d` all the same."""


@contextlib.contextmanager
def for_workers(
    workers: int, gpus: list[str], program: str = CONTROL, probe: list[str] | None = None
) -> Iterator[dict[str, str]]:
    """The environment that puts `workers` local workers on an MPS daemon of their own while the block runs ({} when
    they need none or it cannot start; the reason is printed). `program`: the control program (tests give a path);
    `probe`: the command of a client that must reach a GPU through the daemon (default: CUDA from torch). A watcher
    process stops the daemon if this process dies without stopping it (SIGKILL)."""
    if not gpus or workers <= len(gpus):
        yield {}  # every worker has a card to itself
        return
    reason = _unavailable(program)
    if reason:
        print(f"  {workers} workers share {len(gpus)} GPU(s) in turns: {reason}", file=sys.stderr)
        yield {}
        return
    if os.environ.get("CUDA_MPS_PIPE_DIRECTORY"):
        print(f"  {workers} workers share the GPU through the running MPS daemon", file=sys.stderr)
        yield {}
        return
    folder = Path(tempfile.mkdtemp(prefix="ablate-mps-"))
    env = {"CUDA_MPS_PIPE_DIRECTORY": str(folder / "pipe"), "CUDA_MPS_LOG_DIRECTORY": str(folder / "log")}
    watcher = None
    try:
        failed = _control(program, env, "-d")
        if failed:
            print(f"  {workers} workers share the GPU in turns: {failed}", file=sys.stderr)
            yield {}
            return
        watcher = _watch(program, env, folder)
        failed = _client(probe or [sys.executable, "-c", CLIENT_PROBE], env)
        if failed:
            print(f"  {workers} workers share the GPU in turns: the MPS server did not serve a client: {failed}",
                  file=sys.stderr)  # fmt: skip
            _control(program, env, input="quit\n")
            yield {}
            return
        print(f"  {workers} workers share {len(gpus)} GPU(s) through CUDA MPS (daemon in {folder})", file=sys.stderr)
        try:
            yield {**env, WORKER_MARK: "1"}
        finally:
            failed = _control(program, env, input="quit\n")
            if failed:
                print(
                    f"  the MPS daemon did not stop: {failed}; stop it with: echo quit | "
                    f"CUDA_MPS_PIPE_DIRECTORY={env['CUDA_MPS_PIPE_DIRECTORY']} {program}",
                    file=sys.stderr,
                )
    finally:
        if watcher is not None:
            watcher.kill()
            watcher.wait()
        shutil.rmtree(folder, ignore_errors=True)


WATCHER = """
import os, shutil, subprocess, sys, time
owner, program, folder = int(sys.argv[1]), sys.argv[2], sys.argv[3]
while True:
    try:
        os.kill(owner, 0)
    except ProcessLookupError:
        break
    time.sleep(0.5)
env = {**os.environ, "CUDA_MPS_PIPE_DIRECTORY": folder + "/pipe", "CUDA_MPS_LOG_DIRECTORY": folder + "/log"}
subprocess.run([program], input="quit\\n", env=env, text=True, capture_output=True, timeout=30)
shutil.rmtree(folder, ignore_errors=True)
"""


def _watch(program: str, env: dict[str, str], folder: Path) -> subprocess.Popen:
    """A process of its own session that stops the daemon and removes its folder once this process is gone: a
    coordinator killed outright (SIGKILL, an out-of-memory kill) leaves no daemon on the card. Written out here, not
    as a module: it must not import what the coordinator imported."""
    return subprocess.Popen(
        [sys.executable, "-c", WATCHER, str(os.getpid()), program, str(folder)],
        env={**os.environ, **env},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )


def _client(command: list[str], env: dict[str, str]) -> str:
    """Run a client of the daemon; '' when it reached a GPU, else why not, in one line."""
    try:
        done = subprocess.run(command, env={**os.environ, **env}, capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as err:
        return str(err)
    said = (done.stderr or done.stdout).strip().splitlines()
    return "" if done.returncode == 0 else (said[-1] if said else f"exit {done.returncode}")


def check_worker() -> None:
    """In a worker the sweep put on its MPS daemon (WORKER_MARK): stop with one line if this process sees no GPU,
    rather than train on the CPU without a word."""
    if not os.environ.get(WORKER_MARK):
        return
    import torch  # lazy: torch costs ~1 s; --help must not pay it

    if not torch.cuda.is_available():
        raise AblateError(
            f"this worker was put on the sweep's CUDA MPS daemon (CUDA_MPS_PIPE_DIRECTORY="
            f"{os.environ.get('CUDA_MPS_PIPE_DIRECTORY')}) but sees no GPU through it: rerun with {OFF_SWITCH}=0 "
            "(the workers then share the card in turns)"
        )


def _unavailable(program: str) -> str:
    """Why MPS cannot be used here, or ''."""
    if os.environ.get(OFF_SWITCH, "1").strip() in ("0", "false", "off", "no"):
        return f"MPS is off ({OFF_SWITCH}={os.environ[OFF_SWITCH]})"
    if shutil.which(program) is None:
        return f"CUDA MPS is not installed ({program} is not on PATH; it comes with the NVIDIA driver's utilities)"
    return ""


def _control(program: str, env: dict[str, str], *args: str, input: str | None = None) -> str:
    """Run the control program with the daemon's environment; '' on success, else why not, in one line."""
    for folder in env.values():
        Path(folder).mkdir(parents=True, exist_ok=True)
    try:
        done = subprocess.run(
            [program, *args], env={**os.environ, **env}, input=input, capture_output=True, text=True, timeout=30
        )
    except (OSError, subprocess.TimeoutExpired) as err:
        return f"{program} {' '.join(args)} failed: {err}"
    if done.returncode != 0:
        said = (done.stderr or done.stdout).strip().splitlines()
        return f"{program} {' '.join(args)} exited {done.returncode}" + (f": {said[-1]}" if said else "")
    return ""


__all__ = ["CLIENT_PROBE", "CONTROL", "OFF_SWITCH", "WORKER_MARK", "check_worker", "for_workers"]
