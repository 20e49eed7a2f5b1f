"""`ablate sweep STUDY`: every row x seed of a study as one Optuna trial; resumable; any number of workers.

Run the same command again to resume (finished trials are skipped, an interrupted one continues from its last
checkpoint). Run it on another machine with the same --storage postgresql://... to add a worker there.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from ablations.presets import PRESETS
from data.errors import AblateError

DDP_ENV = "ABLATE_DDP_TRIAL"


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
    from ablations.studies import load_study
    from ablations.sweep import Plan, storage_url

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
    if os.environ.get(DDP_ENV) and os.environ.get("LOCAL_RANK", "0") != "0":
        return _ddp_rank()
    args = build_parser().parse_args(argv)
    plan = make_plan(args)
    if args.worker:
        from ablations.sweep import work

        _set_threads(int(os.environ.get("ABLATE_WORKERS", "1")))
        work(plan)
        return 0
    return coordinate(plan, args, argv)


def coordinate(plan, args: argparse.Namespace, argv: list[str]) -> int:
    """Prepare data once, queue the rows, run the workers, show progress, then write the report."""
    from ablations import progress
    from ablations.sweep import enqueue, load_or_create, open_storage, recover_dead, sync_records, work

    t0 = time.time()
    plan.out.mkdir(parents=True, exist_ok=True)
    _prepare_data(plan)
    storage = open_storage(plan.storage)
    study = load_or_create(storage, plan.name)
    recover_dead(study)
    queued = enqueue(plan, study)
    sync_records(plan, study)
    keys = [(row.name, seed) for row, seed in plan.keys()]
    workers = args.workers or _default_workers(plan)
    print(
        f"sweep {plan.study.name} at preset {plan.preset}: {len(plan.study.rows)} rows x {len(plan.seeds)} seeds = "
        f"{len(keys)} trials ({queued} newly queued), {workers} worker(s) here\n"
        f"  storage {plan.storage if not plan.storage.startswith('postgresql') else plan.describe()['storage']}\n"
        f"  output  {plan.out}",
        file=sys.stderr,
    )
    title = f"{plan.study.name} ({plan.preset})"

    def show(study_now) -> None:
        rows = progress.collect(study_now, keys)
        print(f"[sweep] {progress.summary_line(rows, workers)}", file=sys.stderr, flush=True)

    if workers == 1:
        work(plan, on_trial_end=show)
    else:
        _run_workers(plan, study, argv, workers, keys, title)
        work(plan, on_trial_end=show)  # anything a crashed worker left behind
    synced = sync_records(plan, study)
    rows = progress.collect(study, keys)
    _print_table(progress.render(rows, workers, title))
    if synced:
        print(f"{synced} record(s) from other machines written to {plan.out / 'records'}", file=sys.stderr)
    if not args.no_report:
        _report(plan)
    _print_next_steps(plan, time.time() - t0)
    return 0


def _prepare_data(plan) -> None:
    """Build the corpus, tokenizer and encoded caches once, before any worker starts (workers then only read)."""
    from ablations.tracking import write_text_atomic
    from data.prepare import prepare

    seen = set()
    for row in plan.study.rows:
        data_cfg = plan.run_config(row, 0).data
        if data_cfg in seen:
            continue
        seen.add(data_cfg)
        corpus = prepare(data_cfg, progress=True)
        refs = plan.out / "refs" / "valid.txt"
        if not refs.exists():
            write_text_atomic(refs, "\n".join(corpus.references("valid")) + "\n")


def _default_workers(plan) -> int:
    """One worker per GPU; on a CPU, one single-thread worker per core. Measured on the 2-core
    machine (tiny preset): two 1-thread workers train 42k tokens/s together, one 2-thread process 30k."""
    import torch

    run = plan.run_config(plan.study.rows[0], 0)
    gpus = torch.cuda.device_count()
    if gpus:
        return gpus if gpus > 1 and run.hardware.devices in (1, "1") else 1
    single_process = run.hardware.devices in (1, "1", "auto") and run.hardware.num_nodes == 1
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, min(cores, len(plan.keys()))) if single_process else 1


def _set_threads(workers: int) -> None:
    """Share the CPU cores between local workers (each trial otherwise starts one thread per core)."""
    if workers <= 1:
        return
    import torch

    torch.set_num_threads(max(1, (os.cpu_count() or 1) // workers))


def _run_workers(plan, study, argv: list[str], n: int, keys, title: str) -> None:
    """Start n worker processes (one GPU each when there are GPUs) and show the live table until they finish."""
    import torch

    from ablations import progress
    from ablations.sweep import recover_dead

    logs = plan.out / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    gpus = torch.cuda.device_count()
    procs = []
    for i in range(n):
        env = {**os.environ, "ABLATE_WORKERS": str(n), "PYTHONUNBUFFERED": "1"}
        if gpus > 1:
            env["CUDA_VISIBLE_DEVICES"] = str(i % gpus)
        cmd = [sys.executable, "-m", "ablations.cli", "sweep", *argv, "--worker"]
        with open(logs / f"worker-{i}.log", "ab") as log:
            procs.append(subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT))
    print(f"  {n} workers started; their logs: {logs}/worker-*.log", file=sys.stderr)
    live = _live(title)
    try:
        while any(p.poll() is None for p in procs):
            recover_dead(study)
            rows = progress.collect(study, keys)
            live(progress.render(rows, n, title), progress.summary_line(rows, n))
            time.sleep(3)
    finally:
        live(None, None)
        for p in procs:
            if p.poll() is None:
                p.terminate()


def _live(title: str):
    """A refreshing rich table on a terminal; a summary line whenever it changes otherwise (CI logs, files)."""
    if sys.stderr.isatty():
        from rich.console import Console
        from rich.live import Live

        live = Live(console=Console(stderr=True), refresh_per_second=1)
        live.start()

        def update(table, line):
            if table is None:
                live.stop()
            else:
                live.update(table)

        return update
    last = [""]

    def update_plain(table, line):
        if line and line != last[0]:
            last[0] = line
            print(f"[sweep] {line}", file=sys.stderr, flush=True)

    return update_plain


def _print_table(table) -> None:
    from rich.console import Console

    Console(stderr=True, width=140).print(table)


def _report(plan) -> None:
    try:
        from reports.build import build_report
    except ImportError:  # pragma: no cover - reports ship with the package
        return
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


def _print_next_steps(plan, seconds: float) -> None:
    wandb_dir = plan.out / "trials"
    print(
        f"sweep finished in {seconds / 60:.1f} min. Next:\n"
        f"  ablate report {plan.out}                       # rebuild the table (md, tex, csv, json, html)\n"
        f"  wandb sync {wandb_dir}/*/wandb/offline-run-*    # upload the offline W&B runs\n"
        f"  optuna-dashboard {_dashboard_arg(plan.storage)}  # browse the study",
        file=sys.stderr,
    )


def _dashboard_arg(url: str) -> str:
    return url[len("journal:") :] if url.startswith("journal:") else url


def _ddp_rank() -> int:
    """A rank Lightning relaunched for plain DDP: train the trial rank 0 is running, then leave."""
    from ablations.config import build_run_config
    from ablations.train import train

    spec = json.loads(os.environ[DDP_ENV])
    run = build_run_config(spec["run"])
    train(run, Path(spec["trial_dir"]), name=spec["name"], group=spec["group"], wandb_id=spec.get("wandb_id"))
    return 0
