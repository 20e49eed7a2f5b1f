"""Which trials of a sweep are pending or running, read from its Optuna storage (journal file, SQLite, PostgreSQL).

Records say how finished trials ended; only the storage knows the trials still queued (WAITING) or in flight
(RUNNING). The storage is opened read-only in spirit: a journal or SQLite file that does not exist is never created.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from reports.results import State, TrialStatus

_STATES: dict[str, State] = {
    "WAITING": "pending",
    "RUNNING": "running",
    "COMPLETE": "complete",
    "FAIL": "failed",
    "PRUNED": "pruned",
}
_PRIORITY: tuple[State, ...] = ("failed", "pruned", "complete", "pending", "running")
"""Which trial of a row x seed speaks for it, lowest first."""


def _journal_path(spec: str, out_dir: Path) -> Path | None:
    """The journal file of 'journal:PATH', looked for as given, then under OUT (the sweep may have run elsewhere)."""
    path = Path(spec)
    for candidate in (path, out_dir / path, out_dir / path.name):
        if candidate.is_file():
            return candidate
    return None


def open_storage(url: str, out_dir: Path) -> Any:
    """An Optuna storage for a study.json 'storage' value; FileNotFoundError when its file does not exist."""
    import optuna

    if url.startswith("journal:"):
        path = _journal_path(url.removeprefix("journal:"), out_dir)
        if path is None:
            raise FileNotFoundError(f"journal file {url.removeprefix('journal:')} not found")
        return optuna.storages.JournalStorage(optuna.storages.journal.JournalFileBackend(str(path)))
    if url.startswith("sqlite:///"):
        path = Path(url.removeprefix("sqlite:///"))
        if not path.is_file() and (out_dir / path.name).is_file():
            path = out_dir / path.name
        if not path.is_file():
            raise FileNotFoundError(f"SQLite file {path} not found")
        return f"sqlite:///{path}"
    return url


def read_trial_states(
    storage: str | None, study_name: str, out_dir: Path
) -> tuple[dict[tuple[str, int], TrialStatus], str | None]:
    """(row, seed) -> state of the latest Optuna trial for it, and a one-line note if the storage could not be read.

    Trials are matched by their user attrs 'row' and 'seed'; a failed trial's reason is its user attr 'reason'.
    """
    fallback = "states come from the records only (rows without a record are shown as pending)"
    if not storage:
        return {}, f"study.json names no Optuna storage: {fallback}"
    try:
        import optuna

        optuna.logging.set_verbosity(optuna.logging.WARNING)
        study = optuna.load_study(study_name=study_name, storage=open_storage(storage, out_dir))
        trials = study.get_trials(deepcopy=False)
    except Exception as err:  # any storage problem (missing file, driver, server, unknown study) gives the fallback
        detail = str(err).splitlines()[0] if str(err) else type(err).__name__
        return {}, f"Optuna storage {storage} could not be opened ({detail}): {fallback}"

    # Several trials can share a row x seed (a retry after a dead worker, a duplicate claim): a live one wins over a
    # finished one, a finished one over a failed one, and among equals the latest.
    best: dict[tuple[str, int], tuple[int, int, TrialStatus]] = {}
    for trial in trials:
        row, seed = trial.user_attrs.get("row"), trial.user_attrs.get("seed")
        if row is None or seed is None:
            continue
        state = _STATES.get(trial.state.name, "pending")
        key = (str(row), int(seed))
        candidate = (
            _PRIORITY.index(state),
            trial.number,
            TrialStatus(state=state, reason=trial.user_attrs.get("reason")),
        )
        if key not in best or candidate[:2] > best[key][:2]:
            best[key] = candidate
    return {key: status for key, (_, _, status) in best.items()}, None
