"""The sweep runner: every row x seed of a study as one Optuna trial, resumable, shared by any number of workers.

How "exactly once" holds:
- Rows are enqueued (never sampled: GridSampler can hand one point to two workers). Enqueueing skips keys that
  already have a live trial; two coordinators racing may still enqueue a key twice, so a worker runs a trial only
  if no lower-numbered live trial has the same key, and closes duplicates without training.
- A worker claims a queued trial through the storage's atomic WAITING -> RUNNING transition.
- A trial's record is written (atomically) before the trial is told COMPLETE; a retried trial whose record exists
  is closed from the record, not trained again.
- A dead worker is found by liveness: its heartbeat (a trial user attribute refreshed every few seconds) goes
  stale, or, on the same host, its process id is gone. Its trial is failed and re-enqueued, and the retry resumes
  from the trial's last checkpoint. This is hand-written rather than Optuna's heartbeat because Optuna 5 supports
  heartbeats only on RDB storages, and the default local storage is a journal file (SQLite locks up under several
  local workers); one mechanism then serves journal, SQLite and PostgreSQL alike.
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ablations.studies import Row, Study
from ablations.tracking import write_json_atomic
from data.errors import AblateError
from reports.claims import claims_to_data

HEARTBEAT_S = 5.0
GRACE_S = 60.0
LIVE_STATES = ("WAITING", "RUNNING", "COMPLETE")


def key_of(row: str, seed: int) -> str:
    return f"{row}__seed{seed}"


# ------------------------------------------------------------------------------------------------------- storage
def storage_url(storage: str | None, out: Path) -> str:
    """The storage URL: given, or a journal file in the output directory (no server, safe for local workers)."""
    if storage:
        if storage.startswith("postgresql://"):
            storage = "postgresql+psycopg2://" + storage[len("postgresql://") :]
        return storage
    return f"journal:{out / 'optuna.journal'}"


def open_storage(url: str):
    """An Optuna storage for 'journal:PATH', 'sqlite:///PATH' or 'postgresql+psycopg2://...'."""
    import optuna

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


def load_or_create(storage, name: str):
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    return optuna.create_study(study_name=name, storage=storage, direction="maximize", load_if_exists=True)


# ------------------------------------------------------------------------------------------------------ the plan
@dataclass
class Plan:
    """What one sweep runs: the study, the preset, the seeds, and settings applied to every row."""

    study: Study
    preset: str
    seeds: list[int]
    out: Path
    storage: str
    name: str
    extra: dict[str, dict[str, Any]] = field(default_factory=dict)
    retry_failed: bool = False

    def rows(self) -> list[Row]:
        return list(self.study.rows)

    def keys(self) -> list[tuple[Row, int]]:
        return [(row, seed) for row in self.rows() for seed in self.seeds]

    def run_config(self, row: Row, seed: int):
        return self.study.run_config(row, self.preset, seed, **self.extra)

    def describe(self) -> dict[str, Any]:
        """study.json: what reports read to lay out the table (rows in display order, resolved configs)."""
        return {
            "study": self.study.name,
            "description": self.study.description,
            "preset": self.preset,
            "seeds": self.seeds,
            "storage": self.storage if not self.storage.startswith("postgresql") else _redact(self.storage),
            "optuna_study": self.name,
            "wandb_project": self.run_config(self.rows()[0], self.seeds[0]).tracking.project,
            "claims": claims_to_data(list(self.study.claims)),
            "rows": [
                {
                    "name": row.name,
                    "group": row.group,
                    "overrides": row.flat_overrides(),
                    "paper": row.paper,
                    "config": self.run_config(row, self.seeds[0]).to_dict(),
                }
                for row in self.rows()
            ],
            "created_at": _now(),
        }


def _redact(url: str) -> str:
    head, _, tail = url.rpartition("@")
    if not head:
        return url
    scheme, _, cred = head.partition("://")
    user = cred.split(":")[0]
    return f"{scheme}://{user}:***@{tail}"


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S%z")


# --------------------------------------------------------------------------------------------------- bookkeeping
def trial_key(trial) -> tuple[str, int] | None:
    attrs = trial.user_attrs
    return (attrs["row"], int(attrs["seed"])) if "row" in attrs and "seed" in attrs else None


def enqueue(plan: Plan, study) -> int:
    """Queue every row x seed that has no live trial yet. Returns how many were queued."""
    from optuna.trial import TrialState

    live = {TrialState.WAITING, TrialState.RUNNING, TrialState.COMPLETE}
    if not plan.retry_failed:
        live |= {TrialState.FAIL, TrialState.PRUNED}
    trials = study.get_trials(deepcopy=False)
    have = {trial_key(t) for t in trials if t.state in live and not t.user_attrs.get("retried")}
    queued = 0
    for row, seed in plan.keys():
        if (row.name, seed) in have:
            continue
        study.enqueue_trial({}, user_attrs={"row": row.name, "seed": seed, "group": row.group})
        queued += 1
    return queued


def recover_dead(study, grace_s: float = GRACE_S) -> list[int]:
    """Fail RUNNING trials whose worker is gone, and queue a retry of each. Returns the failed trial numbers."""
    from optuna.trial import TrialState

    storage, host = study._storage, socket.gethostname()
    failed = []
    for trial in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        attrs = trial.user_attrs
        beat = attrs.get("heartbeat")
        started = trial.datetime_start.timestamp() if trial.datetime_start else time.time()
        same_host_dead = attrs.get("host") == host and "pid" in attrs and not _pid_alive(int(attrs["pid"]))
        stale = time.time() - (beat or started) > grace_s
        if not (same_host_dead or stale):
            continue
        try:
            storage.set_trial_user_attr(trial._trial_id, "reason", "worker died (no heartbeat): retried")
            storage.set_trial_user_attr(trial._trial_id, "retried", True)
            if not storage.set_trial_state_values(trial._trial_id, state=TrialState.FAIL):
                continue
        except Exception:  # another worker finished or failed it first
            continue
        failed.append(trial.number)
        key = trial_key(trial)
        if key is None:  # a tuning trial: failed, and the search goes on
            continue
        row, seed = key
        study.enqueue_trial(
            {}, user_attrs={"row": row, "seed": seed, "group": attrs.get("group", row), "retry_of": trial.number}
        )
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


def claim(study) -> Any | None:
    """Atomically move one queued trial to RUNNING for this worker (the storage arbitrates between workers)."""
    from optuna.exceptions import UpdateFinishedTrialError
    from optuna.trial import TrialState

    storage = study._storage
    for trial in study.get_trials(deepcopy=False, states=(TrialState.WAITING,)):
        try:
            if storage.set_trial_state_values(trial._trial_id, state=TrialState.RUNNING):
                storage.set_trial_user_attr(trial._trial_id, "host", socket.gethostname())
                storage.set_trial_user_attr(trial._trial_id, "pid", os.getpid())
                storage.set_trial_user_attr(trial._trial_id, "heartbeat", time.time())
                return storage.get_trial(trial._trial_id)
        except UpdateFinishedTrialError:
            continue
    return None


def is_duplicate(study, trial) -> bool:
    """True if a lower-numbered live trial has the same key: that one is (or will be) the run of this key."""
    from optuna.trial import TrialState

    key = trial_key(trial)
    for other in study.get_trials(deepcopy=False):
        if other.number >= trial.number or trial_key(other) != key:
            continue
        if other.state in (TrialState.WAITING, TrialState.RUNNING, TrialState.COMPLETE):
            return True
    return False


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


# -------------------------------------------------------------------------------------------------------- trials
def run_one(plan: Plan, study, trial) -> str:
    """Run (or close) one claimed trial. Never raises for a failed training: the sweep goes on."""
    from optuna.trial import TrialState

    storage = study._storage
    row_name, seed = trial_key(trial)
    key = key_of(row_name, seed)
    record_path = plan.out / "records" / f"{key}.json"
    if is_duplicate(study, trial):
        storage.set_trial_user_attr(trial._trial_id, "reason", "duplicate of an earlier trial of the same row")
        study.tell(trial.number, state=TrialState.PRUNED)
        return "duplicate"
    if record_path.exists():  # finished earlier; the worker died before telling Optuna
        record = json.loads(record_path.read_text(encoding="utf-8"))
        if record.get("state") == "complete" or not plan.retry_failed:
            _tell(study, trial, record, plan.out)
            return record["state"]

    row = plan.study.row(row_name)
    trial_dir = plan.out / "trials" / key
    started = time.time()
    record: dict[str, Any] = {
        "study": plan.study.name,
        "preset": plan.preset,
        "row": row.name,
        "group": row.group,
        "seed": seed,
        "overrides": row.flat_overrides(),
        "optuna": {"study": plan.name, "trial_number": trial.number},
        "host": socket.gethostname(),
        "started_at": _now(),
    }
    with Heartbeat(storage, trial._trial_id):
        try:
            run = plan.run_config(row, seed)
            record["config"] = run.to_dict()
            result = _train(plan, run, row, seed, trial_dir, started, trial._trial_id)
            record.update(_finished(plan, result, key))
        except Exception as err:  # noqa: BLE001 - a failed trial must never kill the sweep
            record.update(state="failed", reason=_reason(err), metrics={}, hypotheses=None, curves={})
            trial_dir.mkdir(parents=True, exist_ok=True)
            (trial_dir / "error.log").write_text(traceback.format_exc(), encoding="utf-8")
        record["finished_at"] = _now()
        write_json_atomic(record_path, record)
        _tell(study, trial, record, plan.out)
    return record["state"]


def _train(plan: Plan, run, row: Row, seed: int, trial_dir: Path, started: float, trial_id: int):
    from ablations.callbacks import ProgressToStorage
    from ablations.train import train

    wandb_id_file = trial_dir / "wandb_id"
    if not wandb_id_file.exists():
        import uuid

        trial_dir.mkdir(parents=True, exist_ok=True)
        wandb_id_file.write_text(uuid.uuid4().hex[:12], encoding="utf-8")
    name = row.name if len(plan.seeds) == 1 else f"{row.name}-s{seed}"
    wandb_id = wandb_id_file.read_text(encoding="utf-8").strip()
    # Plain DDP relaunches this command once per extra rank; they find their trial here (commands/sweep.py).
    os.environ["ABLATE_DDP_TRIAL"] = json.dumps(
        {
            "run": run.to_dict(),
            "trial_dir": str(trial_dir),
            "name": name,
            "group": plan.study.name,
            "wandb_id": wandb_id,
        }
    )
    return train(
        run,
        trial_dir,
        name=name,
        group=plan.study.name,
        tags=[row.group, plan.preset],
        started_at=started,
        wandb_id=wandb_id,
        callbacks=[ProgressToStorage(plan.storage, plan.name, trial_id)],
        extra_config={
            "study": plan.study.name,
            "row": row.name,
            "group": row.group,
            "seed": seed,
            "preset": plan.preset,
        },
    )


def _finished(plan: Plan, result, key: str) -> dict[str, Any]:
    from ablations.train import write_outputs

    if result is None:
        raise RuntimeError("training returned no result (not rank 0?)")
    paths = write_outputs(result, plan.out, key)
    return {
        "state": "complete",
        "reason": None,
        "metrics": result.metrics,
        "curves": result.curves,
        "wandb": result.wandb,
        **paths,
    }


def _reason(err: BaseException) -> str:
    from lightning_modules.module import TrainingDiverged

    text = " ".join(str(err).split()) or type(err).__name__
    if isinstance(err, TrainingDiverged):
        return f"diverged: {text}"
    if isinstance(err, AblateError):
        return text
    return f"{type(err).__name__}: {text}"[:500]


def _tell(study, trial, record: dict[str, Any], out: Path) -> None:
    from optuna.trial import TrialState

    storage = study._storage
    try:
        # The whole record travels in the storage too, so a coordinator on another machine can rebuild it.
        storage.set_trial_user_attr(trial._trial_id, "record", _portable(record, out))
        if record["state"] == "complete":
            bleu = record["metrics"].get("bleu")
            study.tell(trial.number, values=bleu if bleu is not None else float("nan"))
        else:
            storage.set_trial_user_attr(trial._trial_id, "reason", record.get("reason"))
            study.tell(trial.number, state=TrialState.FAIL)
    except Exception as err:  # told already by a worker that thought this one dead: the record decides
        if "finished" not in str(err).lower():
            raise


# -------------------------------------------------------------------------------------------------------- worker
def work(plan: Plan, *, poll_s: float = 2.0, max_trials: int | None = None, on_trial_end=None) -> dict[str, int]:
    """Claim and run trials until the study has none left (waiting for running ones that might be retried).
    Returns counts of trial outcomes run by this worker."""
    from optuna.trial import TrialState

    storage = open_storage(plan.storage)
    study = load_or_create(storage, plan.name)
    counts: dict[str, int] = {}
    done = 0
    while max_trials is None or done < max_trials:
        recover_dead(study)
        trial = claim(study)
        if trial is None:
            if not study.get_trials(deepcopy=False, states=(TrialState.RUNNING, TrialState.WAITING)):
                break
            time.sleep(poll_s)
            continue
        state = run_one(plan, study, trial)
        counts[state] = counts.get(state, 0) + 1
        done += 1
        if on_trial_end is not None:
            on_trial_end(study)
    return counts


def _portable(record: dict[str, Any], out_dir: Path) -> dict[str, Any]:
    """The record as stored in Optuna: train curve thinned to at most 200 points, hypotheses gzip+base64 inline."""
    import base64
    import gzip

    out = dict(record)
    curves = dict(record.get("curves") or {})
    train = curves.get("train") or []
    if len(train) > 200:
        stride = -(-len(train) // 200)
        curves["train"] = train[::stride] + ([train[-1]] if (len(train) - 1) % stride else [])
    out["curves"] = curves
    hyp = record.get("hypotheses")
    hyp_file = out_dir / hyp if hyp else None
    if hyp_file is not None and hyp_file.is_file():
        out["hypotheses_gz"] = base64.b64encode(gzip.compress(hyp_file.read_bytes())).decode("ascii")
    return out


def sync_records(plan: Plan, study) -> int:
    """Write every finished trial's record that is missing from OUT (run by a worker on another machine) from the
    copy in the storage, and study.json. Returns how many records were written."""
    import base64
    import gzip

    from ablations.tracking import write_text_atomic

    write_json_atomic(plan.out / "study.json", plan.describe())
    written = 0
    for trial in study.get_trials(deepcopy=False):
        record = trial.user_attrs.get("record")
        if not record or trial_key(trial) is None:
            continue
        path = plan.out / "records" / f"{key_of(*trial_key(trial))}.json"
        if path.exists():
            continue
        record = dict(record)
        packed = record.pop("hypotheses_gz", None)
        if packed and record.get("hypotheses"):
            write_text_atomic(plan.out / record["hypotheses"], gzip.decompress(base64.b64decode(packed)).decode())
        write_json_atomic(path, record)
        written += 1
    return written
