"""The one exception type for bad user input, shared by every room of the project.

It lives in `data/` because that is the bottom of the import arrow (data -> lightning_modules -> ablations ->
reports), so every other package may import it. The `ablate` command line prints it as one line and exits 2.
"""

import difflib


class AblateError(Exception):
    """A problem with the user's input (file, field, row or value). The message names it and says what to do."""


class ConfigError(AblateError, ValueError):
    """An invalid configuration value. Also a ValueError, so library users can catch it the usual way."""


def did_you_mean(name: str, choices) -> str:
    """' (did you mean 'X'?)' for the choice closest to a mistyped `name` (difflib's ratio, 0.5 or more: row names are
    two characters, 'B9' to 'B1' is 0.5), else ''."""
    close = difflib.get_close_matches(name, [str(c) for c in choices], n=1, cutoff=0.5)
    return f" (did you mean {close[0]!r}?)" if close else ""


UTF8_BOM = b"\xef\xbb\xbf"
"""UTF-8's byte-order mark: allowed at the start of a text file, and dropped."""
_BOMS = (  # the longest first: UTF-32 LE's mark begins with UTF-16 LE's
    (b"\xff\xfe\x00\x00", "UTF-32 (little-endian)", "utf-32"),
    (b"\x00\x00\xfe\xff", "UTF-32 (big-endian)", "utf-32"),
    (b"\xff\xfe", "UTF-16 (little-endian)", "utf-16"),
    (b"\xfe\xff", "UTF-16 (big-endian)", "utf-16"),
    (b"\x84\x31\x95\x33", "GB18030", "gb18030"),
    (b"\xdd\x73\x66\x73", "UTF-EBCDIC", None),
    (b"\x0e\xfe\xff", "SCSU", None),
    (b"\xfb\xee\x28", "BOCU-1", None),
    (b"\xf7\x64\x4c", "UTF-1", None),
    *((b"+/v" + end, "UTF-7", "utf-7") for end in (b"8", b"9", b"+", b"/")),
)
"""Byte-order marks of encodings other than UTF-8: (mark, the encoding's name, iconv's name for it or None)."""


def foreign_encoding(raw: bytes) -> tuple[str, str, str | None] | None:
    """How the bytes of a text file say they are not UTF-8: (the encoding, what shows it, iconv's name for it) for
    another encoding's byte-order mark, or for UTF-16 without one (ASCII text with every other byte NUL, which would
    otherwise decode as UTF-8 full of NULs); None when nothing does."""
    for mark, name, iconv in _BOMS:
        if raw.startswith(mark):
            return name, f"it starts with the byte-order mark {mark.hex(' ').upper()}", iconv
    head = raw[:4096]
    for parity, order in ((1, "little"), (0, "big")):
        nuls = head[parity::2].count(0)
        if len(head) >= 4 and nuls >= 0.5 * (len(head) // 2) and not head[1 - parity :: 2].count(0):
            return f"UTF-16 ({order}-endian)", "every other byte is NUL, with no byte-order mark", f"utf-16{order[0]}e"
    return None


def not_utf8(path, raw: bytes, start: int | None = None) -> str:
    """Why the file at `path`, whose bytes are `raw`, is not UTF-8 text, and the command that converts it, in one
    sentence: the encoding it announces (`foreign_encoding`), else the line of the first bad byte (at `start`)."""
    found = foreign_encoding(raw)
    if found is not None:
        name, shown, iconv = found
        how = f"e.g. iconv -f {iconv} -t utf-8 {path} > {path}.utf8" if iconv else "e.g. re-save it as UTF-8"
        return f"{path} is {name} text ({shown}), not UTF-8: convert it to UTF-8, {how}"
    at = start or 0
    line = raw.count(b"\n", 0, at) + 1
    return (
        f"{path} line {line} is not valid UTF-8 (byte 0x{raw[at]:02x}): re-encode the file as UTF-8, "
        "e.g. iconv -f latin1 -t utf-8"
    )
