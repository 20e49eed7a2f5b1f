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
from pathlib import Path

from ablate.ablations import launchers
from ablate.ablations.commands.options import command_parser, options, overrides, parse, print_config, wants_help
from ablate.ablations.config import SECTIONS
from ablate.ablations.presets import PRESETS
from ablate.data.errors import AblateError


def build_parser(documented: bool = False):
    p = command_parser("ablate sweep", __doc__, sections=SECTIONS, documented=documented)
    p.add_argument("study", help="built-in study (table3) or a study YAML file")
    p.add_argument("--preset", choices=list(PRESETS), default=None, help="size preset (default: the study's, or tiny)")
    p.add_argument(
        "--seeds", type=int, default=None, help="seeds per row (default: the study's, or the preset's if more)"
    )
    p.add_argument(
        "--control_seeds",
        type=int,
        default=None,
        help="seeds of each control row: the base, which every comparison uses, and any row claims compare others "
        "against (default: the study's control_seeds; 'auto' there is about sqrt(k) x --seeds for k rows, Dunnett's "
        "allocation)",
    )
    p.add_argument(
        "--allocation",
        choices=["fixed", "sequential"],
        default=None,
        help="fixed: every row trains --seeds; sequential: every row starts at --min_seeds and a row gets one more "
        "seed only while a comparison of it is open, up to --max_seeds, with the error kept over the looks (default: "
        "the study's allocation)",
    )
    p.add_argument(
        "--min_seeds", type=int, default=None, help="sequential: seeds every row trains before the first look"
    )
    p.add_argument("--max_seeds", type=int, default=None, help="sequential: the most seeds a row trains")
    p.add_argument(
        "--storage",
        default=None,
        help="Optuna storage URL (default: a journal file in --out); "
        "postgresql://user:pw@host/db shares the study with workers on other machines",
    )
    p.add_argument(
        "--workers",
        type=int,
        default=None,
        help="trials at once on this machine (default: one per GPU, else one per CPU core)",
    )
    p.add_argument("--out", default=None, help="output directory (default runs/<study>-<preset>)")
    p.add_argument("--name", default=None, help="Optuna study name (default <study>-<preset>)")
    p.add_argument(
        "--rows",
        default=None,
        help="train only these rows, comma-separated (e.g. base,B1,C1); the others stay pending, and the same "
        "command without --rows trains them later",
    )
    p.add_argument(
        "--timeout",
        default=None,
        help="start no trial after this long (e.g. 2h30m, 90m, 3600s); running trials finish and the rest stay "
        "queued: the same command without it goes on (Optuna's optimize(timeout=...))",
    )
    p.add_argument("--retry_failed", action="store_true", help="run failed trials again (default: keep their result)")
    p.add_argument("--no_report", action="store_true", help="do not build the report at the end")
    found = launchers.available()
    p.add_argument(
        "--launcher",
        choices=list(found),
        default=launchers.DEFAULT,
        help="; ".join(f"{name}: {launcher.help}" for name, launcher in found.items()),
    )
    p.add_argument(
        "--dry_run", action="store_true", help="print what the launcher would submit (slurm: the batch script) and exit"
    )
    p.add_argument(
        "--wait", action="store_true", help="with a launcher that submits jobs: follow the study until it ends"
    )
    _add_launcher_settings(p, found, documented)
    p.add_argument("--worker", action="store_true", help=SUPPRESS)
    p.add_argument("--stop_at", type=float, default=None, help=SUPPRESS)  # --timeout's end, passed to workers
    return p


def _add_launcher_settings(p, found: dict, documented: bool) -> None:
    """Each launcher's settings as --NAME.FIELD, with the fields' docstrings as help in a parser that prints it."""
    from jsonargparse import set_parsing_settings

    set_parsing_settings(docstring_parse_attribute_docstrings=documented)
    try:
        for name, launcher in found.items():
            if launcher.settings is not None:
                p.add_class_arguments(launcher.settings, name, help=_first_line(launcher.settings.__doc__))
    finally:
        set_parsing_settings(docstring_parse_attribute_docstrings=False)


