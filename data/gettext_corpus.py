"""Parallel text from gettext message catalogues: the English `msgid` beside its translated `msgstr`.

Debian packages ship their translations as `<root>/<LANG>/LC_MESSAGES/*.mo`; a desktop machine holds tens of
thousands of distinct English-German pairs (error messages, option help, menu labels, country and language names),
so a study can run on real text with no network. This module reads the catalogues and cleans the pairs; the source
class around it is `data.sources.GettextSource`.

The .mo files are parsed here with `struct` rather than with `gettext.GNUTranslations`: the standard library decodes
the header as UTF-8 before it has read the header's own charset (so net-tools.mo, a latin-1 catalogue with a
translator's name in latin-1, fails to load), it folds plural forms into tuple keys, and it exposes the entries only
through the private `_catalog`. The format is a fixed table of (length, offset) pairs, read below in a dozen lines.
"""

from __future__ import annotations

import codecs
import hashlib
import logging
import re
import struct
from collections import Counter
from collections.abc import Iterable
from pathlib import Path

CLEANING_VERSION = 1
"""Bump when a cleaning or split rule changes: the corpus fingerprint includes it, so old caches are not reused."""
MAX_WORDS = 50
"""Pairs with more words than this on either side are dropped (option help blocks, not sentences)."""
HELD_OUT = 0.025
"""Share of the (hash-ordered) sources held out for valid and for test each: about 1000 pairs each for German."""

_MAGIC = {b"\xde\x12\x04\x95": "<", b"\x95\x04\x12\xde": ">"}
_CHARSET = re.compile(rb"charset=([\w.:-]+)", re.IGNORECASE)
_ACCELERATOR = re.compile(r"[_&](?=[^\W\d_])")
"""A keyboard-accelerator mark: `_` (GTK) or `&` (Qt, KDE) before a letter, as in `_File` or `Fol_ders`."""
_LETTER = re.compile(r"[^\W\d_]")
_PIPE_CONTEXT = re.compile(r"\A\|[^|\n]*\|")
"""GnuPG's inline context or argument name at the start of a message: `|pinentry-label|_Cancel`, `|N|set ...`."""
_LABEL_WORDS = 6
"""Accelerators are looked for only in labels of at most this many words on each side."""
_WORD_AROUND = r"[\w&]*"
log = logging.getLogger(__name__)


class CatalogueError(ValueError):
    """A .mo file that cannot be read: truncated, not a .mo file, or text that its declared charset cannot decode."""


def read_mo(path: Path) -> list[tuple[str, str]]:
    """Every (msgid, msgstr) entry of one .mo file, decoded with the charset its header declares (UTF-8 if none).

    Entries are returned raw, as gettext stores them: the header has an empty msgid, a context is `ctx\\x04msgid`,
    and a plural entry is `singular\\x00plural` beside its forms joined by `\\x00`.
    """
    raw = path.read_bytes()
    order = _MAGIC.get(raw[:4])
    if order is None:
        raise CatalogueError("not a .mo file (bad magic number)")
    try:
        revision, count, ids_at, strs_at = struct.unpack_from(order + "4I", raw, 4)
        if revision >> 16 > 1:
            raise CatalogueError(f"unknown .mo revision {revision >> 16}")
        entries = []
        for i in range(count):
            id_len, id_at = struct.unpack_from(order + "2I", raw, ids_at + 8 * i)
            str_len, str_at = struct.unpack_from(order + "2I", raw, strs_at + 8 * i)
            if max(id_at + id_len, str_at + str_len) > len(raw):
                raise CatalogueError(f"entry {i} points past the end of the file")
            entries.append((raw[id_at : id_at + id_len], raw[str_at : str_at + str_len]))
    except struct.error:
        raise CatalogueError("truncated (its string tables end early)") from None
    header = next((msgstr for msgid, msgstr in entries if msgid == b""), b"")
    match = _CHARSET.search(header)
    charset = match.group(1).decode() if match and match.group(1) != b"CHARSET" else "utf-8"
    try:
        codecs.lookup(charset)
        return [(msgid.decode(charset), msgstr.decode(charset)) for msgid, msgstr in entries]
    except LookupError:
        raise CatalogueError(f"unknown charset {charset!r} in its header") from None
    except UnicodeDecodeError as err:
        raise CatalogueError(f"text is not valid {charset} as its header declares ({err.reason})") from None


def read_catalogues(paths: Iterable[Path]) -> list[tuple[str, str]]:
    """The entries of every readable catalogue; a corrupt one is skipped with a one-line warning naming it."""
    entries = []
    for path in paths:
        try:
            entries += read_mo(path)
        except (CatalogueError, OSError) as err:
            log.warning("ablate data: warning: skipped %s: %s", path, getattr(err, "strerror", None) or err)
    return entries


def _mark(text: str) -> re.Match | None:
    """The one accelerator mark of a label, or None: text with several `_` or `&` is an identifier or markup."""
    marks = list(_ACCELERATOR.finditer(text))
    return marks[0] if len(marks) == 1 and text.count("_") + text.count("&") == 1 else None


