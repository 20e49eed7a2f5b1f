"""`ablate sweep STUDY`: every row x seed of a study as one Optuna trial; resumable; any number of workers.

Run the same command again to resume (finished trials are skipped, an interrupted one continues from its last
checkpoint). Run it on another machine with the same --storage postgresql://... to add a worker there.
"""

from __future__ import annotations

import dataclasses
import re
import sys
import time
from argparse import SUPPRESS
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from ablate.ablations import launchers
from ablate.ablations.cli import run_command
from ablate.ablations.commands.options import (
    command_parser,
    overrides,
    own_options,
    parse,
    print_config,
    wants_help,
)
from ablate.ablations.runtime.urls import storage_url
from ablate.ablations.statistics.sequential import Sequential
from ablate.ablations.study.config import SECTIONS
from ablate.ablations.study.definition import check_allocation, load_study, parse_rows
from ablate.ablations.study.presets import get_preset
from ablate.ablations.sweep import ranks, worker
from ablate.ablations.sweep.corpora import check_sources, read_pin
from ablate.ablations.sweep.plan import Plan
from ablate.data.errors import AblateError
from jsonargparse import set_parsing_settings


@dataclass(kw_only=True)
class SweepConfig:
    """How a sweep runs its study: the preset and seeds, where trials and results go, and who runs them."""

    preset: str | None = None
    """size preset (default: the study's, or tiny)"""
    seeds: int | None = None
    """seeds per row (default: the study's, or the preset's if more)"""
    control_seeds: int | None = None
    """seeds of each control row: the base, which every comparison uses, and any row claims compare others against
    (default: the study's control_seeds; 'auto' there is about sqrt(k) x seeds for k rows, Dunnett's allocation)"""
    allocation: Literal["fixed", "sequential"] | None = None
    """fixed: every row trains `seeds`; sequential: every row starts at `min_seeds` and a row gets one more seed only
    while a comparison of it is open, up to `max_seeds`, with the error kept over the looks (default: the study's
    allocation)"""
    min_seeds: int | None = None
    """sequential: seeds every row trains before the first look"""
    max_seeds: int | None = None
    """sequential: the most seeds a row trains"""
    storage: str | None = None
    """Optuna storage URL (default: a journal file in `out`); postgresql://user:pw@host/db shares the study with
    workers on other machines"""
    workers: int | None = None
    """trials at once on this machine (default: one per GPU, else one per CPU core)"""
    out: str | None = None
    """output directory (default runs/<study>-<preset>)"""
    name: str | None = None
    """Optuna study name (default <study>-<preset>)"""
    rows: str | None = None
    """train only these rows, comma-separated (e.g. base,B1,C1); the others stay pending, and the same command
    without `rows` trains them later"""
    timeout: str | None = None
    """start no trial after this long (e.g. 2h30m, 90m, 3600s); running trials finish and the rest stay queued: the
    same command without it goes on (Optuna's optimize(timeout=...))"""
    retry_failed: bool = False
    """run failed trials again (default: keep their result)"""
    no_report: bool = False
    """do not build the report at the end"""
    launcher: str = launchers.DEFAULT
    """where the workers run (`ablations.launchers`; this help's `sweep` section lists them)"""
    dry_run: bool = False
    """print the plan and exit, writing nothing: local, each row's seeds, parameters, changes from the base, the claims
    tested and the cost; slurm, the batch script it would submit"""
    wait: bool = False
    """with a launcher that submits jobs: follow the study until it ends"""


OLD_SPELLINGS = {
    f"--{f.name}": f"--sweep.{f.name}" + ("=true" if f.type == "bool" else "") for f in dataclasses.fields(SweepConfig)
}
"""The spellings before the `sweep` section (--workers 4, --retry_failed), read as --sweep.workers 4 and
--sweep.retry_failed=true (`options.command_parser`'s `aliases`): scripts, workers' command lines and the README
written with them keep working."""


def build_parser(documented: bool = False):
    p = command_parser("ablate sweep", __doc__, sections=SECTIONS, documented=documented, aliases=OLD_SPELLINGS)
    p.add_argument("study", help="built-in study (table3) or a study YAML file")
    found = launchers.available()
    said = "; ".join(f"{name}: {launcher.help}" for name, launcher in found.items())
    _add_settings(p, {"sweep": (SweepConfig, f"{_first_line(SweepConfig.__doc__)} Launchers: {said}.")}, documented)
    own = {name: (launcher.settings, _first_line(launcher.settings.__doc__)) for name, launcher in found.items()}
    _add_settings(p, {name: section for name, section in own.items() if section[0] is not None}, documented)
    p.add_argument("--worker", action="store_true", help=SUPPRESS)
    p.add_argument("--stop_at", type=float, default=None, help=SUPPRESS)  # --timeout's end, passed to workers
    return p


def _add_settings(p, sections: dict, documented: bool) -> None:
    """Each settings dataclass as --NAME.FIELD, with the fields' docstrings as help in a parser that prints it: the
    sweep's own, and each launcher's."""
    set_parsing_settings(docstring_parse_attribute_docstrings=documented)
    try:
        for name, (cls, text) in sections.items():
            p.add_class_arguments(cls, name, help=text)
    finally:
        set_parsing_settings(docstring_parse_attribute_docstrings=False)


