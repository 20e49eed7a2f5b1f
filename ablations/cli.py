"""The `ablate` command line: a thin dispatcher. Each command lives in ablations/commands/<name>.py (those that read
finished results, `report`, `compare` and `replay`, in reports/commands/<name>.py: nothing in ablations imports
reports) and imports torch, Lightning and W&B only when it runs, so `ablate --help` stays fast."""

from __future__ import annotations

import importlib
import io
import os
import sys
import time

# A string registry, and it stays one: this file is the top of the layers (the entry point `ablate`), where every
# room may be reached, and a name is imported only when its command runs, so `ablate --help` imports no command.
# Only here may a string name a later layer (tests/test_layering.py: REGISTRIES); the runner reaches the statistics
# by import (ablations.statistics.sequential), never by name.
COMMANDS: dict[str, tuple[str, str]] = {
    "sweep": (
        "ablate.ablations.commands.sweep",
        "run every row x seed of a study as Optuna trials (resumable, multi-worker)",
    ),
    "train": ("ablate.ablations.commands.train", "train one configuration: a study row at a preset, plus overrides"),
    "tune": ("ablate.ablations.commands.tune", "search hyperparameters for one row with TPE and step-wise pruning"),
    "report": ("ablate.reports.commands.report", "rebuild the table, plots and verdicts from finished results"),
    "compare": (
        "ablate.reports.commands.compare",
        "two sweeps row by row, two runs side by side, or the claims over model sizes (--claims)",
    ),
    "replay": ("ablate.reports.commands.replay", "a finished study replayed under the sequential design"),
    "simulate": ("ablate.ablations.commands.simulate", "a study's claims at its design, simulated: error, power, cost"),
    "archive": ("ablate.ablations.commands.archive", "pack a study into one file that opens anywhere as a live folder"),
    "translate": ("ablate.ablations.commands.translate", "decode text with a trained model; score it with sacreBLEU"),
    "status": ("ablate.ablations.commands.status", "live view of a sweep: rows done, running, pending, failed, ETA"),
    "params": ("ablate.ablations.commands.params", "parameter count of every row (models built on the meta device)"),
    "studies": ("ablate.ablations.commands.studies", "list the built-in studies and presets; validate a study file"),
    "data": ("ablate.ablations.commands.data", "prepare a corpus and print its statistics"),
    "bench": ("ablate.benchmarks.command", "training and decoding speed, side by side with peer implementations"),
}

USAGE = """usage: ablate COMMAND [options]

Transformer ablation studies: Table 3 of "Attention Is All You Need" and your own, on Lightning, Optuna and W&B.

commands:
{commands}

Run `ablate COMMAND --help` for a command's options. Start with: ablate sweep table3 --preset tiny
"""


def usage() -> str:
    width = max(len(name) for name in COMMANDS)
    return USAGE.format(commands="\n".join(f"  {name:<{width}}  {text}" for name, (_, text) in COMMANDS.items()))


def run_command(name: str, argv: list[str]) -> int:
    """Run command `name` in this process, errors and all (`main` turns them into one line): how one command
    chains another (a sweep ends with `report`) without importing the room that command lives in."""
    return int(importlib.import_module(COMMANDS[name][0]).main(argv) or 0)


def _about(argv: list[str]) -> int:
    """`ablate --help` (or nothing) and `ablate --version`."""
    if argv and argv[0] == "--version":
        from importlib.metadata import version  # lazy: ablate --help loads this file alone

        print(f"ablate {version('ablate')}")
    else:
        print(usage())
    return 0


