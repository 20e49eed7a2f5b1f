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

CONTROL = "nvidia-cuda-mps-control"
OFF_SWITCH = "ABLATE_MPS"
"""ABLATE_MPS=0 keeps MPS off (a card in exclusive-process mode for someone else's daemon, or a timing without it)."""


@contextlib.contextmanager
def for_workers(workers: int, gpus: list[str], program: str = CONTROL) -> Iterator[dict[str, str]]:
    """The environment that puts `workers` local workers on an MPS daemon of their own while the block runs ({} when
    they need none or it cannot start; the reason is printed). `program`: the control program (tests give a path)."""
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
    try:
        failed = _control(program, env, "-d")
        if failed:
            print(f"  {workers} workers share the GPU in turns: {failed}", file=sys.stderr)
            yield {}
            return
        print(f"  {workers} workers share {len(gpus)} GPU(s) through CUDA MPS (daemon in {folder})", file=sys.stderr)
        try:
            yield env
        finally:
            failed = _control(program, env, input="quit\n")
            if failed:
                print(
                    f"  the MPS daemon did not stop: {failed}; stop it with: echo quit | "
                    f"CUDA_MPS_PIPE_DIRECTORY={env['CUDA_MPS_PIPE_DIRECTORY']} {program}",
                    file=sys.stderr,
                )
    finally:
        shutil.rmtree(folder, ignore_errors=True)


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


__all__ = ["CONTROL", "OFF_SWITCH", "for_workers"]
