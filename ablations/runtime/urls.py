"""Storage URLs and their secrets: which storage a command connects to, and a password never shown.

Storage URLs: 'journal:PATH' (the default, a journal file in OUT: safe for several local workers),
'sqlite:///PATH' (one process), 'postgresql://...' (workers on several machines; rewritten to
'postgresql+psycopg2://...', the driver the postgres extra installs). Every command turns what the user gave into
the URL to connect with through `storage_url`: --storage, else $ABLATE_STORAGE, else the URL study.json remembers.
study.json remembers a URL `redact`ed, so a password reaches a process only through --storage or the environment,
and whatever this project prints or writes about a storage (messages, report notes) goes through `redact`/`scrub`.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from urllib.parse import unquote

from ablate.data.errors import AblateError

ENV_VAR = "ABLATE_STORAGE"
"""The storage URL when --storage is not given: how a password reaches a command (and the sweep's workers, which
inherit it) without a command line that `ps` shows or a file that keeps it."""
HIDDEN = "***"
"""What a password is shown as; a remembered URL holding it was redacted and cannot connect."""
_URL_PASSWORD = re.compile(r"(\b[A-Za-z][\w+.-]*://[^\s:/@]*:)[^\s@]+@")
_DSN_PASSWORD = re.compile(r"(\bpassword\s*=\s*)\S+", re.IGNORECASE)


def storage_url(given: str | None, out: Path, remembered: str | None = None) -> str:
    """The storage URL a command connects with: `chosen_url`, else a journal file in OUT (no server, safe for local
    workers)."""
    return chosen_url(given, out, remembered) or f"journal:{out / 'optuna.journal'}"


def chosen_url(given: str | None, out: Path, remembered: str | None = None) -> str | None:
    """The storage the user chose, ready to connect: `given` (--storage), else $ABLATE_STORAGE, else `remembered`
    (study.json's 'storage'); None when there is none. 'postgresql://' gets the psycopg2 driver, whichever way it came.

    A remembered URL whose password was redacted is never used to connect: AblateError saying how to give it. A
    PostgreSQL URL without a password works as well when PGPASSWORD or ~/.pgpass supplies one (psycopg2's libpq reads
    both), and such a URL is remembered as is.
    """
    url = given_url(given)
    if not url and remembered and f":{HIDDEN}@" in remembered:
        raise AblateError(
            f"{out / 'study.json'}: its storage {remembered} keeps no password; pass --storage URL or set "
            f"{ENV_VAR}=URL (the URL the sweep was given)"
        )
    url = url or remembered
    if url:
        check_escaped(url)
    return with_driver(url) if url else None


def given_url(given: str | None) -> str | None:
    """The storage URL the user gave: `given` (--storage), else $ABLATE_STORAGE; None when neither."""
    return given or os.environ.get(ENV_VAR) or None


def check_escaped(url: str) -> None:
    """A URL with more than one '@' before its path has an '@' left unescaped in its user or password: SQLAlchemy
    would take the password's tail as the host, and the driver would print it in its errors. AblateError saying how
    to write it (the password shown as '***')."""
    if "://" not in url:
        return
    authority = url.partition("://")[2].partition("/")[0]
    if authority.count("@") > 1:
        raise AblateError(
            f"storage {redact(url)}: its user or password holds an '@'; write it as %40 (URL-escaped, e.g. "
            "urllib.parse.quote(password, safe='')), or give the password through PGPASSWORD or ~/.pgpass"
        )


def with_driver(url: str) -> str:
    """'postgresql://...' -> 'postgresql+psycopg2://...': SQLAlchemy's own default driver is another package."""
    if url.startswith("postgresql://"):
        return "postgresql+psycopg2://" + url.removeprefix("postgresql://")
    return url


def redact(url: str) -> str:
    """The URL with its password shown as '***' (any scheme, query kept); one without a password is returned as is."""
    if "@" not in url or "://" not in url:
        return url
    parsed = _sqlalchemy_url(url)
    if parsed is not None and "@" not in (parsed.host or ""):
        return parsed.render_as_string(hide_password=True)
    # Not a URL SQLAlchemy reads whole (e.g. an '@' left unescaped in the password): hide up to the last '@'.
    scheme, _, rest = url.partition("://")
    credentials, _, host = rest.rpartition("@")
    user, colon, _ = credentials.partition(":")
    return f"{scheme}://{user}{':' + HIDDEN if colon else ''}@{host}"


def scrub(text: str, url: str | None = None) -> str:
    """An error text with the password of `url` (the storage being opened) hidden wherever it appears, and that of
    any URL or 'password=' in it: drivers and SQLAlchemy may quote the connection string in their messages."""
    for secret in sorted(_passwords(url), key=len, reverse=True):
        text = text.replace(secret, HIDDEN)
    return _DSN_PASSWORD.sub(rf"\g<1>{HIDDEN}", _URL_PASSWORD.sub(rf"\g<1>{HIDDEN}@", text))


def _passwords(url: str | None) -> set[str]:
    """The password of a URL as written and as decoded (empty if it has none)."""
    if not url or "@" not in url or "://" not in url:
        return set()
    credentials = url.partition("://")[2].rpartition("@")[0]
    raw = credentials.partition(":")[2]
    parsed = _sqlalchemy_url(url)
    found = {raw, unquote(raw), (parsed.password if parsed is not None else None) or ""}
    return {p for p in found if p and p != HIDDEN}


def _sqlalchemy_url(url: str):
    """The URL as SQLAlchemy reads it, or None when it cannot."""
    from sqlalchemy.engine import make_url  # lazy: SQLAlchemy costs ~0.2 s, only for a database URL
    from sqlalchemy.exc import ArgumentError  # lazy: SQLAlchemy costs ~0.2 s, only for a database URL

    try:
        return make_url(url)
    except (ArgumentError, ValueError):
        return None
