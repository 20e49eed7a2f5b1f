"""`ablate sweep STUDY`: every row x seed of a study as one Optuna trial; resumable; any number of workers.

Run the same command again to resume (finished trials are skipped, an interrupted one continues from its last
checkpoint). Run it on another machine with the same --storage postgresql://... to add a worker there.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

from ablations.presets import PRESETS
from data.errors import AblateError


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="ablate sweep", description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("study", help="built-in study (table3) or a study YAML file")
    p.add_argument("--preset", choices=list(PRESETS), default=None, help="size preset (default: the study's, or tiny)")
    p.add_argument("--seeds", type=int, default=None, help="seeds per row (default: the study's)")
    p.add_argument(
        "--storage",
        default=None,
        help="Optuna storage URL (default: a journal file in --out);\n"
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
    p.add_argument("--data", default=None, help="corpus: builtin, a directory of train/valid/test.{src,tgt}, a .tsv")
    p.add_argument("--src", default=None, help="source language suffix (with --data DIR)")
    p.add_argument("--tgt", default=None, help="target language suffix (with --data DIR)")
    p.add_argument("--devices", default=None, help="devices per trial, passed to Lightning (e.g. 2: DDP)")
    p.add_argument("--num-nodes", type=int, default=None, help="nodes per trial (Lightning DDP)")
    p.add_argument("--strategy", default=None, help="Lightning strategy per trial: auto, ddp, ddp_spawn, ...")
    p.add_argument("--accelerator", default=None, help="cpu, gpu or auto")
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="SECTION.FIELD=VALUE",
        help="override a field for every row, e.g. --set train.max_steps=200 (repeatable)",
    )
    p.add_argument(
        "--overrides",
        default=None,
        metavar="FILE.yaml",
        help="sections applied to every row, e.g. the best.yaml written by `ablate tune`",
    )
    p.add_argument("--retry-failed", action="store_true", help="run failed trials again (default: keep their result)")
    p.add_argument("--no-report", action="store_true", help="do not build the report at the end")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    return p


def parse_sets(items: list[str], overrides_file: str | None) -> dict[str, dict[str, Any]]:
    """--set section.field=value (values parsed as YAML scalars) and an overrides YAML, as section layers."""
    import yaml

    from ablations.config import SECTIONS

    layer: dict[str, dict[str, Any]] = {}
    if overrides_file:
        path = Path(overrides_file)
        if not path.is_file():
            raise AblateError(f"{path}: overrides file not found")
        loaded = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        if not isinstance(loaded, dict) or not set(loaded) <= set(SECTIONS):
            raise AblateError(f"{path}: expected a mapping of sections ({', '.join(SECTIONS)}) to fields")
        layer = {k: dict(v) for k, v in loaded.items()}
    for item in items:
        name, eq, value = item.partition("=")
        section, dot, key = name.partition(".")
        if not eq or not dot or section not in SECTIONS:
            raise AblateError(f"--set {item!r}: write SECTION.FIELD=VALUE with SECTION one of {', '.join(SECTIONS)}")
        layer.setdefault(section, {})[key] = yaml.safe_load(value)
    return layer


def make_plan(args: argparse.Namespace):
    from ablations.storage import storage_url
    from ablations.studies import load_study
    from ablations.sweep import Plan

    study = load_study(args.study)
    preset = args.preset or study.default_preset or "tiny"
    seeds = study.seeds if args.seeds is None else args.seeds
    if seeds < 1:
        raise AblateError(f"--seeds must be >= 1, got {seeds}")
    extra = parse_sets(args.set, args.overrides)
    hardware = {
        k: v
        for k, v in {
            "devices": _devices(args.devices),
            "num_nodes": args.num_nodes,
            "strategy": args.strategy,
            "accelerator": args.accelerator,
        }.items()
        if v is not None
    }
    data = {k: v for k, v in {"corpus": args.data, "src": args.src, "tgt": args.tgt}.items() if v is not None}
    for section, values in (("hardware", hardware), ("data", data)):
        if values:
            extra.setdefault(section, {}).update(values)
    out = Path(args.out or f"runs/{study.name}-{preset}")
    plan = Plan(
        study=study,
        preset=preset,
        seeds=list(range(seeds)),
        out=out,
        storage=storage_url(args.storage, out),
        name=args.name or f"{study.name}-{preset}",
        extra=extra,
        retry_failed=args.retry_failed,
    )
    for row in study.rows:  # every row with the command-line settings must build before anything runs
        try:
            plan.run_config(row, 0)
        except AblateError as err:
            raise AblateError(f"{err} (with the command-line settings)") from None
    return plan


def _devices(value: str | None) -> int | str | None:
    return int(value) if value is not None and value.isdigit() else value


def main(argv: list[str]) -> int:
    from ablations import runner

    args = build_parser().parse_args(argv)
    plan = make_plan(args)
    relaunched = runner.ddp_rank(plan.out)
    if relaunched is not None:
        return relaunched
    if args.worker:
        return runner.work_here(plan)
    started = time.time()
    runner.coordinate(plan, args.workers, argv)
    if not args.no_report:
        _report(plan)
    runner.print_next_steps(plan, time.time() - started)
    return 0


def _report(plan) -> None:
    from reports.build import build_report

    try:
        written = build_report(plan.out, wandb=True)
    except AblateError as err:
        print(f"report: {err}", file=sys.stderr)
        return
    md = written.get("md")
    if md is not None and Path(md).exists():
        print(Path(md).read_text(encoding="utf-8"))
    files = [str(path) for key, path in written.items() if not key.startswith("plot:")]
    plots = sum(key.startswith("plot:") for key in written)
    print(f"report: {', '.join(files)} (+{plots} plot files)", file=sys.stderr)
