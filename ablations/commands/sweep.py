"""`ablate sweep STUDY`: every row x seed of a study as one Optuna trial; resumable; any number of workers.

Run the same command again to resume (finished trials are skipped, an interrupted one continues from its last
checkpoint). Run it on another machine with the same --storage postgresql://... to add a worker there.
"""

from __future__ import annotations

import sys
import time
from argparse import SUPPRESS
from pathlib import Path

from ablations.commands.options import command_parser, options, overrides, parse, print_config, wants_help
from ablations.config import SECTIONS
from ablations.presets import PRESETS
from data.errors import AblateError


def build_parser(documented: bool = False):
    p = command_parser("ablate sweep", __doc__, sections=SECTIONS, documented=documented)
    p.add_argument("study", help="built-in study (table3) or a study YAML file")
    p.add_argument("--preset", choices=list(PRESETS), default=None, help="size preset (default: the study's, or tiny)")
    p.add_argument("--seeds", type=int, default=None, help="seeds per row (default: the study's)")
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
    p.add_argument("--retry_failed", action="store_true", help="run failed trials again (default: keep their result)")
    p.add_argument("--no_report", action="store_true", help="do not build the report at the end")
    p.add_argument(
        "--launcher",
        choices=["local", "slurm"],
        default="local",
        help="local: worker processes on this machine; slurm: a SLURM job array of --workers workers (submitit), "
        "sized by the slurm section. The command returns once the jobs are queued",
    )
    p.add_argument("--dry_run", action="store_true", help="with --launcher slurm: print the batch script and exit")
    p.add_argument("--wait", action="store_true", help="with --launcher slurm: follow the study until it ends")
    from ablations.slurm import SlurmConfig

    p.add_class_arguments(SlurmConfig, "slurm", help="SLURM settings of --launcher slurm (one job per worker).")
    p.add_argument("--worker", action="store_true", help=SUPPRESS)
    return p


def make_plan(ns):
    from ablations.storage import storage_url
    from ablations.studies import load_study
    from ablations.sweep import Plan

    study = load_study(ns.study)
    preset = ns.preset or study.default_preset or "tiny"
    seeds = study.seeds if ns.seeds is None else ns.seeds
    if seeds < 1:
        raise AblateError(f"--seeds must be >= 1, got {seeds}")
    out = Path(ns.out or f"runs/{study.name}-{preset}")
    plan = Plan(
        study=study,
        preset=preset,
        seeds=list(range(seeds)),
        out=out,
        storage=storage_url(ns.storage, out),
        name=ns.name or f"{study.name}-{preset}",
        extra=overrides(ns),
        retry_failed=ns.retry_failed,
        only=_rows(ns.rows, study),
    )
    for row in study.rows:  # every row with the command-line settings must build before anything runs
        try:
            plan.run_config(row, 0)
        except AblateError as err:
            raise AblateError(f"{err} (with the command-line settings)") from None
    return plan


def _rows(text: str | None, study) -> list[str] | None:
    """--rows as a list of the study's row names; one line naming the unknown ones otherwise."""
    if text is None:
        return None
    names = [name.strip() for name in text.split(",") if name.strip()]
    known = [row.name for row in study.rows]
    unknown = [name for name in names if name not in known]
    if unknown or not names:
        raise AblateError(
            f"--rows: no row {', '.join(unknown) or '(empty)'} in study {study.name}: choose from {', '.join(known)}"
        )
    return names


def main(argv: list[str]) -> int:
    from ablations import runner

    ns = parse(build_parser(documented=wants_help(argv)), argv)
    plan = make_plan(ns)
    if ns.print_config:
        return print_config({**options(ns), "worker": None, **plan.extra})
    relaunched = runner.ddp_rank(plan.out)
    if relaunched is not None:
        return relaunched
    if ns.worker:
        return runner.work_here(plan)
    if ns.launcher == "slurm":
        return _slurm(plan, ns)
    if ns.dry_run or ns.wait:
        raise AblateError("--dry_run and --wait go with --launcher slurm")
    started = time.time()
    runner.coordinate(plan, ns.workers)
    if not ns.no_report:
        _report(plan)
    runner.print_next_steps(plan, time.time() - started)
    return 0


def _report(plan) -> None:
    from reports.build import build_report

    try:
        written = build_report(plan.out, wandb=True, storage=plan.storage)  # study.json's URL keeps no password
    except AblateError as err:
        print(f"report: {err}", file=sys.stderr)
        return
    md = written.get("md")
    if md is not None and Path(md).exists():
        print(Path(md).read_text(encoding="utf-8"))
    files = [str(path) for key, path in written.items() if not key.startswith("plot:")]
    plots = sum(key.startswith("plot:") for key in written)
    print(f"report: {', '.join(files)} (+{plots} plot files)", file=sys.stderr)


def _slurm(plan, ns) -> int:
    """Queue the rows, submit the workers as a SLURM job array, print the job ids (and follow with --wait)."""
    from ablations import runner, slurm

    cfg = slurm.SlurmConfig(**ns.slurm.as_dict())
    if ns.dry_run:
        slurm.submit(plan, cfg, ns.workers, len(plan.keys()), dry_run=True)
        return 0
    queue, queued = runner.start(plan)
    pending = len(queue.trials("WAITING"))
    if not pending:
        print(f"sweep {plan.study.name}: no trial left to run in {plan.out}", file=sys.stderr)
        ids: list[str] = []
    else:
        ids = slurm.submit(plan, cfg, ns.workers, pending, dry_run=False)
        print(
            f"sweep {plan.study.name} at preset {plan.preset}: {pending} trial(s) queued ({queued} new); "
            f"{len(ids)} SLURM worker job(s) submitted: {' '.join(ids)}\n"
            f"  logs    {plan.out.resolve() / 'slurm'}/<job id>/\n"
            f"  follow  ablate status {plan.out} --watch 10",
            file=sys.stderr,
        )
    if not ns.wait:
        return 0
    keys = [(row.name, seed) for row, seed in plan.keys()]
    slurm.wait(plan, keys, ids, f"{plan.study.name} ({plan.preset}) on SLURM")
    runner.sync_records(plan, queue)
    if not ns.no_report:
        _report(plan)
    return 0
