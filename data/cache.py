"""Cache keys, content digests and atomic writes: what lets every trial of a sweep reuse one prepared corpus.

A cache entry is trusted only if it was completed: files are written under a temporary name and moved into place with
`os.replace` (atomic on POSIX), and a directory entry is complete only once its `manifest.json`, written last, is
there. An interrupted prepare therefore leaves at most a `*.tmp-*` leftover that no later run reads.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
import uuid
from pathlib import Path

from ablate.data.atomic import write_atomic

MANIFEST = "manifest.json"
_STALE_TMP_S = 24 * 3600


def cache_root(cache_dir: str | None) -> Path:
    """The cache directory: the config's, else $ABLATE_CACHE, else ~/.cache/ablate."""
    root = cache_dir or os.environ.get("ABLATE_CACHE") or Path.home() / ".cache" / "ablate"
    return Path(root).expanduser()


def make_key(*parts: object) -> str:
    """A short stable key for the given JSON-serialisable parts (settings, digests, format versions)."""
    blob = json.dumps(parts, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.blake2b(blob.encode(), digest_size=10).hexdigest()


def content_digest(data: bytes = b"") -> hashlib.blake2b:
    """The hash of file contents (`file_digest`'s): `.hexdigest()` of `content_digest(data)` digests bytes in memory."""
    return hashlib.blake2b(data, digest_size=16)


def file_digest(path: Path, memo_dir: Path) -> str:
    """Digest of a file's contents, memoised by (path, size, mtime, inode): a warm run does not reread WMT files."""
    stat = path.stat()
    memo = memo_dir / "digests" / (make_key(str(path.resolve()), stat.st_size, stat.st_mtime_ns, stat.st_ino) + ".txt")
    if memo.is_file():
        return memo.read_text().strip()
    digest = content_digest()
    with path.open("rb") as handle:
        while chunk := handle.read(1 << 22):
            digest.update(chunk)
    write_atomic(memo, digest.hexdigest().encode())
    return digest.hexdigest()


def _tmp_name(path: Path) -> Path:
    return path.with_name(f"{path.name}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}")


class AtomicDir:
    """Build a cache directory under a temporary name; `commit(manifest)` writes the manifest last and moves it in.

    Use as a context manager: leaving it without `commit` (an exception, Ctrl-C) removes the temporary directory.
    If another process committed the same key first, its (identical) entry wins and ours is dropped.
    """

    def __init__(self, final: Path) -> None:
        self.final = final
        self.tmp = _tmp_name(final)

    def __enter__(self) -> Path:
        self.final.parent.mkdir(parents=True, exist_ok=True)
        _remove_stale_tmp(self.final)
        self.tmp.mkdir()
        return self.tmp

    def commit(self, manifest: dict) -> None:
        (self.tmp / MANIFEST).write_text(json.dumps(manifest, indent=1, sort_keys=True))
        if self.final.exists() and read_manifest(self.final) is None:
            shutil.rmtree(self.final, ignore_errors=True)  # an untrusted leftover (no manifest): replace it
        try:
            os.replace(self.tmp, self.final)
        except OSError:
            if read_manifest(self.final) is None:
                raise

    def __exit__(self, *exc: object) -> None:
        shutil.rmtree(self.tmp, ignore_errors=True)


def read_manifest(directory: Path) -> dict | None:
    """The manifest of a completed cache directory, or None if the entry is missing or incomplete."""
    try:
        return json.loads((directory / MANIFEST).read_text())
    except (OSError, ValueError):
        return None


def _remove_stale_tmp(final: Path) -> None:
    """Remove leftovers of interrupted runs for this entry once they are a day old (a live run may own a young one)."""
    for leftover in final.parent.glob(f"{final.name}.tmp-*"):
        try:
            if time.time() - leftover.stat().st_mtime > _STALE_TMP_S:
                shutil.rmtree(leftover, ignore_errors=True)
        except OSError:
            pass
