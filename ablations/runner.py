"""What every launcher shares: data prepared and rows queued once (`start`), the worker's command line
(`worker_argv`), what a worker process does (`work_here`), the live view, and the sweep's last lines
(`print_next_steps`).

`ablate sweep` parses its arguments into a `Plan` (commands/sweep.py) and hands it to its launcher
(`ablations.launchers`); a worker process (`--worker`), whichever launcher started it, calls `work_here`; a rank
that Lightning relaunched for plain DDP calls `ddp_rank`. Where a worker stands (its SLURM job, its rank) comes from
`ablations.environment`.
"""

from __future__ import annotations

import json
import re
import shutil
import signal
import sys
import time
from pathlib import Path
from typing import Any

from ablate.ablations import corpora, environment, interrupt, ledger
from ablate.ablations.record import Layout
from ablate.ablations.storage.queue import Queue, recover_dead
from ablate.ablations.storage.urls import redact
from ablate.ablations.sweep import Plan, TrialSpec, close_recorded, enqueue, sync_records, work
from ablate.data.errors import AblateError


def start(plan: Plan) -> tuple[Queue, int]:
    """Prepare data once, check it is the study's corpus (pinning text that depends on the machine), and queue the
    rows that have no live trial: what every launcher does first. Returns the queue and how many trials were newly
    queued."""
    created = not plan.out.exists()
    plan.out.mkdir(parents=True, exist_ok=True)
    try:
        queue = prepare_data(plan)
    except AblateError:  # bad data, or another corpus than the study's: leave no empty output directory behind
        if created:
            shutil.rmtree(plan.out, ignore_errors=True)
        raise
    recover_dead(queue)
    if plan.allocation is not None:  # the looks over what is finished (an archive's records too) say what to queue
        plan.look(queue)
    queued = enqueue(plan, queue)
    sync_records(plan, queue)
    close_recorded(plan, queue)
    return queue, queued


def saved_summary(plan: Plan, keys: list[tuple[str, int]]) -> str:
    """What an interrupted sweep leaves: finished trials (records) and running ones (checkpoints to resume from).
    Under --retry_failed a failed trial's record is not finished: the rerun trains it again (as `sweep.run_one`)."""

    def finished(row: str, seed: int) -> bool:
        record = ledger.read_record(plan.out, row, seed)
        return record is not None and (record.state == "complete" or not plan.retry_failed)

    done = sum(finished(*key) for key in keys)
    started = [
        key for key in keys
        if not finished(*key) and (Layout(plan.out).trial_dir(*key) / "checkpoints" / "last.ckpt").is_file()
    ]  # fmt: skip
    text = f"{done} of {len(keys)} trials finished (records in {plan.out / 'records'})"
    if started:
        text += f"; {len(started)} unfinished trial(s) resume from their checkpoints in {plan.out / 'trials'}"
    return text


def work_here(plan: Plan) -> int:
    """A worker process, whichever launcher started it (a local worker process, a SLURM job's task): share the
    cores, claim and run trials until none are left. In a SLURM job of several tasks, task 0 claims the trials and
    the others follow it as the DDP ranks of each trial (`follow`)."""
    here = environment.here()
    set_threads(here.local_workers)
    if here.warning is not None:  # SLURM warns before preemption or the time limit (launchers/slurm.py)
        interrupt.on_signal(*here.warning)
    # SIGTERM (scancel, a coordinator stopping, a shutdown) stops the trial as a Ctrl-C does: what fails after it
    # (W&B's service gets it too) is the stop, not the trial's fault. Lightning's own SIGTERM handler calls this one.
    interrupt.on_signal(signal.SIGTERM, "SIGTERM (scancel, or the machine shutting down)")
    if here.follower:
        return follow(plan)
    try:
        work(plan)
    finally:
        if here.ranks_share_job:  # the followers stop when this appears
            ledger.write_text_atomic(_done_file(plan), str(time.time()))
    return 0


def _done_file(plan: Plan) -> Path:
    return Layout(plan.out).slurm_dir / f"{environment.here().incarnation}.done"


def follow(plan: Plan, poll_s: float = 0.5) -> int:
    """A SLURM task other than 0: train, as a follower rank, each trial task 0 of this job starts (its
    TRIAL_DIR/trial.json names the job), until task 0 says it is done."""
    from ablate.ablations.config import build_run_config
    from ablate.ablations.train import train

    job, seen = environment.here().incarnation, set()
    while True:
        spec = TrialSpec.find_for_job(plan.out, job, seen)
        if spec is not None:
            seen.add((spec.trial_dir, spec.started_at))
            try:
                train(build_run_config(spec.run), Path(spec.trial_dir), name=spec.name, group=spec.group,
                      wandb_id=spec.wandb_id)  # fmt: skip
            except Exception as err:  # noqa: BLE001 - task 0 records the failure; this rank must stay for the next
                print(f"follower rank: trial {spec.name} failed ({type(err).__name__}); waiting for the next",
                      file=sys.stderr, flush=True)  # fmt: skip
            continue
        if _done_file(plan).is_file():
            return 0
        time.sleep(poll_s)


