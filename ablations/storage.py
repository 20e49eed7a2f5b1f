"""Optuna storages and the trial queue on them: the one module that opens a storage or moves a trial's state.

Storage URLs: 'journal:PATH' (the default, a journal file in OUT: safe for several local workers),
'sqlite:///PATH' (one process), 'postgresql://...' (workers on several machines; rewritten to
'postgresql+psycopg2://...', the driver the postgres extra installs). Every command turns what the user gave into
the URL to connect with through `storage_url`: --storage, else $ABLATE_STORAGE, else the URL study.json remembers.
study.json remembers a URL `redact`ed, so a password reaches a process only through --storage or the environment,
and whatever this project prints or writes about a storage (messages, report notes) goes through `redact`/`scrub`.

`open_storage` opens (and creates) one for a sweep or a tuning run; `open_existing` opens one read-only for status
and reports, so a wrong path never creates an empty journal and a read never changes a file.

A torn journal: a worker killed in the middle of Optuna's append leaves the last line cut short. Optuna's reader
skips a bad last line, but the next append lands on the end of it and makes it a bad line in the middle, which
Optuna refuses to read past: every later open fails. So `open_storage` first cuts a torn last record, holding
Optuna's own journal lock (no worker is appending meanwhile), keeps the cut bytes in a side file and says so on
stderr (`repair_journal`). It reads only the tail of the file, whatever its size; the middle is checked by Optuna's
own reading, and a bad line there is located (byte offset) only when that reading fails.

The queue: rows are enqueued as WAITING trials; a worker claims one through the storage's atomic
WAITING -> RUNNING transition; a dead worker's trial is failed and re-enqueued. Optuna's public API has no claim
that does not also create a new trial when none waits (`Study.ask`), so the claim uses the storage's public
`set_trial_state_values`, on trial ids looked up by public storage calls (`Queue.trial_id`): no private attribute
of Optuna is read anywhere.

What optuna-dashboard and `optuna trials` show: each sweep trial carries its row, seed and knobs (every config field
a row of the plan overrides) as *parameters* with fixed distributions (`ParamSpace`), so parallel coordinates,
importance and slice plots work over the knobs; its values are named objectives, dev BLEU (maximize) and dev PPL
(minimize); the dev BLEU of every validation is an intermediate value (learning curves); the bulky record travels
as a system attribute, which neither prints.

Liveness is hand-written rather than Optuna's heartbeat because Optuna 5 supports heartbeats only on RDB storages
and the default storage is a journal file; one mechanism then serves journal, SQLite and PostgreSQL alike.
No torch, Lightning or W&B import here (reports use `open_existing`).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import socket
import sys
import threading
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO
from urllib.parse import unquote

from ablations import ledger
from data.errors import AblateError

HEARTBEAT_S = 5.0
GRACE_S = 60.0
ENV_VAR = "ABLATE_STORAGE"
"""The storage URL when --storage is not given: how a password reaches a command (and the sweep's workers, which
inherit it) without a command line that `ps` shows or a file that keeps it."""
HIDDEN = "***"
"""What a password is shown as; a remembered URL holding it was redacted and cannot connect."""
_URL_PASSWORD = re.compile(r"(\b[A-Za-z][\w+.-]*://[^\s:/@]*:)[^\s@]+@")
_DSN_PASSWORD = re.compile(r"(\bpassword\s*=\s*)\S+", re.IGNORECASE)
_TAIL_CHUNK = 1 << 16


# ---------------------------------------------------------------------------------------------------------- URLs
def storage_url(given: str | None, out: Path, remembered: str | None = None) -> str:
    """The storage URL a command connects with: `chosen_url`, else a journal file in OUT (no server, safe for local
    workers)."""
    return chosen_url(given, out, remembered) or f"journal:{out / 'optuna.journal'}"


def chosen_url(given: str | None, out: Path, remembered: str | None = None) -> str | None:
    """The storage the user chose, ready to connect: `given` (--storage), else $ABLATE_STORAGE, else `remembered`
    (study.json's 'storage'); None when there is none. 'postgresql://' gets the psycopg2 driver, whichever way it came.

    A remembered URL whose password was redacted is never used to connect: AblateError saying how to give it. A
    PostgreSQL URL without a password works as well when PGPASSWORD or ~/.pgpass supplies one (psycopg2's libpq reads
    both), and such a URL is remembered as is.
    """
    url = given or os.environ.get(ENV_VAR)
    if not url and remembered and f":{HIDDEN}@" in remembered:
        raise AblateError(
            f"{out / 'study.json'}: its storage {remembered} keeps no password; pass --storage URL or set "
            f"{ENV_VAR}=URL (the URL the sweep was given)"
        )
    url = url or remembered
    return with_driver(url) if url else None


def with_driver(url: str) -> str:
    """'postgresql://...' -> 'postgresql+psycopg2://...': SQLAlchemy's own default driver is another package."""
    if url.startswith("postgresql://"):
        return "postgresql+psycopg2://" + url.removeprefix("postgresql://")
    return url


def redact(url: str) -> str:
    """The URL with its password shown as '***' (any scheme, query kept); one without a password is returned as is."""
    if "@" not in url or "://" not in url:
        return url
    parsed = _sqlalchemy_url(url)
    if parsed is not None and "@" not in (parsed.host or ""):
        return parsed.render_as_string(hide_password=True)
    # Not a URL SQLAlchemy reads whole (e.g. an '@' left unescaped in the password): hide up to the last '@'.
    scheme, _, rest = url.partition("://")
    credentials, _, host = rest.rpartition("@")
    user, colon, _ = credentials.partition(":")
    return f"{scheme}://{user}{':' + HIDDEN if colon else ''}@{host}"


def scrub(text: str, url: str | None = None) -> str:
    """An error text with the password of `url` (the storage being opened) hidden wherever it appears, and that of
    any URL or 'password=' in it: drivers and SQLAlchemy may quote the connection string in their messages."""
    for secret in sorted(_passwords(url), key=len, reverse=True):
        text = text.replace(secret, HIDDEN)
    return _DSN_PASSWORD.sub(rf"\g<1>{HIDDEN}", _URL_PASSWORD.sub(rf"\g<1>{HIDDEN}@", text))


def _passwords(url: str | None) -> set[str]:
    """The password of a URL as written and as decoded (empty if it has none)."""
    if not url or "@" not in url or "://" not in url:
        return set()
    credentials = url.partition("://")[2].rpartition("@")[0]
    raw = credentials.partition(":")[2]
    parsed = _sqlalchemy_url(url)
    found = {raw, unquote(raw), (parsed.password if parsed is not None else None) or ""}
    return {p for p in found if p and p != HIDDEN}


def _sqlalchemy_url(url: str):
    """The URL as SQLAlchemy reads it, or None when it cannot."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        return make_url(url)
    except (ArgumentError, ValueError):
        return None


# ------------------------------------------------------------------------------------------------------ opening
def open_storage(url: str):
    """An Optuna storage for 'journal:PATH', 'sqlite:///PATH' or 'postgresql://...', created if missing. A journal's
    torn last record is cut first (`repair_journal`)."""
    url = with_driver(url)
    if url.startswith("journal:"):
        from optuna.storages.journal import JournalFileBackend, JournalFileSymlinkLock

        path = Path(url.removeprefix("journal:"))
        path.parent.mkdir(parents=True, exist_ok=True)
        # Optuna's default file lock (the backend holds this very object), so optuna-dashboard and other Optuna tools
        # can open the same journal safely, and the repair waits for any append in flight.
        lock = JournalFileSymlinkLock(str(path))
        backend = JournalFileBackend(str(path), lock_obj=lock)  # creates the file if missing
        repair_journal(path, lock)
        return _journal_storage(backend, path)
    return _open_rdb(url)


def _open_rdb(url: str):
    """RDBStorage; a missing driver or an unreachable server is one AblateError line, with the password hidden."""
    try:
        return _rdb_storage(url)
    except ImportError as err:
        raise AblateError(
            f"storage {redact(url)}: a driver is missing ({scrub(str(err), url)}); install the postgres extra: "
            "pip install 'ablate[postgres]'"
        ) from None
    except Exception as err:  # sqlalchemy's OperationalError and friends: unreachable or refused
        text = scrub(str(err), url).strip()
        first = text.splitlines()[0] if text else type(err).__name__
        raise AblateError(f"cannot open storage {redact(url)}: {first}") from None


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
    not exist, never a new empty one. Nothing is written: a journal's torn last line is left for the next sweep to
    cut, and Optuna's reader skips it meanwhile."""
    url = with_driver(url)
    for scheme in ("journal:", "sqlite:///"):
        if url.startswith(scheme):
            path = _existing_file(url.removeprefix(scheme), out_dir)
            if path is None:
                raise FileNotFoundError(f"{scheme.rstrip(':/')} file {url.removeprefix(scheme)} not found")
            if scheme == "sqlite:///":
                return f"sqlite:///{path}"
            from optuna.storages.journal import JournalFileBackend

            return _journal_storage(JournalFileBackend(str(path)), path)
    return _open_rdb(url)


OBJECTIVES = {"bleu": ("dev BLEU", "maximize"), "ppl": ("dev PPL", "minimize")}
"""Each metric a study can optimise: its objective's name (optuna-dashboard shows it: `Study.set_metric_names`) and
direction. A trial's values are the record's final metrics, in the study's order."""
SWEEP_METRICS = ("bleu", "ppl")
"""A sweep study's objectives (the values say where each row x seed ended; nothing is optimised)."""


def named_study(storage, name: str, metrics: tuple[str, ...], **kwargs: Any):
    """The Optuna study `name`, loaded, or created with the objectives `metrics`, named. A loaded study keeps the
    objectives it was made with (`study_metrics` says which)."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    directions = [OBJECTIVES[m][1] for m in metrics]
    study = optuna.create_study(study_name=name, storage=storage, directions=directions, load_if_exists=True, **kwargs)
    if study.metric_names is None and [d.name.lower() for d in study.directions] == directions:
        with warnings.catch_warnings():  # "experimental since Optuna 3.2": stable in use, and optuna-dashboard reads it
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            study.set_metric_names([OBJECTIVES[m][0] for m in metrics])
    return study


def study_metrics(study) -> tuple[str, ...]:
    """The metrics a study's objectives are: from their names, or ('bleu',) for an unnamed study of one maximised
    objective (what ablate made before objectives were named)."""
    by_name = {label: metric for metric, (label, _) in OBJECTIVES.items()}
    if study.metric_names is not None:
        return tuple(by_name.get(label, label) for label in study.metric_names)
    return ("bleu",) if [d.name.lower() for d in study.directions] == ["maximize"] else ()


def load_or_create(storage, name: str):
    """The sweep's Optuna study (created with named objectives; one made by an older ablate keeps its single BLEU
    objective)."""
    return named_study(storage, name, SWEEP_METRICS)


# ------------------------------------------------------------------------------------------------- parameters
@dataclass(frozen=True)
class ParamSpace:
    """The Optuna parameters of a sweep's trials: 'row' (categorical over the plan's rows, in order), 'seed', and
    every knob ('section.field') that some row overrides, with the row's resolved value. Distributions are fixed
    from the values the plan's rows take (a numeric knob spans min..max, log-scaled when it spans 8x or more, as
    d_model or h do; anything else is categorical), so every trial of a plan shares them and optuna-dashboard plots
    the knobs on common axes."""

    values: dict[str, dict[str, Any]]
    """row -> {knob: value}."""
    seeds: tuple[int, ...]
    distributions: dict[str, Any]

    @classmethod
    def of(cls, values: dict[str, dict[str, Any]], seeds: tuple[int, ...] | list[int]) -> ParamSpace:
        from optuna.distributions import CategoricalDistribution, IntDistribution

        values = {row: {k: _param_value(v) for k, v in knobs.items()} for row, knobs in values.items()}
        seeds = tuple(seeds)
        knobs = list(dict.fromkeys(k for row in values.values() for k in row))
        distributions: dict[str, Any] = {
            "row": CategoricalDistribution(list(values)),
            "seed": IntDistribution(min(seeds), max(seeds)),
        }
        for knob in knobs:
            distributions[knob] = _distribution([row.get(knob) for row in values.values()])
        return cls(values, seeds, distributions)

    def params(self, row: str, seed: int) -> dict[str, Any]:
        """The trial's parameters: those its distributions can hold (`settled` may leave a new row's name or a knob
        out: see there)."""
        wanted = {"row": row, "seed": seed, **self.values[row]}
        return {k: v for k, v in wanted.items() if k in self.distributions and _holds(self.distributions[k], v)}

    def settled(self, stored: dict[str, Any]) -> tuple[ParamSpace, list[str]]:
        """This plan's space on the axes a study already has (`stored`: name -> distribution, what earlier plans of
        the study set), and what it cannot put there. An RDB storage refuses a parameter whose categorical choices or
        log scale differ from earlier trials' (Optuna: "dynamic value space"), so a study keeps its axes: numeric
        ones widen to take new values; a categorical one cannot grow, so a new choice (a row added to the study
        since it began) is left out of that trial's parameters, and a knob whose kind changed (a number where text
        was) is left out altogether. Returns the space and a line per parameter left out, for the user."""
        from optuna.distributions import CategoricalDistribution

        settled, left_out = dict(self.distributions), []
        for name, new in self.distributions.items():
            old = stored.get(name)
            if old is None:
                continue
            if isinstance(old, CategoricalDistribution) and isinstance(new, CategoricalDistribution):
                settled[name] = old
                extra = [c for c in new.choices if c not in old.choices]
                if extra:
                    left_out.append(f"{name} = {', '.join(map(str, extra))} (new since the study began)")
                continue
            widens = (type(old), type(new)) in _widens() and not (old.log and min(old.low, new.low) <= 0)
            if widens:  # the axis keeps its kind and scale and widens to the new values
                settled[name] = type(old)(min(old.low, new.low), max(old.high, new.high), log=old.log)
            else:
                del settled[name]
                left_out.append(f"{name} (its kind changed since the study began)")
        return ParamSpace(self.values, self.seeds, settled), left_out


def _widens() -> set[tuple[type, type]]:
    from optuna.distributions import FloatDistribution, IntDistribution

    return {
        (FloatDistribution, FloatDistribution),
        (FloatDistribution, IntDistribution),
        (IntDistribution, IntDistribution),
    }


def _holds(distribution: Any, value: Any) -> bool:
    from optuna.distributions import CategoricalDistribution

    if isinstance(distribution, CategoricalDistribution):
        return value in distribution.choices
    return (
        isinstance(value, (int, float))
        and not isinstance(value, bool)
        and distribution.low <= value <= distribution.high
    )


def _param_value(value: Any) -> Any:
    """A config value as an Optuna parameter can hold it (None, bool, int, float, str)."""
    return value if value is None or isinstance(value, (bool, int, float, str)) else json.dumps(value)


def _distribution(values: list[Any]) -> Any:
    from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution

    numbers = [v for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)]
    if len(numbers) == len(values):
        low, high = min(numbers), max(numbers)
        log = low > 0 and high >= 8 * low
        if all(isinstance(v, int) for v in numbers):
            return IntDistribution(int(low), int(high), log=log)
        return FloatDistribution(float(low), float(high), log=log)
    return CategoricalDistribution(list(dict.fromkeys(values)))


def load_trials(url: str, study_name: str, out_dir: Path) -> list[Any]:
    """Every trial of a study in an existing storage (read-only); raises if it cannot be read."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    return optuna.load_study(study_name=study_name, storage=open_existing(url, out_dir)).get_trials(deepcopy=False)


