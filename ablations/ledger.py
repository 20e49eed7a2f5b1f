"""The results ledger: one home for how a sweep's results are named, written, read and resolved.

A results directory OUT holds, per row x seed of a study (the *key*, `<row>__seed<seed>`):
    OUT/records/<key>.json   the trial's record (config, metrics, curves, state), written atomically
    OUT/hyps/<key>.txt       its dev hypotheses, one per line
The Optuna storage holds the trials; several trials can share a key (a retry after a dead worker, a duplicate
claim by two racing coordinators, a `--retry_failed` rerun). `resolve` is the one rule that says which trial speaks
for a key; sweep, status, tune, compare and reports all go through it. A copy of each record also travels in its
trial's system attributes (`pack`/`unpack`/`stored_record`), so a coordinator on another machine can rebuild OUT.

No torch, Lightning, W&B or Optuna import here: reports import this module (Optuna objects are duck-typed).
"""

from __future__ import annotations

import base64
import gzip
import json
import os
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, BinaryIO, Literal

State = Literal["complete", "failed", "pruned", "pending", "running"]

SEPARATOR = "__seed"
_STATES: dict[str, State] = {
    "WAITING": "pending",
    "RUNNING": "running",
    "COMPLETE": "complete",
    "FAIL": "failed",
    "PRUNED": "pruned",
}
_PRIORITY: tuple[State, ...] = ("failed", "pruned", "complete", "pending", "running")
"""Among the trials of one key that are not superseded, which speaks for it: the highest here, then the latest."""
DUPLICATE_REASON = "duplicate of an earlier trial of the same row"
RETRIED_REASON = "worker died (no heartbeat): retried"


# ------------------------------------------------------------------------------------------------------------ keys
def key_of(row: str, seed: int) -> str:
    """The key of a row x seed: the stem of its record and hypotheses files and the name of its trial directory."""
    return f"{row}{SEPARATOR}{seed}"


def parse_key(stem: str) -> tuple[str, int] | None:
    """(row, seed) of a key, or None if `stem` is not one."""
    row, sep, seed = stem.rpartition(SEPARATOR)
    return (row, int(seed)) if sep and row and seed.isdigit() else None


def record_path(out: Path, row: str, seed: int) -> Path:
    return Path(out) / "records" / f"{key_of(row, seed)}.json"


def hypotheses_path(out: Path, row: str, seed: int) -> Path:
    return Path(out) / "hyps" / f"{key_of(row, seed)}.txt"


def record_paths(out: Path, row: str | None = None) -> list[Path]:
    """Record files in OUT (of one row if given), ordered by row then seed."""
    found = [(parse_key(p.stem), p) for p in (Path(out) / "records").glob("*.json")]
    keyed = [(key, p) for key, p in found if key is not None and (row is None or key[0] == row)]
    return [p for _, p in sorted(keyed, key=lambda kp: kp[0])]


def recorded_rows(out: Path) -> list[str]:
    """Rows that have at least one record in OUT, sorted."""
    return sorted({key[0] for key in (parse_key(p.stem) for p in record_paths(out)) if key})


def budget_label(fraction: float) -> str:
    """A shorter budget (train.budgets) as a fraction of T, the way progress lines, W&B keys and reports name it:
    'T', 'T/2', '3T/4'. (A record's files name it by its steps: hyps/<key>.b<steps>.txt.)"""
    from fractions import Fraction

    share = Fraction(fraction).limit_denominator(64)
    head = "T" if share.numerator == 1 else f"{share.numerator}T"
    return head if share.denominator == 1 else f"{head}/{share.denominator}"


# --------------------------------------------------------------------------------------------- writing, reading
def write_json_atomic(path: Path, payload: Any) -> None:
    """Write JSON so that readers see the old file or the new one, never half of one."""
    write_text_atomic(path, json.dumps(payload, indent=2, sort_keys=False, default=str))


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


_UMASK = _umask()


def write_text_atomic(path: Path, text: str) -> None:
    """Write text so that readers see the old file or the new one, never half of one."""
    data = text.encode("utf-8")
    write_atomic(path, lambda fh: fh.write(data))


def write_atomic(path: Path, write: Callable[[BinaryIO], Any]) -> None:
    """Call `write` on a temp file in the target's directory, fsync it and rename it over `path`: a crash or a full
    disk mid-write leaves the old file whole (and no temp file behind). Checkpoints use it too (torch.save as
    `write`), which is why it takes a writer rather than bytes: a checkpoint is not copied in memory first."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.chmod(tmp, 0o666 & ~_UMASK)  # mkstemp makes it private; the file gets what open() would have given
        with os.fdopen(fd, "wb") as fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException as err:
        Path(tmp).unlink(missing_ok=True)
        cause = _os_error(err)
        if cause is not None and cause.filename is None:  # name the file: "No space left" alone says too little
            raise OSError(cause.errno, cause.strerror, str(path)) from err
        raise


def _os_error(err: BaseException | None) -> OSError | None:
    """The OSError in an exception's chain (torch.save reports a failed write as a RuntimeError on top of one)."""
    for _ in range(8):
        if err is None or isinstance(err, OSError):
            return err
        err = err.__cause__ or err.__context__
    return None


