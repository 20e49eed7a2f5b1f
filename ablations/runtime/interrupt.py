"""Ctrl-C and a full disk: a long sweep stops with one line that says what was saved and what to do next.

Ctrl-C. Lightning turns a KeyboardInterrupt inside `fit` into `sys.exit(1)` after its own teardown: no checkpoint
of the running step and no word to the user. So while a run trains (`graceful`), SIGINT only raises a flag; the
training callback `checkpoints.ResumeState` sees it at the end of the step, saves the run's last checkpoint and
raises `Interrupted`. That is a BaseException, like KeyboardInterrupt, so it passes the sweep's `except Exception`
(the trial is not recorded as failed) up to the command line, which prints the resume line and exits 130. A second
Ctrl-C stops at once (the last periodic checkpoint is then where the run resumes). Outside training, Ctrl-C raises
KeyboardInterrupt as usual.

Every stop request also arms the process's bound (`stopping.arm`): a process that cannot get to the end of its step
(a compile, a CUDA graph recording, a long decode) is ended `hardware.stop_within_s` later with its stacks in its
log. `install` sets the handlers of a whole `ablate` process: SIGTERM asks a run that trains to stop as Ctrl-C does,
and stops any other command at once, as Ctrl-C does.

Disk errors. A full disk (ENOSPC, EDQUOT, a file-size limit EFBIG) or an unwritable directory (EACCES, EROFS) is not
a property of the trial: failing the trial and moving to the next would fail every remaining row the same way.
`disk_error` finds such an OSError in an exception's chain (torch.save wraps it in a RuntimeError) and turns it
into an `AblateError` that names the path and what to free; the sweep stops there, exit 2.

No torch or Lightning import here: the command line imports this module to print its messages.
"""

from __future__ import annotations

import errno
import os
import shlex
import shutil
import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from ablate.ablations.runtime import stopping
from ablate.ablations.runtime.urls import redact
from ablate.data.errors import AblateError

_requested = threading.Event()
_why = ["Ctrl-C"]
_graceful = [0]  # how many `graceful` blocks the main thread is inside: a run is training or about to

DISK_FULL = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG}
NOT_WRITABLE = {errno.EACCES, errno.EROFS, errno.EPERM}


class Interrupted(BaseException):
    """Training stopped on Ctrl-C after saving `checkpoint` at `step` (None: no run was training). `saved` says
    what is safe, in the words of the command that knows (a sweep counts its finished trials)."""

    def __init__(self, step: int | None = None, checkpoint: Path | None = None, saved: str | None = None) -> None:
        super().__init__(f"interrupted at step {step}" if step is not None else "interrupted")
        self.step, self.checkpoint, self.saved = step, checkpoint, saved

    def describe(self, command: str, argv: list[str]) -> str:
        """The one line the command line prints: what was saved, and the command that resumes."""
        if self.saved:
            saved = self.saved
        elif self.step is not None:
            saved = f"step {self.step} saved in {self.checkpoint}"
        elif command in ("train", "sweep", "tune"):
            saved = "no run was training; finished results are kept"
        else:
            saved = "nothing was left half-written (each file is written whole or not at all)"

        # A worker's line is its sweep's command; a storage password is shown as *** (it is in ABLATE_STORAGE).
        resume = ["ablate", command, *(redact(a) for a in argv if a != "--worker")]
        if command == "train" and "--resume" not in argv:
            resume.append("--resume")
        return f"interrupted: {saved}. Resume with: {shlex.join(resume)}"


def requested() -> bool:
    """Whether Ctrl-C was pressed while a run trained (and the run has not stopped for it yet)."""
    return _requested.is_set()


def request(why: str) -> None:
    """Ask the running training to stop at its next step with a checkpoint, as a first Ctrl-C does, but never
    counting as the second one (SLURM's warning signal may arrive more than once). Safe in a signal handler."""
    if not _requested.is_set():
        _why[0] = why
        _requested.set()
        stopping.arm(why)
        _say(f"\n{why}: saving a checkpoint at the end of the running step, then stopping\n")


def _say(text: str) -> None:
    """Write from a signal handler: os.write, as sys.stderr may be in the middle of a write of its own."""
    try:
        os.write(2, text.encode("utf-8", "replace"))
    except OSError:
        pass


def reason() -> str:
    """What asked the stop: 'Ctrl-C', or the reason given to `request`."""
    return _why[0]


def on_signal(signum: int, why: str) -> None:
    """From now on, signal `signum` asks for a stop like `request` (SIGUSR2: SLURM's warning before preemption or
    the time limit; Python would otherwise die of it). Main thread only."""
    signal.signal(signum, lambda *_: request(why))


