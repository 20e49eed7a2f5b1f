"""The corpus fingerprint: what a prepared corpus is, whatever it was read from.

A cache key (`data.prepare`) says where a corpus came from and with which settings; two machines that read
`gettext:de` compute the same key from different catalogues and get different text. The fingerprint is a hash of
what training and scoring see instead: the encoded splits, the raw dev and test text (sources and references) and
the tokenizer's vocabulary, with the languages (`data.prepare.fingerprint_of`, beside the cache layout it reads).
The same text prepared with the same settings gives the same fingerprint on any machine and from any form of it (the
catalogues, or the plain files `ablate data export` wrote). This module is the plain type alone: records and reports
read it without loading the data pipeline.

The tokenizer enters by its pieces, scores and kinds, not by its model file: SentencePiece writes its thread count
into the file, so the bytes differ between machines with different core counts while the vocabulary does not.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ablate.data.errors import AblateError

FINGERPRINT_VERSION = 1
"""Bump when what the digest covers changes (`data.prepare.fingerprint_of` computes it): every fingerprint changes."""
_SHOWN = 12
"""Hex digits of the digest a message shows (48 bits: two corpora that share them are not met by chance)."""


@dataclass(frozen=True, kw_only=True)
class CorpusFingerprint:
    """The identity of a prepared corpus, as study.json, the storage and every trial record keep it."""

    digest: str
    """blake2b hash of the encoded splits, the raw dev/test text and the tokenizer's vocabulary (hex)."""
    train: int
    """Training pairs after max_len filtering: what a trial trains on."""
    valid: int
    """Dev pairs after filtering: the sentences dev BLEU is scored on."""
    test: int
    """Test pairs after filtering."""
    source: str = field(default="", compare=False)
    """Where the text came from (`gettext:de`; a pinned copy is named by its origin). Not part of the identity."""

    @property
    def short(self) -> str:
        """The digest as messages and captions show it."""
        return self.digest[:_SHOWN]

    def describe(self) -> str:
        """'3f2a9c1d0e4b (gettext:de; train 40518, valid 1039, test 1066 pairs)': what a message names."""
        where = f"{self.source}; " if self.source else ""
        return f"{self.short} ({where}train {self.train}, valid {self.valid}, test {self.test} pairs)"

    def to_json(self) -> dict[str, Any]:
        return {"digest": self.digest, "train": self.train, "valid": self.valid, "test": self.test,
                "source": self.source}  # fmt: skip

    @classmethod
    def from_json(cls, data: Any, where: str | Path) -> CorpusFingerprint | None:
        """The fingerprint a file keeps (None where it keeps none: written before fingerprints); AblateError naming
        the file when it is malformed."""
        if data is None:
            return None
        try:
            return cls(digest=str(data["digest"]), train=int(data["train"]), valid=int(data["valid"]),
                       test=int(data["test"]), source=str(data.get("source") or ""))  # fmt: skip
        except (KeyError, TypeError, ValueError, AttributeError):
            raise AblateError(
                f"{where}: its corpus fingerprint is malformed (expected digest, train, valid, test): restore the "
                "file, or delete the field to have the next sweep record it again"
            ) from None