def write_record(out: Path, record: dict[str, Any]) -> Path:
    """Write a trial's record (it names its row and seed) to OUT/records/<key>.json; returns the path."""
    path = record_path(out, record["row"], int(record["seed"]))
    write_json_atomic(path, record)
    return path


def read_record(out: Path, row: str, seed: int) -> dict[str, Any] | None:
    """The record of a row x seed as written, or None if there is none. Reports check its fields themselves."""
    path = record_path(out, row, seed)
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None


PACKED_FILES = ("hypotheses", "test_hypotheses", "sentence_nll")
"""The keys naming a record's own files under OUT, at its top level and in each of its `budgets` (the shorter
budgets scored from the same run), which travel with its copy in the storage (`pack`): what a report on another
machine reads besides the record."""
SHARED_FILES = ("references", "test_references")
"""The record's keys naming files every trial of a study shares (the dev and test references): they travel once per
study (`pack_shared`), not in every trial's copy."""


def pack(record: dict[str, Any], out: Path) -> dict[str, Any]:
    """The record as stored in Optuna: train curve thinned to at most 200 points, its own files (dev and test
    hypotheses, per-sentence NLL, and each budget's) gzip+base64 inline, in `files_gz` beside the keys naming them."""
    packed = dict(record)
    curves = dict(record.get("curves") or {})
    train = curves.get("train") or []
    if len(train) > 200:
        stride = -(-len(train) // 200)
        curves["train"] = train[::stride] + ([train[-1]] if (len(train) - 1) % stride else [])
    packed["curves"] = curves
    packed["files_gz"] = _own_files(record, out)
    if record.get("budgets"):
        packed["budgets"] = [{**budget, "files_gz": _own_files(budget, out)} for budget in record["budgets"]]
    return packed


def _own_files(entry: dict[str, Any], out: Path) -> dict[str, str]:
    """The files a record (or one of its budgets) names under `PACKED_FILES`, key -> gzip+base64."""
    return _packed_files(out, {key: entry.get(key) for key in PACKED_FILES})


def pack_shared(record: dict[str, Any], out: Path) -> dict[str, str]:
    """The shared files a record names (`SHARED_FILES`), relative path -> gzip+base64, for the study's copy."""
    return _packed_files(out, {record.get(key): record.get(key) for key in SHARED_FILES})


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
    record = dict(packed)
    if record_path(out, record["row"], int(record["seed"])).exists():
        return False
    if "hypotheses_gz" in record:  # packed by an older ablate: the dev hypotheses only
        record["files_gz"] = {"hypotheses": record.pop("hypotheses_gz")}
    record = _unpacked_own(record, out)
    if record.get("budgets"):
        record["budgets"] = [_unpacked_own(budget, out) for budget in record["budgets"]]
    write_record(out, record)
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


def stored_record(trial: Any) -> dict[str, Any] | None:
    """The packed record a finished trial carries in the storage (`pack`), or None. Storages written before the
    record moved out of the user attributes keep it there."""
    return trial.system_attrs.get(RECORD_ATTR) or trial.user_attrs.get("record")


# ------------------------------------------------------------------------------------------------ trial states
def trial_key(trial: Any) -> tuple[str, int] | None:
    """(row, seed) of an Optuna trial of a sweep (its user attributes), None for a tuning trial."""
    attrs = trial.user_attrs
    return (str(attrs["row"]), int(attrs["seed"])) if "row" in attrs and "seed" in attrs else None


def trial_state(trial: Any) -> State:
    return _STATES.get(trial.state.name, "pending")


def superseded(trial: Any) -> bool:
    """A trial that another one replaces by design: failed as dead and retried, or closed as a duplicate."""
    attrs = trial.user_attrs
    return bool(attrs.get("retried")) or str(attrs.get("reason") or "").startswith("duplicate")


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
    "budget_label",
    "State",
    "key_of",
    "parse_key",
    "record_path",
    "hypotheses_path",
    "record_paths",
    "write_record",
    "read_record",
    "write_json_atomic",
    "write_text_atomic",
    "write_atomic",
    "pack",
    "unpack",
    "pack_shared",
    "unpack_shared",
    "stored_record",
    "trial_key",
    "trial_state",
    "resolve",
]