# ------------------------------------------------------------------------------------------------ torn journals
def repair_journal(path: Path, lock) -> Path | None:
    """Cut a torn last record off a journal (its writer died mid-append), holding `lock`, Optuna's journal lock, so
    no worker appends meanwhile. The cut bytes go to a side file, named in one line on stderr. Returns the side
    file, or None when the journal ends with a whole record. Reads only the tail of the file. A lock left behind by
    the killed writer is taken over after Optuna's grace period (30 s), as Optuna's own next append would."""
    with _held(lock), open(path, "r+b") as fh:
        size = fh.seek(0, os.SEEK_END)
        cut = _torn_start(fh, size)
        if cut == size:
            return None
        fh.seek(cut)
        torn = fh.read()
        side = _side_file(path)
        with open(side, "xb") as kept:  # kept, and on disk, before the journal is cut
            kept.write(torn)
            kept.flush()
            os.fsync(kept.fileno())
        fh.truncate(cut)
        os.fsync(fh.fileno())
    print(
        f"ablate: {path}: cut a torn last record ({len(torn)} bytes from byte {cut}, left by a process that died "
        f"while writing it); the bytes are kept in {side}",
        file=sys.stderr,
    )
    return side


@contextmanager
def _held(lock) -> Iterator[None]:
    lock.acquire()
    try:
        yield
    finally:
        lock.release()