@contextmanager
def signal_stops(signum: int, why: str) -> Iterator[None]:
    """While inside: signal `signum` asks for a stop like `request`; the previous handler is back after. A sweep's
    coordinator takes SIGTERM (`timeout`, `kill`, a scheduler) this way, so it stops its workers before it exits:
    Python's default would end it at once, past every `finally`, and leave them training. Main thread only."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signum, lambda *_: request(why))
    try:
        yield
    finally:
        signal.signal(signum, previous)


def _handler(on_second: Callable[[], None] | None):
    def handle(signum, frame) -> None:
        if _requested.is_set():
            _say("\nCtrl-C again: stopping at once; runs resume from their last saved checkpoint\n")
            if on_second is not None:
                on_second()
            stopping.kill_children()  # compile and data-loader workers go with it
            os._exit(130)
        _requested.set()
        stopping.arm("Ctrl-C")
        _say("\nCtrl-C: saving a checkpoint at the end of the running step, then stopping (again: stop at once)\n")

    return handle


@contextmanager
def graceful(on_second: Callable[[], None] | None = None) -> Iterator[None]:
    """While inside: the first SIGINT asks the training to stop at its next step with a checkpoint (`requested`),
    the second calls `on_second` (a sweep passes it on to its workers) and exits at once. Signal handlers can only be
    set from the main thread; elsewhere this does nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, _handler(on_second))
    _graceful[0] += 1
    try:
        yield
    finally:
        _graceful[0] -= 1
        signal.signal(signal.SIGINT, previous)


def install(command: str, argv: list[str]) -> None:
    """The signal handlers of a whole `ablate` process (main thread only), and the resume line its bound says.
    SIGTERM inside `graceful` (a run trains) asks for a stop as Ctrl-C does; elsewhere it stops the command at
    once, as Ctrl-C does (KeyboardInterrupt). Either way the bound is armed: whatever the process is inside, it is
    gone `hardware.stop_within_s` later."""
    if threading.current_thread() is not threading.main_thread():
        return
    stopping.enable()
    stopping.resume_with(Interrupted().describe(command, argv).partition("Resume with: ")[2])

    def on_sigint(signum, frame) -> None:
        if stopping.is_armed():  # a second Ctrl-C, whatever runs (an atexit hook too): at once, without a traceback
            _say("\nCtrl-C again: stopping at once\n")
            stopping.kill_children()
            os._exit(130)
        stopping.arm("Ctrl-C")
        raise KeyboardInterrupt

    def on_sigterm(signum, frame) -> None:
        if _graceful[0]:
            request("SIGTERM (scancel, or the machine shutting down)")
            return
        stopping.arm("SIGTERM")
        raise KeyboardInterrupt

    signal.signal(signal.SIGINT, on_sigint)
    signal.signal(signal.SIGTERM, on_sigterm)


# ---------------------------------------------------------------------------------------------------- disk errors
def disk_error(err: BaseException | None) -> AblateError | None:
    """A one-line AblateError for a full disk or an unwritable path somewhere in `err`'s chain, else None."""
    seen: set[int] = set()
    while err is not None and id(err) not in seen:
        seen.add(id(err))
        if isinstance(err, OSError) and err.errno in DISK_FULL | NOT_WRITABLE:
            return AblateError(_describe(err))
        err = err.__cause__ or err.__context__
    return None


def path_error(err: BaseException) -> AblateError | None:
    """A one-line AblateError where a folder to write into is a file or lies under one (`--out results.txt`,
    `--out results.txt/run`), else None. Only the command line turns it into its message: inside a sweep such an
    error fails its trial, as any other."""
    if isinstance(err, FileExistsError | NotADirectoryError) and err.filename:
        return _in_the_way(err.filename)
    return None


def _in_the_way(folder: str | Path) -> AblateError:
    """Names the file that blocks, where it is one of the folder's parents rather than the folder itself."""
    blocker = next((p for p in (Path(folder), *Path(folder).parents) if p.exists()), None)
    what = f"the file {blocker} is" if blocker is not None and blocker != Path(folder) else "a file is"
    return AblateError(
        f"cannot make the folder {folder}: {what} in its way; choose an output folder that is not a file"
    )


def check_folder(path: Path) -> None:
    """Refuse, before any work, a folder to write into that is a file or lies under one (`path_error`'s message):
    a report found it only when it wrote, after minutes of scoring."""
    for folder in (path, *path.parents):
        if folder.exists():
            if not folder.is_dir():
                raise _in_the_way(path)
            return


def _describe(err: OSError) -> str:
    path = Path(err.filename) if err.filename else None
    where = str(path) if path else "a file"
    if err.errno in NOT_WRITABLE:
        return (
            f"cannot write {where}: {os.strerror(err.errno)}; make its directory writable or choose another "
            "output directory, then rerun the same command (finished rows are kept)"
        )
    if err.errno == errno.EFBIG:
        return (
            f"cannot write {where}: the file-size limit was reached (ulimit -f); raise it, then rerun the same command "
            "(finished rows are kept; the running trial resumes from its last checkpoint)"
        )
    return (
        f"no space left writing {where}{_free(path)}; free space there, then rerun the same command "
        "(finished rows are kept; the running trial resumes from its last checkpoint)"
    )


def _free(path: Path | None) -> str:
    for candidate in (path, *(path.parents if path else ())):
        if candidate is not None and candidate.exists():
            return f" ({shutil.disk_usage(candidate).free / 2**20:,.0f} MiB free on its filesystem)"
    return ""


__all__ = [
    "Interrupted",
    "install",
    "requested",
    "graceful",
    "disk_error",
    "path_error",
    "check_folder",
]
