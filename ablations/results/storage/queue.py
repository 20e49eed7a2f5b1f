"""The trial queue on a storage, and the liveness that re-runs a dead worker's trial.

A trial moves through one state machine, enforced here and nowhere else:

    queued (WAITING) --claim--> claimed and running (RUNNING) --tell--> told (COMPLETE, FAIL or PRUNED)
                                                               --retry--> FAIL, closed_as 'retried', queued again

Rows are enqueued as WAITING trials (`enqueue`); a worker claims one through the storage's atomic WAITING -> RUNNING
transition (`claim`, `claim_trial`: the storage arbitrates between workers, so no two run it); the worker that runs it
tells Optuna how it ended (`complete`, or the trial's `tell` for a failure or a closing by design, with its
`ledger.ClosedAs`), only after its record is written. A dead worker's trial (`recover_dead`) and one its worker
stopped are failed as 'retried' and queued again (`retry`); a told trial never moves again (Optuna refuses it).
Optuna's public API has no claim that does not also
create a new trial when none waits (`Study.ask`), so the claim uses the storage's public `set_trial_state_values`,
on trial ids looked up by public storage calls (`Queue.trial_id`): no private attribute of Optuna is read anywhere.
A trial's values are named objectives, dev BLEU (maximize) and dev PPL (minimize); the dev BLEU of every validation
is an intermediate value (learning curves); the bulky record travels as a system attribute, which neither
optuna-dashboard nor `optuna trials` prints.

Liveness is hand-written rather than Optuna's heartbeat because Optuna 5 supports heartbeats only on RDB storages
and the default storage is a journal file; one mechanism then serves journal, SQLite and PostgreSQL alike.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any

from ablate.ablations.results import ledger
from ablate.ablations.results.storage.opening import load_or_create, open_storage, study_metrics
from ablate.ablations.results.storage.space import ParamSpace
from ablate.ablations.runtime import environment

HEARTBEAT_S = 5.0
GRACE_S = 60.0


@dataclass
class Queue:
    """The trials of one study in one storage, and the state moves the sweep makes on them."""

    storage: Any
    """The optuna BaseStorage, as `open_storage` opened it."""
    study: Any
    """The optuna.Study on it."""
    _study_id: int | None = field(default=None, repr=False)

    @classmethod
    def open(cls, url: str, name: str) -> Queue:
        storage = open_storage(url)
        return cls(storage, load_or_create(storage, name))

    def trial_id(self, trial: Any) -> int:
        """The storage's id of a trial (FrozenTrial or Trial), through public storage calls."""
        if self._study_id is None:
            self._study_id = self.storage.get_study_id_from_name(self.study.study_name)
        return self.storage.get_trial_id_from_study_id_trial_number(self._study_id, trial.number)

    def set_attr(self, trial: Any, key: str, value: Any) -> None:
        self.storage.set_trial_user_attr(self.trial_id(trial), key, value)

    FILES_ATTR = "ablate:files"
    """The study system attribute holding the files its trials share (`ledger.pack_shared`: the references)."""

    def keep_record(self, trial: Any, packed: dict[str, Any], shared: dict[str, str] | None = None) -> None:
        """The trial's packed record (`ledger.pack`), as a system attribute (`ledger.stored_record` reads it), and
        the shared files it names that the study does not hold yet."""
        self.storage.set_trial_system_attr(self.trial_id(trial), ledger.RECORD_ATTR, packed)
        held = self.shared_files()
        if shared and not set(shared) <= set(held):
            study_id = self.storage.get_study_id_from_name(self.study.study_name)
            self.storage.set_study_system_attr(study_id, self.FILES_ATTR, {**shared, **held})

    def shared_files(self) -> dict[str, str]:
        study_id = self.storage.get_study_id_from_name(self.study.study_name)
        return self.storage.get_study_system_attrs(study_id).get(self.FILES_ATTR) or {}

    CORPUS_ATTR = "ablate:corpus"
    """The study system attribute holding each row's corpus fingerprint (`data.fingerprint`, as JSON): what a
    worker on another machine checks its own against before it claims a trial (`ablations.sweep.corpora`)."""

    def corpora(self) -> dict[str, dict[str, Any]]:
        """Row -> the fingerprint the study's trials of that row train on, as the storage keeps it."""
        study_id = self.storage.get_study_id_from_name(self.study.study_name)
        return self.storage.get_study_system_attrs(study_id).get(self.CORPUS_ATTR) or {}

    def remember_corpora(self, found: dict[str, dict[str, Any]]) -> None:
        """Keep the fingerprints of rows the storage has none for (a row's, once kept, never changes)."""
        held = self.corpora()
        if not set(found) <= set(held):
            study_id = self.storage.get_study_id_from_name(self.study.study_name)
            self.storage.set_study_system_attr(study_id, self.CORPUS_ATTR, {**found, **held})

    def complete(self, trial: Any, metrics: dict[str, Any]) -> None:
        """Finish a trial with its objective values from the record's metrics (a missing one is NaN: Optuna then
        fails the trial, as a run without a score should)."""
        names = study_metrics(self.study)
        values = [float(metrics[k]) if metrics.get(k) is not None else float("nan") for k in names]
        self.study.tell(trial.number, values=values)

    def user_attrs(self, trial: Any) -> dict[str, Any]:
        """A trial's user attributes as stored now (not as when it was read)."""
        return self.storage.get_trial_user_attrs(self.trial_id(trial))

    def trials(self, *states: str) -> list[Any]:
        """The study's trials, of the named TrialStates ('WAITING', 'RUNNING', ...) if given."""

        wanted = tuple(_optuna().trial.TrialState[s] for s in states) or None
        return self.study.get_trials(deepcopy=False, states=wanted)

    SPACE_ATTR = "ablate:param_space"
    """The study system attribute holding every parameter's distribution so far (JSON, Optuna's own format)."""

    def settle(self, space: ParamSpace) -> tuple[ParamSpace, list[str]]:
        """`space` on this study's axes (`ParamSpace.settled`), and the study's axes updated to include it."""

        study_id = self.storage.get_study_id_from_name(self.study.study_name)
        raw = self.storage.get_study_system_attrs(study_id).get(self.SPACE_ATTR) or {}
        stored = {name: _optuna().distributions.json_to_distribution(text) for name, text in raw.items()}
        settled, left_out = space.settled(stored)
        merged = {
            **raw,
            **{name: _optuna().distributions.distribution_to_json(d) for name, d in settled.distributions.items()},
        }
        if merged != raw:
            self.storage.set_study_system_attr(study_id, self.SPACE_ATTR, merged)
        return settled, left_out

    def enqueue(
        self, row: str, seed: int, group: str, *, space: ParamSpace | None = None, like: Any = None, **attrs: Any
    ) -> None:
        """Queue a WAITING trial of row x seed, with its parameters from `space` (or copied from the trial `like`,
        which it retries)."""

        if space is not None:
            params = space.params(row, seed)
            distributions = {k: space.distributions[k] for k in params}
        elif like is not None:
            params, distributions = like.params, like.distributions
        else:
            params, distributions = {}, {}
        user_attrs = {"row": row, "seed": seed, "group": group, **attrs}
        self.study.add_trial(
            _optuna().trial.create_trial(
                state=_optuna().trial.TrialState.WAITING,
                params=params,
                distributions=distributions,
                user_attrs=user_attrs,
            )
        )

    def claim(self, rows: Collection[str] | None = None) -> Any | None:
        """Atomically move one queued trial to RUNNING for this worker (the storage arbitrates between workers);
        with `rows` (a sweep's --rows), only a trial of one of those rows: the others stay queued for a sweep that
        names them."""
        # Retries first: a trial stopped mid-run (Ctrl-C, preemption, a dead worker) continues from its checkpoint
        # before new ones start, so a resumed sweep finishes what it had begun.
        waiting = sorted(self.trials("WAITING"), key=lambda t: ("retry_of" not in t.user_attrs, t.number))
        for trial in waiting:
            if rows is not None and trial.user_attrs.get("row") not in rows:
                continue
            claimed = self.claim_trial(trial)
            if claimed is not None:
                return claimed
        return None

    def claim_trial(self, trial: Any) -> Any | None:
        """Move this queued trial to RUNNING for this worker; None if another worker took it first."""

        trial_id = self.trial_id(trial)
        try:
            if not self.storage.set_trial_state_values(trial_id, state=_optuna().trial.TrialState.RUNNING):
                return None
        except _optuna().exceptions.UpdateFinishedTrialError:
            return None
        owner = {"host": socket.gethostname(), "pid": os.getpid(), "heartbeat": time.time()}
        here = environment.here()
        if here.in_job:  # `ablate status` shows the trial's job and its state (the scheduler's launcher asks)
            owner.update(job=here.job, scheduler=here.scheduler)
        for key, value in owner.items():
            self.storage.set_trial_user_attr(trial_id, key, value)
        return self.storage.get_trial(trial_id)

    def retry(self, trial: Any, reason: str = ledger.RETRIED_REASON) -> bool:
        """Fail a RUNNING trial as superseded (closed as 'retried', with `reason` in words) and, for a sweep trial,
        queue it again; its retry resumes from the trial's checkpoint. For a dead worker's trial (`recover_dead`) and
        for one its worker stopped (Ctrl-C, preemption, a full disk). False if another worker finished or failed it
        first."""

        trial_id = self.trial_id(trial)
        try:
            self.storage.set_trial_user_attr(trial_id, "reason", reason)
            self.storage.set_trial_user_attr(trial_id, ledger.CLOSED_AS, "retried")
            self.storage.set_trial_user_attr(trial_id, "retried", True)  # what an older ablate reads
            if not self.storage.set_trial_state_values(trial_id, state=_optuna().trial.TrialState.FAIL):
                return False
        except Exception:  # another worker finished or failed it first
            return False
        key = ledger.trial_key(trial)
        if key is not None:  # a sweep trial is queued again; a tuning trial is failed and the search goes on
            self.enqueue(*key, group=trial.user_attrs.get("group", key[0]), like=trial, retry_of=trial.number)
        return True

    def heartbeat(self, trial: Any) -> Heartbeat:
        return Heartbeat(self.storage, self.trial_id(trial))


