"""Torn journals: the one fault a journal file gets from a worker killed mid-write, cut off before anyone appends.

A worker killed in the middle of Optuna's append leaves the last line cut short. Optuna's reader skips a bad last
line, but the next append lands on the end of it and makes it a bad line in the middle, which Optuna refuses to read
past: every later open fails. So `open_storage` first cuts a torn last record, holding Optuna's own journal lock (no
worker is appending meanwhile), keeps the cut bytes in a side file and says so on stderr (`repair_journal`). It
reads only the tail of the file, whatever its size; the middle is checked by Optuna's own reading
(`journal_storage`), and a bad line there is located (byte offset) only when that reading fails.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

from ablate.data.errors import AblateError

_TAIL_CHUNK = 1 << 16


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


def journal_storage(backend, path: Path):
    """JournalStorage on `backend` (Optuna reads the whole journal here); a bad line in the middle is one AblateError
    line naming its byte offset and the way out."""
    import optuna  # lazy: optuna costs ~50 ms on every --help

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