def _torn_start(fh: BinaryIO, size: int) -> int:
    """Where a journal's torn last record starts: at the bytes after the last newline, or at the last line if it is
    not a JSON object (Optuna writes one JSON object per line). `size` when the journal ends whole."""
    cut = _line_start(fh, size)
    if cut > 0:
        start = _line_start(fh, cut - 1)
        fh.seek(start)
        if not _is_record(fh.read(cut - start)):
            cut = start
    return cut


def _line_start(fh: BinaryIO, end: int) -> int:
    """The offset just after the last newline in the first `end` bytes (0 if none), read backwards in chunks."""
    pos = end
    while pos > 0:
        step = min(_TAIL_CHUNK, pos)
        fh.seek(pos - step)
        found = fh.read(step).rfind(b"\n")
        if found >= 0:
            return pos - step + found + 1
        pos -= step
    return 0


def _is_record(line: bytes) -> bool:
    try:
        return isinstance(json.loads(line), dict)
    except ValueError:  # JSONDecodeError, or bytes that are not text
        return False


def _side_file(path: Path) -> Path:
    """A new file beside the journal for the bytes cut off it: optuna.journal.torn-<time>[-n]."""
    stem = f"{path.name}.torn-{time.strftime('%Y%m%dT%H%M%S')}"
    side, n = path.with_name(stem), 1
    while side.exists():
        n += 1
        side = path.with_name(f"{stem}-{n}")
    return side