def prepare_data(plan: Plan) -> Queue:
    """Build the corpus, tokenizer and encoded caches once, before any worker starts (workers then only read); stop
    with one line if they are not the study's corpus (in OUT, or in a storage other machines share), before
    anything is queued or written; pin text that depends on the machine into OUT/corpus. Returns the storage's
    queue, which keeps the fingerprints from then on."""
    prepared = corpora.prepare_rows(plan, progress=True)
    corpora.check_out(plan, prepared)
    queue = Queue.open(plan.storage, plan.name)
    corpora.check_storage(plan, queue)
    corpora.pin(plan, progress=True)
    corpora.remember(plan, queue)
    refs = Layout(plan.out).references("valid")
    if not refs.exists():
        ledger.write_text_atomic(refs, "\n".join(next(iter(prepared.values())).references("valid")) + "\n")
    return queue


def set_threads(workers: int) -> None:
    """Share the CPU cores between local workers (each trial otherwise starts one thread per core)."""
    if workers <= 1:
        return
    import torch

    torch.set_num_threads(max(1, environment.cpu_cores() // workers))


def worker_argv(plan: Plan, **sections: dict[str, Any]) -> list[str]:
    """A worker's `ablate sweep` arguments, written from the plan rather than copied from the command line, whose
    options are the coordinator's (launcher, --storage with its password, relative paths). `sections` adds
    settings (a SLURM job's DDP shape)."""
    args = [str(Path(plan.study.source).resolve()), "--sweep.preset", plan.preset,
            "--sweep.out", str(plan.out.resolve()), "--sweep.name", plan.name, "--sweep.no_report", "true"]  # fmt: skip
    if plan.allocation is None:
        args += ["--sweep.seeds", str(len(plan.seeds)), "--sweep.allocation", "fixed"]
    else:
        args += ["--sweep.allocation", "sequential", "--sweep.min_seeds", str(plan.allocation.min_seeds),
                 "--sweep.max_seeds", str(plan.allocation.max_seeds)]  # fmt: skip
    if plan.retry_failed:
        args += ["--sweep.retry_failed", "true"]
    if plan.only is not None:
        args += ["--sweep.rows", ",".join(plan.only)]
    if plan.stop_at is not None:  # the coordinator's end, not a fresh --timeout from when the worker starts
        args += ["--stop_at", repr(plan.stop_at)]
    for section in {**plan.extra, **sections}:
        for field, value in {**plan.extra.get(section, {}), **sections.get(section, {})}.items():
            args += ["--set", f"{section}.{field}={json.dumps(value)}"]  # JSON is YAML, which --set reads
    return args


def live_view(title: str, every_s: float = 60.0, transient: bool = False):
    """A refreshing rich table on a terminal (`transient`: gone when it stops); otherwise (CI logs, files) a summary
    line whenever a trial changes state, and at most every `every_s` seconds while only the ETA moves."""
    if sys.stderr.isatty():
        from rich.console import Console
        from rich.live import Live

        live = Live(console=Console(stderr=True), refresh_per_second=1, transient=transient)
        live.start()

        def update(table, line):
            if table is None:
                live.stop()
            else:
                live.update(table)

        return update
    last = {"line": "", "states": "", "at": 0.0}

    def update_plain(table, line):
        if not line or line == last["line"]:
            return
        states = re.sub(r"ETA [^,;]*", "ETA", line)  # the line without the ETA's value
        if states == last["states"] and time.monotonic() - last["at"] < every_s:
            return
        last.update(line=line, states=states, at=time.monotonic())
        print(f"[sweep] {line}", file=sys.stderr, flush=True)

    return update_plain


def ddp_rank(out: Path) -> int | None:
    """If this process is a rank that Lightning relaunched for plain DDP (a child of rank 0, LOCAL_RANK > 0), train
    the trial rank 0 is running (TRIAL_DIR/trial.json) and return 0; else None."""
    if not environment.here().relaunched_rank:
        return None
    spec = TrialSpec.find_for_parent(out)
    if spec is None:
        return None
    from ablate.ablations.config import build_run_config
    from ablate.ablations.train import train

    run = build_run_config(spec.run)
    train(run, Path(spec.trial_dir), name=spec.name, group=spec.group, wandb_id=spec.wandb_id)
    return 0


def recorded(plan: Plan) -> int:
    """The plan's trials that already have a record (a resumed sweep)."""
    return sum(ledger.record_path(plan.out, row.name, seed).exists() for row, seed in plan.keys())


def _ended(plan: Plan, seconds: float) -> str:
    done, planned = recorded(plan), len(plan.keys())
    if plan.stop_at is None or done >= planned:
        return f"sweep finished in {seconds / 60:.1f} min"
    return (f"sweep stopped at its --timeout after {seconds / 60:.1f} min, {done} of {planned} trials finished; the "
            f"same command goes on with the rest")  # fmt: skip


def print_next_steps(plan: Plan, seconds: float) -> None:
    """The sweep's last lines, whichever launcher followed it: how it ended (finished, or stopped at --timeout with
    the rest queued) and what to run next."""
    runs = f"{plan.out}/trials/*/wandb/offline-run-*"
    if (plan.out / "wandb").is_dir():  # the report's run
        runs += f" {plan.out}/wandb/offline-run-*"
    dashboard = redact(plan.storage.removeprefix("journal:"))
    print(
        f"{_ended(plan, seconds)}. Next:\n"
        f"  ablate report {plan.out}                       # rebuild the table (ablate report --help: formats)\n"
        f"  wandb sync {runs}    # upload the offline W&B runs\n"
        f"  optuna-dashboard {dashboard}  # browse the study",
        file=sys.stderr,
    )
