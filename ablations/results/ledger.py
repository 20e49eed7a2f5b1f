"""The results ledger: one home for how a sweep's results are written, read and resolved.

A results directory OUT (its paths: `ablations.results.record.Layout`) holds, per row x seed of a study (the *key*,
`<row>__seed<seed>`), the trial's `Record` as OUT/records/<key>.json, written atomically, and the files it names.
The Optuna storage holds the trials; several trials can share a key (a retry after a dead worker, a duplicate
claim by two racing coordinators, a `--retry_failed` rerun). `resolve` is the one rule that says which trial speaks
for a key; sweep, status, tune, compare and reports all go through it. A copy of each record also travels in its
trial's system attributes (`pack`/`unpack`/`stored_copy`), so a coordinator on another machine can rebuild OUT.

No torch, Lightning, W&B or Optuna import here: reports import this module (Optuna objects are duck-typed).
"""

from __future__ import annotations

import base64
import gzip
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path
from typing import Any, Literal

from ablate.ablations.results.record import SEPARATOR, Layout, Record
from ablate.data.atomic import write_atomic, write_json_atomic

State = Literal["complete", "failed", "pruned", "pending", "running"]

_STATES: dict[str, State] = {
    "WAITING": "pending",
    "RUNNING": "running",
    "COMPLETE": "complete",
    "FAIL": "failed",
    "PRUNED": "pruned",
}
_PRIORITY: tuple[State, ...] = ("failed", "pruned", "complete", "pending", "running")
"""Among the trials of one key that are not superseded, which speaks for it: the highest here, then the latest."""

ClosedAs = Literal["duplicate", "retried", "unwanted"]
"""Why a trial was closed by design, not by a failure of its own: a `duplicate` of a live trial of the same row x
seed (two coordinators enqueued it), `retried` (its worker died or stopped it, and it was queued again), or
`unwanted` (the sequential design's looks no longer ask for it: closed unrun). Kept in the trial's `CLOSED_AS` user
attribute, beside the `reason` that says it in words; code branches on this field, never on the words."""
CLOSED_AS = "closed_as"
"""The trial user attribute that holds its `ClosedAs`."""
CLOSED_UNRUN: tuple[ClosedAs, ...] = ("duplicate", "unwanted")
"""The closings in which the trial never ran: not failures (a progress line does not report them as such)."""
DUPLICATE_REASON = "duplicate of an earlier trial of the same row"
RETRIED_REASON = "worker died (no heartbeat): retried"
UNWANTED_REASON = "not asked for by the sequential design's looks: closed unrun"
"""The words shown beside each closing (the `reason` attribute), for readers."""


# ------------------------------------------------------------------------------------------------------------ keys
def parse_key(stem: str) -> tuple[str, int] | None:
    """(row, seed) of a key, or None if `stem` is not one."""
    row, sep, seed = stem.rpartition(SEPARATOR)
    return (row, int(seed)) if sep and row and seed.isdigit() else None


def record_path(out: Path, row: str, seed: int) -> Path:
    return Layout(out).record(row, seed)


def record_paths(out: Path, row: str | None = None) -> list[Path]:
    """Record files in OUT (of one row if given), ordered by row then seed."""
    found = [(parse_key(p.stem), p) for p in Layout(out).records_dir.glob("*.json")]
    keyed = [(key, p) for key, p in found if key is not None and (row is None or key[0] == row)]
    return [p for _, p in sorted(keyed, key=lambda kp: kp[0])]


def recorded_rows(out: Path) -> list[str]:
    """Rows that have at least one record in OUT, sorted."""
    return sorted({key[0] for key in (parse_key(p.stem) for p in record_paths(out)) if key})


# --------------------------------------------------------------------------------------------- writing, reading
def write_record(out: Path, record: Record) -> Record:
    """Write a trial's record to OUT/records/<key>.json; returns it with its path."""
    path = Layout(out).record(record.row, record.seed)
    write_json_atomic(path, record.to_json(Layout(out)))
    return replace(record, path=path)


def read_record(out: Path, row: str, seed: int) -> Record | None:
    """The record of a row x seed, or None if there is none; AblateError naming the file when it is damaged."""
    path = record_path(out, row, seed)
    return Record.read(path, out) if path.is_file() else None