def _journal_storage(backend, path: Path):
    """JournalStorage on `backend` (Optuna reads the whole journal here); a bad line in the middle is one AblateError
    line naming its byte offset and the way out."""
    import optuna

    try:
        return optuna.storages.JournalStorage(backend)
    except ValueError:  # json.JSONDecodeError, or Optuna's "Invalid log format."
        offset = _bad_record(path)
        if offset is None:
            raise
        quoted = shlex.quote(str(path))
        raise AblateError(
            f"{path}: the Optuna journal is damaged at byte {offset} (a line that is not JSON, with records after it); "
            f"recover with `mv {quoted} {quoted}.damaged` and rerun the same `ablate sweep` command: finished rows "
            f"are read back from {path.parent / 'records'}, not trained again"
        ) from None


def _bad_record(path: Path) -> int | None:
    """The byte offset of the first line that is not a JSON object and has lines after it (where Optuna stops
    reading), or None."""
    offset, bad = 0, None
    with open(path, "rb") as fh:
        for line in fh:
            if bad is not None:
                return bad
            if not line.endswith(b"\n") or not _is_record(line):
                bad = offset
            offset += len(line)
    return None


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
        from optuna.trial import TrialState

        wanted = tuple(TrialState[s] for s in states) or None
        return self.study.get_trials(deepcopy=False, states=wanted)

    SPACE_ATTR = "ablate:param_space"
    """The study system attribute holding every parameter's distribution so far (JSON, Optuna's own format)."""

    def settle(self, space: ParamSpace) -> tuple[ParamSpace, list[str]]:
        """`space` on this study's axes (`ParamSpace.settled`), and the study's axes updated to include it."""
        from optuna.distributions import distribution_to_json, json_to_distribution

        study_id = self.storage.get_study_id_from_name(self.study.study_name)
        raw = self.storage.get_study_system_attrs(study_id).get(self.SPACE_ATTR) or {}
        stored = {name: json_to_distribution(text) for name, text in raw.items()}
        settled, left_out = space.settled(stored)
        merged = {**raw, **{name: distribution_to_json(d) for name, d in settled.distributions.items()}}
        if merged != raw:
            self.storage.set_study_system_attr(study_id, self.SPACE_ATTR, merged)
        return settled, left_out

    def enqueue(
        self, row: str, seed: int, group: str, *, space: ParamSpace | None = None, like: Any = None, **attrs: Any
    ) -> None:
        """Queue a WAITING trial of row x seed, with its parameters from `space` (or copied from the trial `like`,
        which it retries)."""
        from optuna.trial import TrialState, create_trial

        if space is not None:
            params = space.params(row, seed)
            distributions = {k: space.distributions[k] for k in params}
        elif like is not None:
            params, distributions = like.params, like.distributions
        else:
            params, distributions = {}, {}
        user_attrs = {"row": row, "seed": seed, "group": group, **attrs}
        self.study.add_trial(
            create_trial(state=TrialState.WAITING, params=params, distributions=distributions, user_attrs=user_attrs)
        )

    def claim(self) -> Any | None:
        """Atomically move one queued trial to RUNNING for this worker (the storage arbitrates between workers)."""
        from optuna.exceptions import UpdateFinishedTrialError
        from optuna.trial import TrialState

        # Retries first: a trial stopped mid-run (Ctrl-C, preemption, a dead worker) continues from its checkpoint
        # before new ones start, so a resumed sweep finishes what it had begun.
        waiting = sorted(self.trials("WAITING"), key=lambda t: ("retry_of" not in t.user_attrs, t.number))
        for trial in waiting:
            trial_id = self.trial_id(trial)
            try:
                if self.storage.set_trial_state_values(trial_id, state=TrialState.RUNNING):
                    owner = {"host": socket.gethostname(), "pid": os.getpid(), "heartbeat": time.time()}
                    job = _slurm_job()
                    if job:  # `ablate status` shows the trial's SLURM job and its state
                        owner["slurm_job"] = job
                    for key, value in owner.items():
                        self.storage.set_trial_user_attr(trial_id, key, value)
                    return self.storage.get_trial(trial_id)
            except UpdateFinishedTrialError:
                continue
        return None

    def retry(self, trial: Any, reason: str = ledger.RETRIED_REASON) -> bool:
        """Fail a RUNNING trial as superseded (`reason`, 'retried') and, for a sweep trial, queue it again; its
        retry resumes from the trial's checkpoint. For a dead worker's trial (`recover_dead`) and for one its worker
        stopped (Ctrl-C, preemption, a full disk). False if another worker finished or failed it first."""
        from optuna.trial import TrialState

        trial_id = self.trial_id(trial)
        try:
            self.storage.set_trial_user_attr(trial_id, "reason", reason)
            self.storage.set_trial_user_attr(trial_id, "retried", True)
            if not self.storage.set_trial_state_values(trial_id, state=TrialState.FAIL):
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


def _slurm_job() -> str | None:
    """This process's SLURM job ('<array job>_<task>' in an array), or None outside SLURM."""
    array, task = os.environ.get("SLURM_ARRAY_JOB_ID"), os.environ.get("SLURM_ARRAY_TASK_ID")
    return f"{array}_{task}" if array and task else os.environ.get("SLURM_JOB_ID")


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