def recover_dead(queue: Queue, grace_s: float = GRACE_S) -> list[int]:
    """Fail RUNNING trials whose worker is gone, and queue a retry of each. Returns the failed trial numbers."""
    host = socket.gethostname()
    failed = []
    for trial in queue.trials("RUNNING"):
        attrs = trial.user_attrs
        started = trial.datetime_start.timestamp() if trial.datetime_start else time.time()
        same_host_dead = attrs.get("host") == host and "pid" in attrs and not _pid_alive(int(attrs["pid"]))
        stale = time.time() - (attrs.get("heartbeat") or started) > grace_s
        if (same_host_dead or stale) and queue.retry(trial):
            failed.append(trial.number)
    return failed


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie (killed, not yet reaped by its parent) still answers kill(0): look at its state.
    return environment.process_state(pid) != "Z"


class Heartbeat:
    """Refreshes the trial's 'heartbeat' attribute every few seconds from a daemon thread."""

    def __init__(self, storage, trial_id: int, interval: float = HEARTBEAT_S) -> None:
        self.storage, self.trial_id, self.interval = storage, trial_id, interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="ablate-heartbeat")

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.storage.set_trial_user_attr(self.trial_id, "heartbeat", time.time())
            except Exception:  # the storage may be briefly unreachable; the next beat retries
                pass

    def __enter__(self) -> Heartbeat:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join(timeout=10)


def _optuna():
    """Optuna, imported on first use: this module is loaded by every command's --help, which must not pay for it."""
    import optuna  # lazy: optuna costs ~50 ms (its __init__ loads every submodule); --help needs none of it

    return optuna