def read_records(out: Path) -> list[Record]:
    """Every record in OUT, by row then seed."""
    return [Record.read(path, out) for path in record_paths(out)]


STOPPED_AT = "stopped_at"
"""A stopped trial's user attribute: the step of the checkpoint its next attempt resumes from (`trial._retry_later`)."""

PACKED_FILES = ("hypotheses", "test_hypotheses", "sentence_nll")
"""The keys naming a record's own files under OUT, at its top level and in each of its `budgets` (the shorter
budgets scored from the same run), which travel with its copy in the storage (`pack`): what a report on another
machine reads besides the record."""
SHARED_FILES = ("references", "test_references")
"""The record's keys naming files every trial of a study shares (the dev and test references): they travel once per
study (`pack_shared`), not in every trial's copy."""


def pack(record: Record, out: Path, *, files: bool = True) -> dict[str, Any]:
    """The record as stored in Optuna: its JSON form (`Record.to_json`), train curve thinned to at most 200 points,
    its own files (dev and test hypotheses, per-sentence NLL, and each budget's) gzip+base64 inline, in `files_gz`
    beside the keys naming them. `files` False: none inline (an archive carries them as files, and a journal without
    them is a small fraction of one with them:
    docs/reference/code-figures.md, "ablations/results/ledger.py")."""
    packed = record.to_json(Layout(out))
    curves = dict(packed.get("curves") or {})
    train = curves.get("train") or []
    if len(train) > 200:
        stride = -(-len(train) // 200)
        curves["train"] = train[::stride] + ([train[-1]] if (len(train) - 1) % stride else [])
    packed["curves"] = curves
    packed["files_gz"] = _own_files(packed, out) if files else {}
    if packed.get("budgets"):
        packed["budgets"] = [
            {**budget, "files_gz": _own_files(budget, out) if files else {}} for budget in packed["budgets"]
        ]
    return packed


def _own_files(entry: dict[str, Any], out: Path) -> dict[str, str]:
    """The files a record (or one of its budgets) names under `PACKED_FILES`, key -> gzip+base64."""
    return _packed_files(out, {key: entry.get(key) for key in PACKED_FILES})


def pack_shared(record: Record, out: Path) -> dict[str, str]:
    """The shared files a record names (`SHARED_FILES`), relative path -> gzip+base64, for the study's copy."""
    names = [Layout(out).relative(getattr(record, key)) for key in SHARED_FILES]
    return _packed_files(out, {name: name for name in names if name})


def unpack_shared(files: dict[str, str], out: Path) -> None:
    """Write the study's shared files (`pack_shared`) that OUT lacks."""
    for relative, data in files.items():
        _unpacked(Path(out) / relative, data)


def _packed_files(out: Path, names: dict[Any, str | None]) -> dict[Any, str]:
    """name -> the file at OUT/relative, gzip+base64, for each (name, relative) whose file exists."""
    packed = {}
    for name, relative in names.items():
        path = Path(out) / relative if relative else None
        if path is not None and path.is_file():
            packed[name] = base64.b64encode(gzip.compress(path.read_bytes())).decode("ascii")
    return packed


def _unpacked(path: Path, data: str) -> None:
    if not path.exists():  # a file OUT has is never overwritten
        content = gzip.decompress(base64.b64decode(data))
        write_atomic(path, lambda fh: fh.write(content))


def unpack(packed: dict[str, Any], out: Path) -> bool:
    """Write a record copied from Optuna (and the files it and its budgets name, where OUT lacks them) into OUT
    unless OUT has the record. True if written."""
    data = dict(packed)
    path = record_path(out, data["row"], int(data["seed"]))
    if path.exists():
        return False
    if "hypotheses_gz" in data:  # packed by an older ablate: the dev hypotheses only
        data["files_gz"] = {"hypotheses": data.pop("hypotheses_gz")}
    data = _unpacked_own(data, out)
    if data.get("budgets"):
        data["budgets"] = [_unpacked_own(budget, out) for budget in data["budgets"]]
    write_record(out, Record.from_json(data, path, Layout(out)))
    return True


def _unpacked_own(entry: dict[str, Any], out: Path) -> dict[str, Any]:
    """A packed record (or budget) without its `files_gz`, whose files are written where OUT lacks them."""
    entry = dict(entry)
    for key, data in (entry.pop("files_gz", None) or {}).items():
        if entry.get(key):
            _unpacked(Path(out) / entry[key], data)
    return entry


RECORD_ATTR = "ablate:record"
"""The trial *system* attribute that holds the packed record: out of the user attributes, which optuna-dashboard
and `optuna trials` print in full."""


def stored_copy(trial: Any) -> dict[str, Any] | None:
    """The packed record a finished trial carries in the storage (`pack`), as stored, or None. Storages written
    before the record moved out of the user attributes keep it there."""
    return trial.system_attrs.get(RECORD_ATTR) or trial.user_attrs.get("record")


def stored_record(trial: Any, out: Path = Path(".")) -> Record | None:
    """The record a finished trial carries in the storage, as a `Record`, or None. Its files are named under `out`
    (the live view, which reads only its metrics and state, leaves the default)."""
    packed = stored_copy(trial)
    if not packed:
        return None
    data = {key: value for key, value in packed.items() if key != "files_gz"}
    return Record.from_json(data, Layout(out).record(data["row"], int(data["seed"])), Layout(out))


# ------------------------------------------------------------------------------------------------ trial states
def trial_key(trial: Any) -> tuple[str, int] | None:
    """(row, seed) of an Optuna trial of a sweep (its user attributes), None for a tuning trial."""
    attrs = trial.user_attrs
    return (str(attrs["row"]), int(attrs["seed"])) if "row" in attrs and "seed" in attrs else None


def trial_state(trial: Any) -> State:
    return _STATES.get(trial.state.name, "pending")


def closed_as(trial: Any) -> ClosedAs | None:
    """Why the trial was closed by design (`ClosedAs`), or None: closed by a failure or an outcome of its own, or not
    closed. Storages written before the field existed are read from what they wrote then, and resolve as they did: a
    `retried` flag, a reason that begins 'duplicate', or the unwanted trials' exact reason."""
    attrs = trial.user_attrs
    if (kind := attrs.get(CLOSED_AS)) in ("duplicate", "retried", "unwanted"):
        return kind
    reason = str(attrs.get("reason") or "")
    if attrs.get("retried"):
        return "retried"
    if reason.startswith("duplicate"):
        return "duplicate"
    return "unwanted" if reason == UNWANTED_REASON else None


def superseded(trial: Any) -> bool:
    """A trial that another one replaces by design (`closed_as` any): failed as dead and retried, closed as a
    duplicate, or closed unrun because the design's looks no longer asked for it (queued again if a later look
    does)."""
    return closed_as(trial) is not None


def closed_unrun(trial: Any) -> bool:
    """A trial closed without running because the sequential design's looks no longer asked for it: not part of the
    study (a status or progress table leaves its key out unless another trial speaks for it)."""
    return closed_as(trial) == "unwanted"


def resolve(trials: Iterable[Any]) -> dict[tuple[str, int], Any]:
    """(row, seed) -> the trial that speaks for it. Superseded trials (retried, duplicates) count only when a key has
    nothing else; then a live trial wins over a finished one, a complete one over a failed one, and among equals the
    latest (highest number)."""
    best: dict[tuple[str, int], tuple[tuple[bool, int, int], Any]] = {}
    for trial in trials:
        key = trial_key(trial)
        if key is None:
            continue
        rank = (not superseded(trial), _PRIORITY.index(trial_state(trial)), trial.number)
        if key not in best or rank > best[key][0]:
            best[key] = (rank, trial)
    return {key: trial for key, (_, trial) in best.items()}


__all__ = [
    "State",
    "parse_key",
    "record_path",
    "record_paths",
    "write_record",
    "read_record",
    "read_records",
    "pack",
    "unpack",
    "pack_shared",
    "unpack_shared",
    "stored_copy",
    "stored_record",
    "trial_key",
    "trial_state",
    "resolve",
    "closed_unrun",
    "recorded_rows",
    "ClosedAs",
    "CLOSED_AS",
    "CLOSED_UNRUN",
    "closed_as",
    "superseded",
]