def make_plan(ns):
    sweep = settings(ns)
    if sweep.workers is not None and sweep.workers < 1:
        raise AblateError(f"--workers must be at least 1 (trials at once on this machine), got {sweep.workers}")
    study = _with_allocation(load_study(ns.study), sweep)
    preset = get_preset(sweep.preset or study.default_preset or "tiny").name
    only = parse_rows(sweep.rows, [row.name for row in study.rows])
    out = Path(sweep.out or f"runs/{study.name}-{preset}")
    allocation = None
    if study.allocation == "sequential":
        if sweep.seeds is not None or sweep.control_seeds is not None:
            raise AblateError(
                "--allocation sequential: --seeds and --control_seeds set a fixed design's seeds; a sequential "
                "study's come from its looks: pass --min_seeds/--max_seeds, or leave out --allocation"
            )
        allocation = Sequential(study.min_seeds, study.max_seeds)
        seeds, controls = study.min_seeds, {}
    else:
        seeds = study.seed_count(preset, sweep.seeds)
        if seeds < 1:
            raise AblateError(f"--seeds must be >= 1, got {seeds}")
        if sweep.control_seeds is not None and sweep.control_seeds < seeds:
            raise AblateError(f"--control_seeds must be at least --seeds ({seeds}), got {sweep.control_seeds}")
        controls = study.control_seed_counts(seeds, sweep.control_seeds, only)
    plan = Plan(
        study=study,
        preset=preset,
        seeds=list(range(seeds)),
        allocation=allocation,
        control_seeds={name: list(range(n)) for name, n in controls.items()},
        out=out,
        storage=storage_url(sweep.storage, out),
        name=sweep.name or f"{study.name}-{preset}",
        extra=overrides(ns),
        retry_failed=sweep.retry_failed,
        only=only,
        stop_at=ns.stop_at if ns.stop_at is not None else _stop_at(sweep.timeout),
        pin=read_pin(out),
    )
    for row in study.rows:  # every row with the command-line settings must build before anything runs
        plan.run_config(row, 0)
    plan.check_same_design()

    check_sources(plan)  # the dry run too
    return plan


def settings(ns) -> SweepConfig:
    """The `sweep` section of a parsed command line."""
    return SweepConfig(**ns.sweep.as_dict())


def _with_allocation(study, sweep: SweepConfig):
    """The study with the command line's --allocation, --min_seeds and --max_seeds, checked as the study file's."""
    allocation = sweep.allocation
    if allocation is None and (sweep.seeds is not None or sweep.control_seeds is not None):
        allocation = "fixed"  # --seeds N asks for N seeds a row: the fixed design, whatever the study's default
    given = {"allocation": allocation, "min_seeds": sweep.min_seeds, "max_seeds": sweep.max_seeds}
    if all(v is None for v in given.values()):
        return study
    raw = {"allocation": study.allocation, "min_seeds": study.min_seeds, "max_seeds": study.max_seeds}
    raw |= {k: v for k, v in given.items() if v is not None}
    allocation, low, high = check_allocation(raw, "the command line")
    return dataclasses.replace(study, allocation=allocation, min_seeds=low, max_seeds=high)


def _stop_at(text: str | None) -> float | None:
    """--timeout (2h30m, 90m, 45s, or seconds) as the Unix time it ends; one line saying what it takes otherwise."""
    if text is None:
        return None
    found = re.fullmatch(r"\s*(?:(\d+(?:\.\d+)?)h)?\s*(?:(\d+(?:\.\d+)?)m)?\s*(?:(\d+(?:\.\d+)?)s?)?\s*", text)
    if not text.strip() or found is None or not any(found.groups()):
        raise AblateError(f"--timeout: {text!r} is not a duration: give hours, minutes or seconds (2h30m, 90m, 3600)")
    hours, minutes, seconds = (float(g or 0) for g in found.groups())
    return time.time() + 3600 * hours + 60 * minutes + seconds


def _first_line(text: str | None) -> str | None:
    return text.strip().splitlines()[0] if text else None


def main(argv: list[str]) -> int:
    ns = parse(build_parser(documented=wants_help(argv)), argv)
    plan = make_plan(ns)
    if ns.print_config:
        return print_config({**own_options(ns), "worker": None, **plan.extra})
    relaunched = ranks.ddp_rank(plan.out)
    if relaunched is not None:
        return relaunched
    if ns.worker:
        return worker.work_here(plan)
    sweep = settings(ns)
    launcher = launchers.get(sweep.launcher)
    launch = launchers.Launch(
        workers=sweep.workers,
        dry_run=sweep.dry_run,
        wait=sweep.wait,
        settings=None if launcher.settings is None else launcher.settings(**ns[launcher.name].as_dict()),
        finish=(lambda: None) if sweep.no_report else (lambda: _report(plan)),
    )
    return launcher.launch(plan, launch)


def _report(plan) -> None:
    """The report of a finished sweep, by `ablate report`, which prints what its files say first (the verdicts and a
    compact table: reports/terminal.py) and where they are; a report that fails says why in one line, and the sweep
    still succeeds. The storage is passed on: study.json's URL keeps no password."""
    try:
        run_command("report", [str(plan.out), "--wandb", "--storage", plan.storage])
    except AblateError as err:
        print(f"report: {err}", file=sys.stderr)
