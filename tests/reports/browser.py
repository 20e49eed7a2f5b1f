"""Headless Chromium for the page tests, driven by Playwright and pointed at the system browser.

Playwright's own browser downloads are not reachable from the development machines or CI: the browser is Debian's
`chromium` package (.ci/run installs it), found on PATH. Without one, the tests that need it skip.
"""

from __future__ import annotations

import importlib.util
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from playwright.sync_api import Page

_FOUND = next((path for name in ("chromium", "chromium-browser") if (path := shutil.which(name))), None)
_DRIVER = importlib.util.find_spec("playwright") is not None
CHROMIUM = _FOUND if _DRIVER else None
"""The system Chromium, or None (none on PATH, or no Playwright to drive it)."""

MISSING = (
    "no chromium on PATH (Debian: apt-get install chromium; .ci/run installs it)"
    if _DRIVER
    else "Playwright is not installed (pip install -e '.[dev]')"
)
"""The skip reason without one."""

TIMEOUT_MS = 60_000
"""What one page action (load, evaluate, screenshot) may take on a busy 2-core machine."""


class Visit:
    """An open page and what it did since it started loading. (No dataclass: tests/ablations loads this file by path,
    outside sys.modules, where dataclasses cannot resolve its annotations.)"""

    def __init__(self, page: Page) -> None:
        self.page = page
        self.errors: list[str] = []
        """Console errors and failed assertions, uncaught exceptions, and resources that failed to load."""
        self.urls: list[str] = []
        """Every URL the page requested, itself first (Playwright reports no `data:` URL)."""


@contextmanager
def open_page(url: str, width: int = 1500, height: int = 900) -> Iterator[Visit]:
    """`url` in a fresh headless Chromium with a `width` x `height` window, loaded (its load event fired)."""
    from playwright.sync_api import sync_playwright

    if CHROMIUM is None:
        raise RuntimeError(MISSING)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--disable-quic"])
        try:
            page = browser.new_page(viewport={"width": width, "height": height})
            page.set_default_timeout(TIMEOUT_MS)
            visit = Visit(page)
            # "Failed to load resource" and other log entries come as console messages of type "error".
            page.on("console", lambda m: visit.errors.append(m.text) if m.type in ("error", "assert") else None)
            page.on("pageerror", lambda e: visit.errors.append(f"uncaught: {e}"))
            page.on("request", lambda r: visit.urls.append(r.url))
            page.goto(url, wait_until="load")
            yield visit
        finally:
            browser.close()
