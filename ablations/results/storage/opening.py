"""Opening a storage, and the Optuna study on it: the one place that does either.

`open_storage` opens (and creates) one for a sweep or a tuning run, cutting a journal's torn last record first
(`journal.repair_journal`); `open_existing` opens one read-only for status and reports, so a wrong path never
creates an empty journal and a read never changes a file. A study's objectives are named (dev BLEU, dev PPL:
`OBJECTIVES`), so optuna-dashboard and `optuna trials` show what each value is.
"""

from __future__ import annotations

import time
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from ablate.ablations.results.storage.journal import journal_storage, repair_journal
from ablate.ablations.runtime.urls import redact, scrub, with_driver
from ablate.data.errors import AblateError

if TYPE_CHECKING:
    from optuna import Study


def open_storage(url: str):
    """An Optuna storage for 'journal:PATH', 'sqlite:///PATH' or 'postgresql://...', created if missing. A journal's
    torn last record is cut first (`repair_journal`)."""
    url = with_driver(url)
    if url.startswith("journal:"):
        from optuna.storages.journal import JournalFileBackend, JournalFileSymlinkLock  # lazy: optuna, ~50 ms

        path = Path(url.removeprefix("journal:"))
        path.parent.mkdir(parents=True, exist_ok=True)
        # Optuna's default file lock (the backend holds this very object), so optuna-dashboard and other Optuna tools
        # can open the same journal safely, and the repair waits for any append in flight.
        lock = JournalFileSymlinkLock(str(path))
        backend = JournalFileBackend(str(path), lock_obj=lock)  # creates the file if missing
        repair_journal(path, lock)
        return journal_storage(backend, path)
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
    import optuna  # lazy: optuna costs ~50 ms on every --help

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
            from optuna.storages.journal import JournalFileBackend  # lazy: optuna costs ~50 ms on every --help

            return journal_storage(JournalFileBackend(str(path)), path)
    return _open_rdb(url)


OBJECTIVES: dict[str, tuple[str, Literal["maximize", "minimize"]]] = {
    "bleu": ("dev BLEU", "maximize"),
    "ppl": ("dev PPL", "minimize"),
}
"""Each metric a study can optimise: its objective's name (optuna-dashboard shows it: `Study.set_metric_names`) and
direction. A trial's values are the record's final metrics, in the study's order."""
SWEEP_METRICS = ("bleu", "ppl")
"""A sweep study's objectives (the values say where each row x seed ended; nothing is optimised)."""


def named_study(storage, name: str, metrics: tuple[str, ...], **kwargs: Any):
    """The Optuna study `name`, loaded, or created with the objectives `metrics`, named. A loaded study keeps the
    objectives it was made with (`study_metrics` says which)."""
    import optuna  # lazy: optuna costs ~50 ms on every --help

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    directions: list[Literal["maximize", "minimize"]] = [OBJECTIVES[m][1] for m in metrics]
    study = optuna.create_study(study_name=name, storage=storage, directions=directions, load_if_exists=True, **kwargs)
    if study.metric_names is None and [d.name.lower() for d in study.directions] == directions:
        with warnings.catch_warnings():  # "experimental since Optuna 3.2": stable in use, and optuna-dashboard reads it
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            study.set_metric_names([OBJECTIVES[m][0] for m in metrics])
    return study


def study_metrics(study: Study) -> tuple[str, ...]:
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


def load_trials(url: str, study_name: str, out_dir: Path) -> list[Any]:
    """Every trial of a study in an existing storage (read-only); raises if it cannot be read."""
    import optuna  # lazy: optuna costs ~50 ms on every --help

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    return optuna.load_study(study_name=study_name, storage=open_existing(url, out_dir)).get_trials(deepcopy=False)
