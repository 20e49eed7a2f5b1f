"""A sweep worker: claim queued trials and run them until the study has none left (`work`), and the worker process
around it, whichever launcher started it (`work_here`: its share of the cores, its signals, its rank in a job).

A worker claims a queued trial through the storage's atomic WAITING -> RUNNING transition. A dead worker is found by
liveness: its heartbeat (a trial user attribute refreshed every few seconds) goes stale, or, on the same host, its
process id is gone. Its trial is failed and re-enqueued, and the retry resumes from the trial's last checkpoint
(`storage.queue.recover_dead`), which every worker checks before each claim.
"""

from __future__ import annotations

import signal
import time

from ablate.ablations.results.storage.queue import Queue, recover_dead
from ablate.ablations.runtime import environment, interrupt, mps
from ablate.ablations.sweep import corpora, ranks
from ablate.ablations.sweep.plan import Plan
from ablate.ablations.sweep.queueing import look_and_enqueue
from ablate.ablations.sweep.trial import run_one
from ablate.data.atomic import write_text_atomic


def work(plan: Plan, *, poll_s: float = 2.0, max_trials: int | None = None, on_trial_end=None) -> dict[str, int]:
    """Claim and run trials until the study has none left (waiting for running ones that might be retried); under
    --rows (`plan.only`), only those rows' trials: another sweep's queued rows stay queued for it.
    Returns counts of trial outcomes run by this worker."""
    queue = Queue.open(plan.storage, plan.name)
    if not plan.fingerprints:  # a worker process: its corpora, as this machine prepares them
        corpora.prepare_rows(plan)
    corpora.check_storage(plan, queue)  # before any claim: a machine with other text trains nothing
    with interrupt.graceful():
        return _work(plan, queue, poll_s, max_trials, on_trial_end)


def _work(plan: Plan, queue: Queue, poll_s: float, max_trials: int | None, on_trial_end) -> dict[str, int]:
    counts: dict[str, int] = {}
    done = 0
    while max_trials is None or done < max_trials:
        if interrupt.requested():  # Ctrl-C between two trials
            raise interrupt.Interrupted()
        if plan.timed_out():
            break
        recover_dead(queue)
        trial = queue.claim(plan.only)
        if trial is None:
            live = queue.trials("RUNNING", "WAITING")
            if not any(plan.only is None or t.user_attrs.get("row") in plan.only for t in live):
                # Nothing left: under the sequential design, look once more (a worker killed between its trial and
                # its look left that look to whoever comes next) before leaving.
                if plan.allocation is None or not look_and_enqueue(plan, queue):
                    break
                continue
            time.sleep(poll_s)
            continue
        state = run_one(plan, queue, trial)
        counts[state] = counts.get(state, 0) + 1
        done += 1
        if plan.allocation is not None:
            look_and_enqueue(plan, queue)
        if on_trial_end is not None:
            on_trial_end(queue)
    return counts


def work_here(plan: Plan) -> int:
    """A worker process, whichever launcher started it (a local worker process, a scheduler's job): share the
    cores, claim and run trials until none are left. In a job of several tasks, task 0 claims the trials and the
    others follow it as the DDP ranks of each trial (`ranks.follow`)."""
    here = environment.here()
    mps.check_worker()
    set_threads(here.local_workers)
    if here.warning is not None:  # a scheduler that warns before preemption or the time limit (launchers/slurm.py)
        interrupt.on_signal(*here.warning)
    # SIGTERM (scancel, a coordinator stopping, a shutdown) stops the trial as a Ctrl-C does: what fails after it
    # (W&B's service gets it too) is the stop, not the trial's fault. Lightning's own SIGTERM handler calls this one.
    interrupt.on_signal(signal.SIGTERM, "SIGTERM (scancel, or the machine shutting down)")
    if here.follower:
        return ranks.follow(plan)
    try:
        work(plan)
    finally:
        if here.ranks_share_job:  # the followers stop when this appears
            write_text_atomic(ranks.done_file(plan.out), str(time.time()))
    return 0


def set_threads(workers: int) -> None:
    """Share the CPU cores between local workers (each trial otherwise starts one thread per core)."""
    if workers <= 1:
        return
    import torch  # lazy: torch costs ~1 s; --help must not pay it

    torch.set_num_threads(max(1, environment.cpu_cores() // workers))
