"""One claimed trial of a sweep: run it, or close it without training, and tell Optuna how it ended.

How "exactly once" holds for a trial:
- A worker runs a claimed trial only if no lower-numbered live trial has the same row x seed (`is_duplicate`);
  a duplicate is closed without training.
- A trial's record is written (atomically) before the trial is told COMPLETE; a retried trial whose record exists
  is closed from the record, not trained again (`run_one`, `close_recorded`).
- A trial stopped by its worker (Ctrl-C, preemption, a full disk) is queued again at once and resumes from its
  checkpoint (`_retry_later`); a failed training is a failed record, never a failed sweep.
Record names, files and which trial speaks for a row x seed live in `ablations.results.ledger`.
"""

from __future__ import annotations

import dataclasses
import time
import traceback
from pathlib import Path

from ablate.ablations.results import ledger
from ablate.ablations.results.record import Layout, Record
from ablate.ablations.results.storage.queue import Queue
from ablate.ablations.runtime import interrupt
from ablate.ablations.runtime.urls import scrub
from ablate.ablations.study.definition import Row
from ablate.ablations.sweep.plan import Plan
from ablate.ablations.sweep.queueing import LIVE_STATES, look
from ablate.ablations.sweep.ranks import TrialSpec
from ablate.ablations.tracking import RunIdentity
from ablate.data.errors import AblateError


def wanted(plan: Plan, queue: Queue, key: tuple[str, int]) -> bool:
    """Under the sequential design, whether the looks over the finished trials ask for `key`: a trial queued by an
    older version of the policy (or under other --max_seeds) is not run. The looks only ever add seeds as trials
    finish, so a fresh look asks for everything an earlier one queued, unless the policy itself has changed."""
    if plan.allocation is None:
        return True
    row, seed = key
    decision = plan.decision
    if decision is None or seed not in decision.seeds.get(row, []):
        decision = look(plan, queue)
    return seed in decision.seeds.get(row, [])


def is_duplicate(queue: Queue, trial) -> bool:
    """True if a lower-numbered live trial has the same key: that one is (or will be) the run of this key."""
    key = ledger.trial_key(trial)
    return any(other.number < trial.number and ledger.trial_key(other) == key for other in queue.trials(*LIVE_STATES))


def close_recorded(plan: Plan, queue: Queue) -> int:
    """Close every queued trial whose result OUT's records already hold: a study resumed from its records into a
    fresh storage (benchmarks/runs/*.tar.xz), or a worker that died between writing a record and telling Optuna. The
    counts and the ETA are right from the start, and no worker spends a claim on them. Returns how many."""
    closed = 0
    for trial in queue.trials("WAITING"):
        key = ledger.trial_key(trial)
        record = None if key is None else ledger.read_record(plan.out, *key)
        if record is None or (record.state != "complete" and plan.retry_failed):
            continue
        claimed = queue.claim_trial(trial)
        if claimed is not None:  # run_one closes it from the record (or as a duplicate of a live trial)
            run_one(plan, queue, claimed)
            closed += 1
    return closed


def run_one(plan: Plan, queue: Queue, trial) -> str:
    """Run (or close) one claimed trial. Never raises for a failed training: the sweep goes on."""
    from optuna.trial import TrialState  # lazy: optuna costs ~50 ms on every --help

    key = ledger.trial_key(trial)
    assert key is not None, "a sweep's trials name their row and seed"
    row_name, seed = key
    if is_duplicate(queue, trial):
        queue.set_attr(trial, "reason", ledger.DUPLICATE_REASON)
        queue.set_attr(trial, ledger.CLOSED_AS, "duplicate")
        queue.study.tell(trial.number, state=TrialState.PRUNED)
        return "duplicate"
    record = ledger.read_record(plan.out, row_name, seed)
    if record is not None and (record.state == "complete" or not plan.retry_failed):
        tell(queue, trial, record, plan.out)  # finished earlier; the worker died before telling Optuna
        return record.state
    if record is None and not wanted(plan, queue, key):
        queue.set_attr(trial, "reason", ledger.UNWANTED_REASON)
        queue.set_attr(trial, ledger.CLOSED_AS, "unwanted")
        queue.study.tell(trial.number, state=TrialState.PRUNED)
        return "unwanted"
    row = plan.study.row(row_name)
    record = Record.started(
        study=plan.study.name, preset=plan.preset, row=row.name, group=row.group, seed=seed,
        overrides=row.flat_overrides(), optuna={"study": plan.name, "trial_number": trial.number},
    )  # fmt: skip
    with queue.heartbeat(trial):
        try:
            record = ledger.write_record(plan.out, _run_trial(plan, queue, record, trial).ended())
        except (interrupt.Interrupted, KeyboardInterrupt) as err:
            _retry_later(queue, trial, f"interrupted ({interrupt.reason()}): retried", getattr(err, "step", None))
            raise
        except SystemExit:  # SIGTERM (scancel, a node going down): Lightning stops the step and exits
            _retry_later(queue, trial, "stopped by SIGTERM: retried")
            raise
        except Exception as err:
            disk = interrupt.disk_error(err)
            if disk is None:
                raise
            _retry_later(queue, trial, f"stopped: {disk}")
            raise disk from None
        tell(queue, trial, record, plan.out)
    _prune(plan, record)
    return record.state


