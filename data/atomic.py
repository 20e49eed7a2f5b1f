"""Files written whole: the one place ablate writes a file atomically (records, results, checkpoints, model files,
reports, cache entries). Every writer goes through `write_atomic`, so a reader never sees half a file and a crash
or a full disk leaves the old one whole."""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO


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
    write_atomic(path, text.encode("utf-8"))


def write_atomic(path: Path, write: Callable[[BinaryIO], Any] | bytes) -> None:
    """Write `write` (bytes, or a function that writes to a binary file) to a temp file in the target's directory,
    fsync it and rename it over `path`: a reader sees the old file or the new one, never half of one, and a crash or a
    full disk mid-write leaves the old file whole (and no temp file behind). A checkpoint is written by torch.save as
    `write`, so it is not copied in memory first."""
    if isinstance(write, bytes | bytearray):
        data = bytes(write)
        write = lambda fh: fh.write(data)  # noqa: E731
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


__all__ = ["write_atomic", "write_json_atomic", "write_text_atomic"]