def make_plan(ns):
    from ablate.ablations.corpora import read_pin
    from ablate.ablations.design import Sequential
    from ablate.ablations.storage.urls import storage_url
    from ablate.ablations.studies import load_study, parse_rows
    from ablate.ablations.sweep import Plan

    study = _with_allocation(load_study(ns.study), ns)
    preset = ns.preset or study.default_preset or "tiny"
    only = parse_rows(ns.rows, study)
    out = Path(ns.out or f"runs/{study.name}-{preset}")
    allocation = None
    if study.allocation == "sequential":
        if ns.seeds is not None or ns.control_seeds is not None:
            raise AblateError(
                "--allocation sequential: --seeds and --control_seeds set a fixed design's seeds; a sequential "
                "study's come from its looks: pass --min_seeds/--max_seeds, or leave out --allocation"
            )
        allocation = Sequential(study.min_seeds, study.max_seeds)
        seeds, controls = study.min_seeds, {}
    else:
        seeds = study.seed_count(preset, ns.seeds)
        if seeds < 1:
            raise AblateError(f"--seeds must be >= 1, got {seeds}")
        if ns.control_seeds is not None and ns.control_seeds < seeds:
            raise AblateError(f"--control_seeds must be at least --seeds ({seeds}), got {ns.control_seeds}")
        controls = study.control_seed_counts(seeds, ns.control_seeds, only)
    plan = Plan(
        study=study,
        preset=preset,
        seeds=list(range(seeds)),
        allocation=allocation,
        control_seeds={name: list(range(n)) for name, n in controls.items()},
        out=out,
        storage=storage_url(ns.storage, out),
        name=ns.name or f"{study.name}-{preset}",
        extra=overrides(ns),
        retry_failed=ns.retry_failed,
        only=only,
        stop_at=ns.stop_at if ns.stop_at is not None else _stop_at(ns.timeout),
        pin=read_pin(out),
    )
    for row in study.rows:  # every row with the command-line settings must build before anything runs
        try:
            plan.run_config(row, 0)
        except AblateError as err:
            raise AblateError(f"{err} (with the command-line settings)") from None
    plan.check_same_design()
    return plan


def _with_allocation(study, ns):
    """The study with the command line's --allocation, --min_seeds and --max_seeds, checked as the study file's."""
    from ablate.ablations.studies import check_allocation

    allocation = ns.allocation
    if allocation is None and (ns.seeds is not None or ns.control_seeds is not None):
        allocation = "fixed"  # --seeds N asks for N seeds a row: the fixed design, whatever the study's default
    given = {"allocation": allocation, "min_seeds": ns.min_seeds, "max_seeds": ns.max_seeds}
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
    from ablate.ablations import runner

    ns = parse(build_parser(documented=wants_help(argv)), argv)
    plan = make_plan(ns)
    if ns.print_config:
        return print_config({**options(ns), "worker": None, **plan.extra})
    relaunched = runner.ddp_rank(plan.out)
    if relaunched is not None:
        return relaunched
    if ns.worker:
        return runner.work_here(plan)
    launcher = launchers.get(ns.launcher)
    launch = launchers.Launch(
        workers=ns.workers,
        dry_run=ns.dry_run,
        wait=ns.wait,
        settings=None if launcher.settings is None else launcher.settings(**ns[launcher.name].as_dict()),
        finish=(lambda: None) if ns.no_report else (lambda: _report(plan)),
    )
    return launcher.launch(plan, launch)


def _report(plan) -> None:
    """The report of a finished sweep, by `ablate report` (which prints the table); a report that fails says why in
    one line, and the sweep still succeeds. The storage is passed on: study.json's URL keeps no password."""
    from ablate.ablations.cli import run_command

    try:
        run_command("report", [str(plan.out), "--wandb", "--storage", plan.storage])
    except AblateError as err:
        print(f"report: {err}", file=sys.stderr)