def main(argv: list[str] | None = None) -> int:
    """Dispatch to a command. Bad input ends with one line on stderr and exit code 2, never a traceback."""
    whole_process = argv is None  # the `ablate` command itself, not a call from a script or a test
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help", "help", "--version"):
        return _about(argv)
    name, rest = argv[0], argv[1:]
    if name not in COMMANDS:
        return _unknown_command(name)
    from ablate.ablations.runtime.interrupt import Interrupted, disk_error, install, path_error  # lazy: --help
    from ablate.ablations.runtime.stopping import Stalled  # lazy: ablate --help loads this file alone
    from ablate.ablations.runtime.urls import ENV_VAR  # lazy: ablate --help loads this file alone
    from ablate.data.errors import AblateError  # lazy: ablate --help loads this file alone

    saved = (sys.argv, os.environ.get(ENV_VAR))
    _keep_storage_secret(rest)
    if whole_process:  # a stop is bounded, a hang names itself (ablations/runtime/stopping.py)
        install(name, rest)
    try:
        return run_command(name, rest)
    except AblateError as err:
        print(f"ablate {name}: error: {err}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # `ablate report ... | head`: an OSError too, so before the next clause
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except OSError as err:  # a full disk, an unwritable --out, an --out that is a file: one line, as for bad input
        said = disk_error(err) or path_error(err)
        if said is None:
            raise
        print(f"ablate {name}: error: {said}", file=sys.stderr)
        return 2
    except (Interrupted, KeyboardInterrupt) as err:
        stopped = err if isinstance(err, Interrupted) else Interrupted()
        print(f"ablate {name}: {stopped.describe(name, rest)}", file=sys.stderr)
        if whole_process:  # a W&B torn down cannot be set up again in the same process
            _quiet_wandb_teardown()
        return 130
    except Stalled as err:  # the watchdog's one line (the stacks are in the log it names)
        print(f"ablate {name}: error: {err}", file=sys.stderr)
        return 1
    except Exception as err:
        if _from_ctrl_c(err):  # Ctrl-C inside an import: the module raised ImportError (scipy does) from it
            print(f"ablate {name}: {Interrupted().describe(name, rest)}", file=sys.stderr)
            return 130
        if name not in ONE_LINE_FAILURES or os.environ.get(TRACEBACK_SWITCH):
            raise
        print(
            f"ablate {name}: unexpected error: {_one_line(err)}; traceback in {_save_traceback(name, rest)}",
            file=sys.stderr,
        )
        return 1
    finally:  # called in-process (tests, scripts), the caller's environment and argv are as they were
        sys.argv = saved[0]
        if saved[1] is None:
            os.environ.pop(ENV_VAR, None)
        else:
            os.environ[ENV_VAR] = saved[1]


ONE_LINE_FAILURES = ("train", "translate")
"""Commands whose unexpected exceptions end in one line and the path of the saved traceback (ABLATE_TRACEBACK=1
shows it on the terminal instead)."""
TRACEBACK_SWITCH = "ABLATE_TRACEBACK"


def _unknown_command(name: str) -> int:
    from ablate.data.errors import did_you_mean  # lazy: ablate --help loads this file alone

    hint = did_you_mean(name, COMMANDS)
    print(f"ablate: error: unknown command {name!r}{hint}; commands are {', '.join(COMMANDS)}", file=sys.stderr)
    return 2


def _quiet_wandb_teardown() -> None:
    """After Ctrl-C, end W&B here rather than in its atexit hook: its service got the same SIGINT, and the hook's
    attempt to reach it printed a 31-line ConnectionResetError after the one line that says what was saved. What the
    teardown itself says or raises is dropped: the run's files are written as it goes (offline runs), and the line
    above says what is safe."""
    if "wandb" not in sys.modules:
        return
    import contextlib  # lazy: ablate --help loads this file alone

    with contextlib.suppress(BaseException), contextlib.redirect_stderr(io.StringIO()):
        with contextlib.redirect_stdout(io.StringIO()):
            sys.modules["wandb"].teardown(exit_code=130)


def _from_ctrl_c(err: BaseException) -> bool:
    """Whether a KeyboardInterrupt is what this error was raised from or during."""
    seen: set[int] = set()
    cause: BaseException | None = err
    while cause is not None and id(cause) not in seen:
        if isinstance(cause, KeyboardInterrupt):
            return True
        seen.add(id(cause))
        cause = cause.__cause__ or cause.__context__
    return False


def _one_line(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    return f"{type(err).__name__}: {text[0]}" if text else type(err).__name__


def _save_traceback(name: str, argv: list[str]) -> str:
    """The running exception's traceback, written under the cache's errors/ folder (else the temporary folder)."""
    import shlex  # lazy: ablate --help loads this file alone
    import tempfile  # lazy: ablate --help loads this file alone
    import traceback  # lazy: ablate --help loads this file alone
    from pathlib import Path  # lazy: ablate --help loads this file alone

    from ablate.data.cache import cache_root  # lazy: ablate --help loads this file alone

    text = f"ablate {name} {shlex.join(argv)}\n\n{traceback.format_exc()}"
    stamp = f"{name}-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}.txt"
    for folder in (cache_root(None) / "errors", Path(tempfile.gettempdir())):
        try:
            folder.mkdir(parents=True, exist_ok=True)
            (folder / stamp).write_text(text)
            return str(folder / stamp)
        except OSError:
            continue
    return "(not saved: no writable folder)"


def _keep_storage_secret(argv: list[str]) -> None:
    """A --storage URL with a password goes into ABLATE_STORAGE for this process and the ones it starts, and out of
    sys.argv: W&B records the command line in every run, and Lightning relaunches it for DDP ranks. (The command
    still parses `argv`, which keeps it.)"""
    from ablate.ablations.runtime.urls import ENV_VAR, redact  # lazy: ablate --help loads this file alone

    for i, arg in enumerate(argv):
        name = arg.partition("=")[0]
        if name not in ("--storage", "--sweep.storage"):  # `ablate sweep`'s in its section, and its old spelling
            continue
        value = argv[i + 1] if arg == name and i + 1 < len(argv) else arg.partition("=")[2]
        if value and redact(value) != value:
            os.environ[ENV_VAR] = value
            sys.argv = [a for a in sys.argv if a not in (arg, value)]


if __name__ == "__main__":
    sys.exit(main())
