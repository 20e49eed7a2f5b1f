"""What a sweep queues and when: every row x seed without a live trial (`enqueue`), the sequential design's looks
over the finished trials and the trials they ask for (`look`, `look_and_enqueue`), the records other machines wrote
brought into OUT (`sync_records`), and the trials progress counts (`current_keys`).

Rows are enqueued, never sampled (GridSampler can hand one point to two workers). Enqueueing skips keys that already
have a live trial; two coordinators racing may still enqueue a key twice, and the worker that claims the second
closes it as a duplicate (`ablations.sweep.trial`).
"""

from __future__ import annotations

import sys

from ablate.ablations.results import ledger
from ablate.ablations.results.record import Layout
from ablate.ablations.results.storage.queue import Queue
from ablate.ablations.statistics.sequential import FAILED, NO_VERDICT, STATES, WITHHELD, Decision
from ablate.ablations.sweep.plan import Plan
from ablate.data.atomic import write_json_atomic

LIVE_STATES = ("WAITING", "RUNNING", "COMPLETE")


def enqueue(plan: Plan, queue: Queue, *, retry_failed: bool | None = None) -> int:
    """Queue every row x seed that has no live trial yet. Returns how many were queued. A failed trial counts as
    live unless `retry_failed` (default: --retry_failed), which the sweep's start passes once per invocation and the
    looks never do: a trial that always fails is retried once, not after every look."""
    retry = plan.retry_failed if retry_failed is None else retry_failed
    live = LIVE_STATES if retry else (*LIVE_STATES, "FAIL", "PRUNED")
    have = {ledger.trial_key(t) for t in queue.trials(*live) if not ledger.superseded(t)}
    missing = [(row, seed) for row, seed in plan.keys() if (row.name, seed) not in have]
    space = None
    if missing:
        space, left_out = queue.settle(plan.param_space())
        for line in left_out:
            print(
                f"ablate: the new trials carry no Optuna parameter {line}; a study in a new --out has every axis",
                file=sys.stderr,
            )
    for row, seed in missing:
        queue.enqueue(row.name, seed, row.group, space=space)
    return len(missing)


def look(plan: Plan, queue: Queue) -> Decision:
    """The sequential design's looks (`Plan.look`) over every finished trial, those other machines finished
    included: their records come from the storage first."""
    sync_records(plan, queue)
    return plan.look()


def look_and_enqueue(plan: Plan, queue: Queue) -> int:
    """The sequential design's look after a trial ends (`Plan.look`) and the trials it asks for queued (`enqueue`
    skips any key with a live trial: a look taken twice, by two workers or again after a kill, queues nothing
    twice). Returns how many were newly queued; a look that prints is one that queued something."""
    before = plan.decision
    decision = look(plan, queue)
    queued = enqueue(plan, queue, retry_failed=False)
    if queued or (before is not None and before.states != decision.states):
        print(f"[sweep] look {decision.looks}: {describe_decision(decision)}; {queued} trial(s) queued",
              file=sys.stderr, flush=True)  # fmt: skip
    for row in sorted(r for r, s in decision.states.items() if s == "failed"):
        if before is None or before.states.get(row) != "failed":
            print(f"[sweep] row {row} stopped: {decision.why[row]}; {failure_log(plan, row)}",
                  file=sys.stderr, flush=True)  # fmt: skip
    return queued


def failure_log(plan: Plan, row: str) -> str:
    """Where a failed row's first failure's traceback is, in words (its seeds in order: the first that has one)."""
    seeds = plan.decision.seeds.get(row, []) if plan.decision is not None else []
    logs = [log for log in (Layout(plan.out).error_log(row, s) for s in seeds) if log.is_file()]
    return f"traceback in {logs[0]}" if logs else "no traceback saved"


def describe_decision(decision: Decision) -> str:
    """Rows by where they stand after the last look, in one line: 'decided B1, C4; open C1; out of reach -' (no
    verdict and failed only where a row is); in a study that gives no verdict at all, 'no verdict for any row (the
    study gives none)'."""
    by = {
        k: [row for row, s in decision.states.items() if s == k]
        for k in STATES
        if k not in (NO_VERDICT, FAILED) or k in decision.states.values()
    }
    waiting = [row for row in decision.seeds if row not in decision.states and row not in decision.controls]
    if len(waiting) > 6:  # before the first look, every row: a count says it
        return f"{len(waiting)} rows not looked at yet"
    if decision.states and set(decision.states.values()) == {NO_VERDICT}:
        why = "a pipeline check, or a base that learnt nothing: the report says which"
        return f"no verdict for any row: {WITHHELD} ({why})"
    text = "; ".join(f"{k.replace('_', ' ')} {', '.join(v) or '-'}" for k, v in by.items())
    return text + (f"; not looked at yet {', '.join(waiting)}" if waiting else "")


def current_keys(plan: Plan, trials) -> list[tuple[str, int]]:
    """The (row, seed) trials this sweep runs, for progress: the plan's, and under the sequential design every trial
    a worker's look has queued since (the queue grows while rows stay open)."""
    keys = [(row.name, seed) for row, seed in plan.keys()]
    if plan.allocation is None:
        return keys
    seen = set(keys)
    for trial in trials:
        key = ledger.trial_key(trial)
        if key is not None and key not in seen and (plan.only is None or key[0] in plan.only):
            if not ledger.superseded(trial):
                keys.append(key)
                seen.add(key)
    return keys


def sync_records(plan: Plan, queue: Queue) -> int:
    """Write every finished trial's record that is missing from OUT (run by a worker on another machine) from the
    copy in the storage, and study.json. Returns how many records were written."""
    write_json_atomic(Layout(plan.out).study_file, plan.describe())
    ledger.unpack_shared(queue.shared_files(), plan.out)
    packed = (ledger.stored_copy(t) for t in queue.trials() if ledger.trial_key(t) is not None)
    return sum(ledger.unpack(record, plan.out) for record in packed if record)
