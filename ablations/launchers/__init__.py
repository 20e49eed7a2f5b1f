"""How `ablate sweep` runs its workers: one launcher per module of this package.

Every worker is the same process, `ablate sweep ... --worker` (`runner.worker_argv`), whichever launcher started
it: it claims trials from the storage until none are left (`ablations.sweep.worker`). So a launcher decides only where
the workers run and how the command follows them: `local` starts worker processes on this machine and shows the live
table; `slurm` submits a SLURM job array through submitit and returns (or follows the study with --wait).

A new launcher is one new module here that defines `LAUNCHER`, an object with the attributes of `Launcher`:
`ablate sweep --launcher NAME` then offers it, and its settings (if any) as `--NAME.FIELD` options. Code outside
this package (a test, a plugin) adds one with `register`. What a scheduler adds stays in its launcher's module:
- where a worker stands in a job (the job's name, this run of it after a requeue, the job's tasks and this one's
  rank, the signal that warns of its end): the launcher starts the worker with `environment.job_variables`, its
  scheduler's account in ablate's words (launchers/slurm.py: `worker_environment`). The worker then names its job
  on each trial it claims, saves and requeues its trial on the warning, and, in a job of several tasks, trains each
  trial as its DDP ranks (`ablations.sweep.ranks`);
- requeueing a warned job, and its files under OUT/NAME (`Layout.jobs_dir`);
- `job_states(ids)`, optional: each job's state now, which `ablate status` shows beside the trial's job.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from ablate.data.errors import AblateError

if TYPE_CHECKING:
    from ablate.ablations.sweep.plan import Plan

DEFAULT = "local"


def _nothing() -> None:
    return None


@dataclass(frozen=True)
class Launch:
    """What `ablate sweep` asks of a launcher besides the plan: the command's options, and what it does at the
    end of a sweep."""

    workers: int | None = None
    """--workers: how many workers to start; None: the launcher's default."""
    dry_run: bool = False
    """--dry_run: print what would be started (a batch script) and exit; nothing is queued, written or started."""
    wait: bool = False
    """--wait: a launcher that submits jobs and returns follows the study until it ends instead."""
    settings: Any = None
    """The launcher's own settings (an instance of its `settings` class, from --NAME.FIELD), else None."""
    finish: Callable[[], None] = field(default=_nothing)
    """What the command does once every trial of the sweep has ended here: the report (nothing with --no_report)."""


class Launcher(Protocol):
    """Starts the workers of a sweep. Its trials are queued in the storage by `runner.start`, which `launch` calls
    first (a dry run excepted: it writes nothing)."""

    name: str
    """What `--launcher` calls it."""
    help: str
    """One line for `ablate sweep --help`: where the workers run, and when the command returns."""
    settings: type | None
    """A dataclass of the launcher's own settings, offered as --NAME.FIELD (and a NAME section of --config);
    None when it has none."""

    def launch(self, plan: Plan, launch: Launch) -> int:
        """Start (or submit) the workers of `plan` and follow them as far as this launcher does; the command's exit
        code. Missing pieces (a command, a package) are an AblateError: one line, exit 2."""
        ...


def job_states(launcher: Launcher | None, ids: list[str]) -> dict[str, str]:
    """Job id -> its state now, as `launcher` tells it (its optional `job_states`); {} where it cannot."""
    ask = getattr(launcher, "job_states", None)
    return ask(ids) if ask is not None else {}


_launchers: dict[str, Launcher] = {}
_found = False


def available() -> dict[str, Launcher]:
    """Every launcher by name: the `LAUNCHER` of each module of this package (in name order), then those added with
    `register`."""
    global _found
    if not _found:
        for module in pkgutil.iter_modules(__path__):
            launcher = getattr(importlib.import_module(f"{__name__}.{module.name}"), "LAUNCHER", None)
            if launcher is not None:
                _launchers.setdefault(launcher.name, launcher)
        _found = True
    return dict(_launchers)


def register(launcher: Launcher) -> Launcher:
    """Offer `launcher` to `ablate sweep --launcher` in this process (a name already taken is replaced)."""
    available()
    _launchers[launcher.name] = launcher
    return launcher


def unregister(name: str) -> None:
    _launchers.pop(name, None)


def get(name: str) -> Launcher:
    found = available()
    if name not in found:
        raise AblateError(f"--launcher {name}: no such launcher; choose from {', '.join(found)}")
    return found[name]


__all__ = ["DEFAULT", "Launch", "Launcher", "available", "get", "job_states", "register", "unregister"]
