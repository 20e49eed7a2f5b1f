"""A stop that always stops, and a hang that names itself.

A stop is asked for by SIGTERM, Ctrl-C, SLURM's warning signal or a sweep's coordinator (`interrupt.request`), and
is read at the end of a training step or a decoding batch. A process that never gets there (a compile waiting on a
dead compile worker, a CUDA graph recording, one long decode) would never stop. So every request also arms a bound
(`arm`, `hardware.stop_within_s`, 30 s by default): a process still alive at the bound writes every thread's stack
(`faulthandler`) to its log, says in one line what it was doing, what was saved and how to resume, kills its
children (compile and data-loader workers, a sweep's workers) and exits with `EXPIRED` (124, as `timeout` does).

A hang nobody asked to stop is found by `watching`: while a run trains, validates or decodes it calls `beat`; a
watchdog thread that sees no beat for `hardware.stall_s` seconds writes the stacks and raises `Stalled` in the main
thread (a real signal, so a wait on a lock or a future returns), which fails the run with one line; in a sweep the
trial is recorded as failed with that reason and the sweep goes on. A main thread that cannot take the exception
(inside one long C call) is ended `stop_within_s` later as at a stop's bound: its trial is then retried from its
checkpoint by the sweep's liveness check.

`doing` names what the process is doing, for both lines. Both are on only in a whole `ablate` process (`enable`,
from `interrupt.install`): a command called in-process, from a script or a test, keeps its caller's signals and is
never ended by them. Nothing here imports torch or Lightning.
"""

from __future__ import annotations

import faulthandler
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

STOP_WITHIN_S = 30.0
"""The default bound between a stop request and the process's end (`hardware.stop_within_s`)."""
STALL_S = 1800.0
"""The default time without progress after which a run is failed as hung (`hardware.stall_s`): longer than the
slowest cold compile measured (the paper base, 288 s on one CPU core) and any one batch's decoding."""
EXPIRED = 124
"""The exit code of a process ended at its bound."""
STALL_SIGNAL = signal.SIGALRM  # nothing else in ablate, torch or Lightning uses it


class Stalled(RuntimeError):
    """No step, validation or decoding progress for `stall_s` seconds: the run is failed with this one line."""


class _State:
    def __init__(self) -> None:
        self.bound_s = STOP_WITHIN_S
        self.stall_s = STALL_S
        self.doing = "starting"
        self.hint = ""  # what to change where the phase hangs (e.g. "set --train.compile false")
        self.saved = ""  # what is safe on disk, in the words of whoever saved it
        self.resume = ""  # the command that resumes
        self.stacks: Path | None = None  # where stacks go; None: standard error (a worker's or a trial's log)
        self.armed: threading.Timer | None = None
        self.beat = time.monotonic()
        self.watching = 0
        self.enabled = False


_state = _State()
_lock = threading.Lock()


def enable() -> None:
    """This process is a whole `ablate` command: a stop request arms the bound, and runs are watched."""
    _state.enabled = True


def is_armed() -> bool:
    """Whether a stop was asked for and the bound runs."""
    return _state.armed is not None


def configure(*, bound_s: float | None = None, stall_s: float | None = None, stacks: Path | None = None) -> None:
    """Set the process's bound, its stall limit (0: no watchdog) and, where standard error is a terminal, the file
    the stacks go to (a run's folder)."""
    if bound_s is not None:
        _state.bound_s = float(bound_s)
    if stall_s is not None:
        _state.stall_s = float(stall_s)
    if stacks is not None:
        _state.stacks = stacks


def resume_with(command: str) -> None:
    """The command that resumes this process's work, for the line said at the bound."""
    _state.resume = command


def saved(what: str) -> None:
    """What is safe on disk now (a checkpoint at a step), for the line said at the bound."""
    _state.saved = what


def doing(what: str, hint: str = "") -> None:
    """Name what the process does from now on (and counts as progress); `hint`: what to change if it hangs there."""
    _state.doing, _state.hint = what, hint
    beat()


def now_doing() -> str:
    return _state.doing


def beat() -> None:
    """Progress: a step, a validation or decoding batch ended."""
    _state.beat = time.monotonic()


# ---------------------------------------------------------------------------------------------------------- the bound
def arm(why: str) -> None:
    """A stop was asked for (`why`): from now the process has `bound_s` seconds. Once: a second request keeps the
    first bound. Safe in a signal handler (it starts a thread and writes nothing)."""
    with _lock:
        if not _state.enabled or _state.armed is not None or _state.bound_s <= 0:
            return
        timer = threading.Timer(_state.bound_s, _expire, args=(why, time.monotonic()))
        timer.daemon = True
        _state.armed = timer
    timer.start()


def disarm() -> None:
    """The stop was handled and the process goes on (a test, a command called from a script)."""
    with _lock:
        timer, _state.armed = _state.armed, None
    if timer is not None:
        timer.cancel()


