"""What every launcher shares: data prepared and rows queued once (`start`), the worker's command line
(`worker_argv`), the live view, what an interrupted sweep saved, and the sweep's last lines (`print_next_steps`).

`ablate sweep` parses its arguments into a `Plan` (commands/sweep.py) and hands it to its launcher
(`ablations.launchers`); a worker process (`--worker`), whichever launcher started it, calls `worker.work_here`; a
rank that Lightning relaunched for plain DDP calls `ranks.ddp_rank`. Where a worker stands (its job, its rank) comes
from `ablations.runtime.environment`, in the words its launcher translated the scheduler's into.
"""

from __future__ import annotations

import json
import re
import shutil
import sys
import time
from pathlib import Path
from typing import Any

from ablate.ablations.results import ledger
from ablate.ablations.results.record import Layout
from ablate.ablations.results.storage.queue import Queue, recover_dead
from ablate.ablations.runtime.urls import redact
from ablate.ablations.sweep import corpora
from ablate.ablations.sweep.plan import Plan
from ablate.ablations.sweep.queueing import enqueue, look, sync_records
from ablate.ablations.sweep.trial import close_recorded
from ablate.data.atomic import write_text_atomic
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
        look(plan, queue)
    queued = enqueue(plan, queue)
    sync_records(plan, queue)
    close_recorded(plan, queue)
    return queue, queued


def saved_summary(plan: Plan, keys: list[tuple[str, int]]) -> str:
    """What an interrupted sweep leaves: finished trials (records; the failed ones counted apart) and running ones
    (checkpoints to resume from). Under --retry_failed a failed trial's record is not finished: the rerun trains it
    again (as `trial.run_one`)."""
    records = {key: ledger.read_record(plan.out, *key) for key in keys}
    finished = {
        key for key, record in records.items()
        if record is not None and (record.state == "complete" or not plan.retry_failed)
    }  # fmt: skip
    failed = sum(records[key].state != "complete" for key in finished)  # pyright: ignore[reportOptionalMemberAccess]
    started = [
        key for key in keys
        if key not in finished and (Layout(plan.out).trial_dir(*key) / "checkpoints" / "last.ckpt").is_file()
    ]  # fmt: skip
    text = f"{len(finished)} of {len(keys)} trials finished" + (f", {failed} of them failed" if failed else "")
    text += f" (records in {plan.out / 'records'})"
    if started:
        text += f"; {len(started)} unfinished trial(s) resume from their checkpoints in {plan.out / 'trials'}"
    return text


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
        write_text_atomic(refs, "\n".join(next(iter(prepared.values())).references("valid")) + "\n")
    return queue


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
        from rich.console import Console  # lazy: rich's console, only for a terminal view
        from rich.live import Live  # lazy: rich's console, only for a terminal view

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


def no_success(plan: Plan) -> str | None:
    """None when a trial of this sweep's rows completed or none has a record yet; else the first failure (lowest row
    and seed), in one line with where its traceback is: a sweep in which nothing succeeded says why and exits
    non-zero."""
    rows = {row.name for row, _ in plan.keys()}
    failures = []
    for record in sorted(ledger.read_records(plan.out), key=lambda r: (r.row, r.seed)):
        if record.row not in rows:
            continue
        if record.state == "complete":
            return None
        failures.append((record.row, record.seed, record.reason or record.state))
    if not failures:
        return None
    row, seed, reason = failures[0]
    log = Layout(plan.out).error_log(row, seed)
    where = f"; traceback in {log}" if log.is_file() else ""
    return f"no trial succeeded ({len(failures)} failed); the first, {row} seed {seed}: {reason}{where}"


def recorded(plan: Plan) -> int:
    """The plan's trials that already have a record (a resumed sweep)."""
    return sum(ledger.record_path(plan.out, row.name, seed).exists() for row, seed in plan.keys())


def _ended(plan: Plan, seconds: float) -> str:
    done, planned = recorded(plan), len(plan.keys())
    if plan.stop_at is not None and done < planned:
        return (f"sweep stopped at its --timeout after {seconds / 60:.1f} min, {done} of {planned} trials finished; "
                f"the same command goes on with the rest")  # fmt: skip
    if elsewhere := waiting_elsewhere(plan):
        return (
            f"sweep finished its rows (--rows) in {seconds / 60:.1f} min; the study's looks also ask for "
            f"{', '.join(elsewhere)}, which this sweep leaves out: a sweep of the study's rows trains them"
        )
    return f"sweep finished in {seconds / 60:.1f} min"


def waiting_elsewhere(plan: Plan) -> list[str]:
    """Under the sequential design, the rows outside this sweep's --rows whose seeds the study's last look asks
    for and that have no record yet (`Plan.judged`: a subset sweep ends with its own rows, not the study)."""
    if plan.allocation is None or plan.only is None:
        return []
    decision = plan.look()
    return [row for row, seeds in decision.seeds.items() if row not in plan.only
            and any(not ledger.record_path(plan.out, row, seed).exists() for seed in seeds)]  # fmt: skip


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
