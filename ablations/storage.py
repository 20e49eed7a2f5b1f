"""Optuna storages and the trial queue on them: the one module that opens a storage or moves a trial's state.

Storage URLs: 'journal:PATH' (the default, a journal file in OUT: safe for several local workers),
'sqlite:///PATH' (one process), 'postgresql://...' (workers on several machines; rewritten to
'postgresql+psycopg2://...'). `open_storage` opens (and creates) one for a sweep or a tuning run;
`open_existing` opens one read-only for status and reports, so a wrong path never creates an empty journal.

The queue: rows are enqueued as WAITING trials; a worker claims one through the storage's atomic
WAITING -> RUNNING transition; a dead worker's trial is failed and re-enqueued. Optuna's public API has no claim
that does not also create a new trial when none waits (`Study.ask`), so the claim uses the storage's public
`set_trial_state_values`, on trial ids looked up by public storage calls (`Queue.trial_id`): no private attribute
of Optuna is read anywhere.

Liveness is hand-written rather than Optuna's heartbeat because Optuna 5 supports heartbeats only on RDB storages
and the default storage is a journal file; one mechanism then serves journal, SQLite and PostgreSQL alike.
No torch, Lightning or W&B import here (reports use `open_existing`).
"""

from __future__ import annotations

import os
import socket
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ablations import ledger
from data.errors import AblateError

HEARTBEAT_S = 5.0
GRACE_S = 60.0


# ------------------------------------------------------------------------------------------------------ opening
def storage_url(storage: str | None, out: Path) -> str:
    """The storage URL: given, or a journal file in the output directory (no server, safe for local workers)."""
    if storage:
        if storage.startswith("postgresql://"):
            storage = "postgresql+psycopg2://" + storage[len("postgresql://") :]
        return storage
    return f"journal:{out / 'optuna.journal'}"


def open_storage(url: str):
    """An Optuna storage for 'journal:PATH', 'sqlite:///PATH' or 'postgresql+psycopg2://...', created if missing."""
    import optuna

    url = storage_url(url, Path("."))
    if url.startswith("journal:"):
        from optuna.storages.journal import JournalFileBackend

        path = url[len("journal:") :]
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        # Optuna's default file lock, so optuna-dashboard and other Optuna tools can open the same journal safely.
        return optuna.storages.JournalStorage(JournalFileBackend(path))
    try:
        return _rdb_storage(url)
    except ImportError as err:
        raise AblateError(
            f"storage {url.split('@')[-1]}: a driver is missing ({err}); install the postgres extra: "
            "pip install 'ablate[postgres]'"
        ) from None
    except Exception as err:  # sqlalchemy's OperationalError and friends: unreachable or refused
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise AblateError(f"cannot open storage {url.split('@')[-1]}: {first}") from None


def _rdb_storage(url: str, attempts: int = 6):
    """RDBStorage, retried while another worker is creating Optuna's tables in a fresh database at the same moment
    (PostgreSQL then reports a unique violation or an object that already exists)."""
    import optuna

    for attempt in range(attempts):
        try:
            return optuna.storages.RDBStorage(url, engine_kwargs={"pool_pre_ping": True})
        except Exception as err:
            racing = any(s in str(err) for s in ("already exists", "UniqueViolation", "duplicate key"))
            if not racing or attempt == attempts - 1:
                raise
            time.sleep(0.5 + attempt)
    raise AssertionError("unreachable")


def _existing_file(spec: str, out_dir: Path) -> Path | None:
    """A storage file as given, else under OUT (the sweep may have run elsewhere)."""
    path = Path(spec)
    for candidate in (path, out_dir / path, out_dir / path.name):
        if candidate.is_file():
            return candidate
    return None


def open_existing(url: str, out_dir: Path) -> Any:
    """A storage to read (status, reports) for a study.json 'storage' value: FileNotFoundError when its file does
    not exist, never a new empty one."""
    import optuna

    url = storage_url(url, out_dir)
    for scheme in ("journal:", "sqlite:///"):
        if url.startswith(scheme):
            path = _existing_file(url.removeprefix(scheme), out_dir)
            if path is None:
                raise FileNotFoundError(f"{scheme.rstrip(':/')} file {url.removeprefix(scheme)} not found")
            if scheme == "sqlite:///":
                return f"sqlite:///{path}"
            return optuna.storages.JournalStorage(optuna.storages.journal.JournalFileBackend(str(path)))
    return url


def load_or_create(storage, name: str):
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    return optuna.create_study(study_name=name, storage=storage, direction="maximize", load_if_exists=True)


def load_trials(url: str, study_name: str, out_dir: Path) -> list[Any]:
    """Every trial of a study in an existing storage (read-only); raises if it cannot be read."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    return optuna.load_study(study_name=study_name, storage=open_existing(url, out_dir)).get_trials(deepcopy=False)


# -------------------------------------------------------------------------------------------------------- queue
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

    def user_attrs(self, trial: Any) -> dict[str, Any]:
        """A trial's user attributes as stored now (not as when it was read)."""
        return self.storage.get_trial_user_attrs(self.trial_id(trial))

    def trials(self, *states: str) -> list[Any]:
        """The study's trials, of the named TrialStates ('WAITING', 'RUNNING', ...) if given."""
        from optuna.trial import TrialState

        wanted = tuple(TrialState[s] for s in states) or None
        return self.study.get_trials(deepcopy=False, states=wanted)

    def enqueue(self, row: str, seed: int, group: str, **attrs: Any) -> None:
        self.study.enqueue_trial({}, user_attrs={"row": row, "seed": seed, "group": group, **attrs})

    def claim(self) -> Any | None:
        """Atomically move one queued trial to RUNNING for this worker (the storage arbitrates between workers)."""
        from optuna.exceptions import UpdateFinishedTrialError
        from optuna.trial import TrialState

        for trial in self.trials("WAITING"):
            trial_id = self.trial_id(trial)
            try:
                if self.storage.set_trial_state_values(trial_id, state=TrialState.RUNNING):
                    owner = {"host": socket.gethostname(), "pid": os.getpid(), "heartbeat": time.time()}
                    for key, value in owner.items():
                        self.storage.set_trial_user_attr(trial_id, key, value)
                    return self.storage.get_trial(trial_id)
            except UpdateFinishedTrialError:
                continue
        return None

    def fail_dead(self, trial: Any) -> bool:
        """Fail a RUNNING trial whose worker is gone, marked as retried. False if another worker got there first."""
        from optuna.trial import TrialState

        trial_id = self.trial_id(trial)
        try:
            self.storage.set_trial_user_attr(trial_id, "reason", ledger.RETRIED_REASON)
            self.storage.set_trial_user_attr(trial_id, "retried", True)
            return bool(self.storage.set_trial_state_values(trial_id, state=TrialState.FAIL))
        except Exception:  # another worker finished or failed it first
            return False

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
        if not (same_host_dead or stale) or not queue.fail_dead(trial):
            continue
        failed.append(trial.number)
        key = ledger.trial_key(trial)
        if key is not None:  # a sweep trial is queued again; a tuning trial is failed and the search goes on
            queue.enqueue(*key, group=attrs.get("group", key[0]), retry_of=trial.number)
    return failed


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie (killed, not yet reaped by its parent) still answers kill(0): look at its state.
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return True


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