def _expire(why: str, since: float) -> None:
    where = _dump_stacks()
    line = (
        f"\nablate: still {_state.doing} {time.monotonic() - since:.0f} s after {why} "
        f"(the bound, hardware.stop_within_s, is {_state.bound_s:g} s): every thread's stack is in {where}; "
        f"{_state.saved or 'finished results are kept'}"
        f"{f'; resume with: {_state.resume}' if _state.resume else ''}\n"
    )
    _say(line)
    kill_children()
    os._exit(EXPIRED)


def _dump_stacks() -> str:
    """Every thread's stack, to the stacks file where one is set and standard error is a terminal, else to
    standard error (a worker's log, a trial's log). Returns where they went."""
    target = _state.stacks if _state.stacks is not None and _isatty(2) else None
    if target is not None:
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            with open(target, "a", encoding="utf-8") as f:
                f.write(f"--- {time.strftime('%Y-%m-%d %H:%M:%S')}, while {_state.doing}\n")
                f.flush()
                faulthandler.dump_traceback(file=f, all_threads=True)
            return str(target)
        except OSError:
            pass
    _say(f"\n--- every thread's stack, while {_state.doing}:\n")
    faulthandler.dump_traceback(file=sys.__stderr__ or 2, all_threads=True)
    return "the log above" if not _isatty(2) else "the terminal above"


def _isatty(fd: int) -> bool:
    try:
        return os.isatty(fd)
    except OSError:
        return False


def _say(text: str) -> None:
    try:
        os.write(2, text.encode("utf-8", "replace"))
    except OSError:
        pass


def descendants(pid: int | None = None) -> list[int]:
    """Every process below `pid` (this one by default), children first, from /proc (Linux; elsewhere none:
    psutil would read them on every system, but it is one more compiled dependency for one function)."""
    pid = os.getpid() if pid is None else pid
    children: dict[int, list[int]] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return []
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                stat = f.read().decode("utf-8", "replace")
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])  # the name in parentheses may hold spaces
        children.setdefault(ppid, []).append(int(entry))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def kill_children(sig: int = signal.SIGKILL) -> int:
    """Signal every descendant (compile workers, data-loader workers, a sweep's workers and theirs). Returns how
    many were signalled."""
    count = 0
    for pid in descendants():
        try:
            os.kill(pid, sig)
            count += 1
        except OSError:
            pass
    return count


# ------------------------------------------------------------------------------------------------------- the watchdog
@contextmanager
def watching(what: str = "training") -> Iterator[None]:
    """While inside, a watchdog fails the run when no `beat` comes for `stall_s` seconds (0: no watchdog). Main
    thread only (the exception is raised there); nested uses share one watchdog."""
    if not _state.enabled or _state.stall_s <= 0 or threading.current_thread() is not threading.main_thread():
        yield
        return
    doing(what)
    _state.watching += 1
    if _state.watching > 1:
        try:
            yield
        finally:
            _state.watching -= 1
        return
    fired: list[str] = []
    previous = signal.signal(STALL_SIGNAL, lambda *_: _raise_stalled(fired))
    stop = threading.Event()
    dog = threading.Thread(target=_watch, args=(stop, fired, threading.main_thread().ident), daemon=True)
    dog.start()
    try:
        yield
    finally:
        stop.set()
        _state.watching -= 1
        signal.signal(STALL_SIGNAL, previous)


def _raise_stalled(fired: list[str]) -> None:
    if fired:
        raise Stalled(fired[0])


def _watch(stop: threading.Event, fired: list[str], main: int | None) -> None:
    while not stop.wait(min(5.0, max(_state.stall_s / 10, 0.05))):
        idle = time.monotonic() - _state.beat
        if idle < _state.stall_s or fired:
            continue
        where = _dump_stacks()
        fix = f"; {_state.hint}" if _state.hint else ""
        fired.append(
            f"hung: no progress for {idle:.0f} s while {_state.doing} (hardware.stall_s {_state.stall_s:g}); "
            f"every thread's stack is in {where}{fix}"
        )
        if main is not None:
            signal.pthread_kill(main, STALL_SIGNAL)  # a real signal: a wait on a lock or a future returns for it
        # A main thread inside one long C call takes no exception: it is ended as at a stop's bound.
        if not stop.wait(max(_state.bound_s, 1.0)):
            _say(f"\nablate: {fired[0]}; the process did not take the failure in {_state.bound_s:g} s: ending it\n")
            kill_children()
            os._exit(EXPIRED)
        return


__all__ = [
    "EXPIRED",
    "STALL_S",
    "STOP_WITHIN_S",
    "Stalled",
    "arm",
    "beat",
    "configure",
    "descendants",
    "disarm",
    "doing",
    "enable",
    "is_armed",
    "kill_children",
    "now_doing",
    "resume_with",
    "saved",
    "watching",
]
