"""An exported corpus: a source's splits as plain parallel files, so text that depends on the machine runs anywhere.

`ablate data export DIR` (`data.prepare.export_corpus`) writes `train/valid/test.{src,tgt}`, one sentence a line in
the order the source gave them (before max_len filtering, so the tokenizer trains on the same text), the form
`--data.corpus DIR` reads (`data.sources.DirectorySource`). Its `manifest.json` (`Exported`) names where the text
came from and each file's digest: a directory that carries one is checked against it whenever it is read, so a
missing or edited file stops with one line instead of giving another corpus.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ablate.data.cache import MANIFEST, AtomicDir, content_digest, file_digest, read_manifest
from ablate.data.config import DataConfig
from ablate.data.errors import AblateError

EXPORT_FORMAT = "ablate-corpus-export-1"
"""The manifest's `format`: what tells an export's manifest from a hub download's (`data.sources.HubSource`)."""


@dataclass(frozen=True, kw_only=True)
class Exported:
    """An exported corpus directory, as its manifest.json describes it."""

    directory: Path
    """Where the files are."""
    source: str
    """The --data.corpus it was exported from, e.g. 'gettext:de'."""
    src: str
    """Source language: the suffix of its source-side files."""
    tgt: str
    """Target language."""
    pairs: dict[str, int]
    """Pairs per split as written (before max_len filtering)."""
    files: dict[str, str]
    """File name -> digest of its bytes (`data.cache.file_digest`)."""

    def config_for(self, cfg: DataConfig) -> DataConfig:
        """`cfg`, reading this copy instead of the source it was exported from (in the direction `cfg` asks)."""
        return replace(cfg, corpus=str(self.directory), src=cfg.src or self.src, tgt=cfg.tgt or self.tgt)

    def check(self, memo_dir: Path) -> None:
        """Every file as exported; one line naming the first that is missing or changed, and what to do."""
        for name, expected in sorted(self.files.items()):
            path = self.directory / name
            if not path.is_file():
                raise AblateError(
                    f"missing file {path}: {self.directory} is the corpus exported from {self.source} and its "
                    f"{MANIFEST} lists it; restore the directory as exported (e.g. from the study's archive)"
                )
            if file_digest(path, memo_dir) != expected:
                raise AblateError(
                    f"{path} has changed since it was exported from {self.source} ({MANIFEST} holds its digest): "
                    f"restore it as exported (e.g. from the study's archive), or delete {self.directory / MANIFEST} "
                    "to read the files as they are now, as another corpus"
                )


def read_exported(directory: Path) -> Exported | None:
    """The export in `directory`, or None when it holds none (plain files, a hub download)."""
    manifest = read_manifest(directory)
    if not manifest or manifest.get("format") != EXPORT_FORMAT:
        return None
    try:
        return Exported(
            directory=directory, source=str(manifest["source"]), src=str(manifest["src"]), tgt=str(manifest["tgt"]),
            pairs=dict(manifest["pairs"]), files=dict(manifest["files"]),
        )  # fmt: skip
    except (KeyError, TypeError, ValueError):
        raise AblateError(
            f"{directory / MANIFEST} is not a complete export manifest: restore it as exported, or delete it to "
            "read the files as they are"
        ) from None


def check_new(directory: Path) -> None:
    """An export goes into a new (or empty) directory: one line otherwise, before any work."""
    if directory.exists() and (not directory.is_dir() or any(directory.iterdir())):
        raise AblateError(f"{directory} already exists: export into a new directory (an export never overwrites)")


def write_export(directory: Path, source: str, langs: tuple[str, str], splits: dict[str, Any]) -> None:
    """Write each split's sides as `{split}.{lang}` into a new `directory`, then its manifest, atomically (a
    directory with a manifest is complete). `splits`: split -> `data.sources.Pairs`."""
    check_new(directory)
    if directory.exists():
        directory.rmdir()  # empty: AtomicDir moves the finished directory into its place
    atomic = AtomicDir(directory)
    with atomic as tmp:
        files = {}
        for split, pairs in splits.items():
            for lang, lines in zip(langs, (pairs.src, pairs.tgt), strict=True):
                text = "".join(f"{line}\n" for line in lines).encode("utf-8")
                (tmp / f"{split}.{lang}").write_bytes(text)
                files[f"{split}.{lang}"] = content_digest(text).hexdigest()
        pairs = {split: len(pairs.src) for split, pairs in splits.items()}
        atomic.commit({"format": EXPORT_FORMAT, "source": source, "src": langs[0], "tgt": langs[1], "pairs": pairs,
                       "files": files})  # fmt: skip