def _retry_later(queue: Queue, trial, reason: str, step: int | None = None) -> None:
    """A trial stopped by its worker (Ctrl-C, preemption, a full disk) is queued again now, so the next run resumes
    it from its checkpoint at once, not after the liveness grace; `step`, where that checkpoint is, is kept on the
    stopped trial (`STOPPED_AT`: status shows the queued one as resuming there). Best effort: on a full disk the
    storage may not take the write either, and then the next run's liveness check does the same."""
    try:
        if step:
            queue.set_attr(trial, ledger.STOPPED_AT, int(step))
        queue.retry(trial, reason)
    except Exception:  # noqa: BLE001 - see above
        pass


def _prune(plan: Plan, record: Record) -> None:
    """A finished trial's checkpoints, cut to train.keep_checkpoints now that its record is written."""
    keep = record.config.get("train", {}).get("keep_checkpoints")
    if keep and record.state == "complete":
        from ablate.ablations.training.checkpoints import prune  # lazy: loads torch and Lightning (seconds)

        prune(Layout(plan.out).trial_dir(record.row, record.seed) / "checkpoints", keep)


def _run_trial(plan: Plan, queue: Queue, record: Record, trial) -> Record:
    """Train the trial's row x seed: the record with its config and outcome (complete, or failed with a reason)."""
    row, seed = plan.study.row(record.row), record.seed
    trial_dir = Layout(plan.out).trial_dir(row.name, seed)
    started = time.time()
    try:
        run = plan.run_config(row, seed)
        record = dataclasses.replace(record, config=run.to_dict(), corpus=plan.fingerprints.get(row.name))
        from ablate.ablations.training.result import scored  # lazy: loads torch and Lightning (seconds)

        result = _train(plan, plan.training_config(row, seed), row, seed, trial_dir, started, queue.trial_id(trial))
        return scored(record, result, Layout(plan.out))
    except Exception as err:  # noqa: BLE001 - a failed trial must never kill the sweep
        if interrupt.disk_error(err) is not None:  # ... but a full disk would fail every trial after it: stop
            raise
        if interrupt.requested():  # it failed because it was being stopped (SIGTERM reached W&B too): a retry
            raise interrupt.Interrupted() from err
        trial_dir.mkdir(parents=True, exist_ok=True)
        Layout(plan.out).error_log(row.name, seed).write_text(traceback.format_exc(), encoding="utf-8")
        return record.failed(_reason(err))


def _train(plan: Plan, run, row: Row, seed: int, trial_dir: Path, started: float, trial_id: int):
    """Train one trial (imports torch and Lightning, so only here); its `TrainResult`."""
    from ablate.ablations.training.callbacks import ProgressToStorage  # lazy: loads torch and Lightning (seconds)
    from ablate.ablations.training.train import train  # lazy: loads torch and Lightning (seconds)

    who = RunIdentity(plan.study.name, plan.preset, row.name, row.group, seed, run.tracking.label)
    spec = TrialSpec.for_trial(trial_dir, run, name=who.name, group=who.group)
    return train(
        run,
        trial_dir,
        name=spec.name,
        group=spec.group,
        tags=who.tags,
        started_at=started,
        wandb_id=spec.wandb_id,
        callbacks=[ProgressToStorage(plan.storage, plan.name, trial_id)],
        prune=False,  # once the record is written (run_one)
        extra_config=who.config(),
    )


def _reason(err: BaseException) -> str:
    """The one-line reason a failed trial's record gives (a URL's password in the error text hidden, terminal colour
    codes, which torch puts in some messages, dropped: the reason goes into tables and web pages)."""
    from ablate.lightning_modules.module import TrainingDiverged  # lazy: loads torch and Lightning (seconds)
    from rich.text import Text  # lazy: rich's console, only for a terminal view

    text = scrub(" ".join(Text.from_ansi(str(err)).plain.split())) or type(err).__name__
    if isinstance(err, TrainingDiverged):
        return f"diverged: {text}"
    if isinstance(err, AblateError):
        return text
    return f"{type(err).__name__}: {text}"[:500]


def tell(queue: Queue, trial, record: Record, out: Path, *, files: bool = True) -> None:
    """Close a claimed trial from its record. The whole record travels in the storage too, so a coordinator on
    another machine can rebuild it; `files` False keeps its files out of the storage (`ablations.sweep.archive`: the
    archive carries them)."""
    from optuna.trial import TrialState  # lazy: optuna costs ~50 ms on every --help

    try:
        shared = ledger.pack_shared(record, out) if files else None
        queue.keep_record(trial, ledger.pack(record, out, files=files), shared)
        if record.state == "complete":
            queue.complete(trial, record.metrics)
        else:
            queue.set_attr(trial, "reason", record.reason)
            queue.study.tell(trial.number, state=TrialState.FAIL)
    except Exception as err:  # told already by a worker that thought this one dead: the record decides
        if "finished" not in str(err).lower():
            raise