def strip_accelerators(src: str, tgt: str) -> tuple[str, str]:
    """Remove the keyboard-accelerator mark from both sides (`_Save As` / `Speichern _unter` -> no marks).

    A mark is stripped only where both sides are labels (at most 6 words), carry exactly one mark each and the marked
    words differ: translators move the accelerator to a letter of their own word, whereas an identifier such as
    `TAR_OPTIONS`, `restart_lsn` or `AT&T` is copied verbatim, and a side with several underscores (`max_wal_size`)
    is never a label.
    """
    if len(src.split()) > _LABEL_WORDS or len(tgt.split()) > _LABEL_WORDS:
        return src, tgt
    src_mark, tgt_mark = _mark(src), _mark(tgt)
    if src_mark is None or tgt_mark is None or _word_at(src, src_mark) == _word_at(tgt, tgt_mark):
        return src, tgt
    return _drop(src, src_mark), _drop(tgt, tgt_mark)


def _word_at(text: str, mark: re.Match) -> str:
    before = re.search(_WORD_AROUND + r"\Z", text[: mark.start()])
    after = re.match(_WORD_AROUND, text[mark.start() :])
    return (before.group() if before else "") + (after.group() if after else "")


def _drop(text: str, mark: re.Match) -> str:
    return text[: mark.start()] + text[mark.end() :]


def clean_pair(msgid: str, msgstr: str) -> tuple[str, str] | None:
    """One catalogue entry as a sentence pair, or None if it is not one. The rules, in order:

    1. the header entry (empty msgid) and untranslated entries (empty msgstr) are dropped;
    2. plural entries are dropped: their first form is not the singular in every language (Arabic's form 0 is n=0),
       and the singular usually exists as an entry of its own;
    3. a message context (`ctx\\x04msgid`, e.g. `keyboard label\\x04Tab`) is removed from the msgid, and so is
       GnuPG's inline one (`|pinentry-label|_Cancel`, `|N|set LDAP timeout to N seconds`) from either side;
    4. leading and trailing whitespace is stripped; an entry that still spans several lines (an option help block,
       often re-wrapped by the translator) is dropped, and runs of spaces and tabs inside a line become one space;
    5. keyboard accelerators (`_File`, `&File`) are removed from both sides (see `strip_accelerators`);
    6. pairs with no letter on a side (`%s: %s`, `---`) and pairs whose target equals the source (identifiers,
       place and program names the translator kept) are dropped;
    7. pairs longer than MAX_WORDS words on either side are dropped.
    printf placeholders (`%s`, `%1$d`, `%-10s`) and quotes are kept as they are: a model must copy them.
    """
    if not msgid or not msgstr or "\x00" in msgid:
        return None
    src, tgt = (_PIPE_CONTEXT.sub("", text).strip() for text in (msgid.rpartition("\x04")[2], msgstr))
    if "\n" in src or "\n" in tgt:
        return None
    src, tgt = strip_accelerators(" ".join(src.split()), " ".join(tgt.split()))
    if not _LETTER.search(src) or not _LETTER.search(tgt) or src == tgt:
        return None
    if len(src.split()) > MAX_WORDS or len(tgt.split()) > MAX_WORDS:
        return None
    return src, tgt


def deduplicate(pairs: Iterable[tuple[str, str]]) -> dict[str, str]:
    """One translation per source: the most frequent across catalogues, ties broken by the lexicographically first."""
    counts = Counter(pairs)
    best: dict[str, tuple[int, str]] = {}
    for (src, tgt), n in counts.items():
        if src not in best or (-n, tgt) < (-best[src][0], best[src][1]):
            best[src] = (n, tgt)
    return {src: tgt for src, (_, tgt) in sorted(best.items())}


def split_of(src: str) -> str:
    """'test', 'valid' or 'train' from a hash of the source's letters (case folded; digits and punctuation removed).

    The split of a sentence depends on that sentence alone, so adding or removing packages never moves a pair from
    one split to another; near-duplicates (`Cannot open %s` and `cannot open %s:`) land in the same split.
    """
    key = " ".join(re.findall(r"[^\W\d_]+", src.casefold()))
    position = int.from_bytes(hashlib.blake2b(key.encode(), digest_size=8).digest(), "big") / 2**64
    return "test" if position < HELD_OUT else "valid" if position < 2 * HELD_OUT else "train"


def corpus(paths: Iterable[Path]) -> dict[str, list[tuple[str, str]]]:
    """Cleaned, deduplicated pairs of the given catalogues by split, each sorted by source: the same files in any
    order give the same corpus."""
    cleaned = (clean_pair(msgid, msgstr) for msgid, msgstr in read_catalogues(sorted(paths)))
    out: dict[str, list[tuple[str, str]]] = {"train": [], "valid": [], "test": []}
    for src, tgt in deduplicate(pair for pair in cleaned if pair is not None).items():
        out[split_of(src)].append((src, tgt))
    return out
