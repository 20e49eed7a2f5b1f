"""The docs are a site by topic, with a README that is a front page: the README opens with the two commands and stays
short; no page of docs/ is organised by date or issue (history is docs/changelog.md's alone); every page is in the
site's navigation, and every page the navigation names exists. The strict build itself (broken links, anchors,
mkdocstrings references, undocumented fields) runs in `make docs`, which `make lint` calls."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs"
DATED = re.compile(r"\b20\d\d-\d\d-\d\d\b|\(issues? \d+|\bissue \d+\)|^\s*#+ .*\bissue \d+", re.IGNORECASE)
HISTORY = {"changelog.md"}
"""Pages that are history by design: what changed, and when."""


def headings(page: Path) -> list[str]:
    text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.DOTALL)  # not a code block's comments
    return [line for line in text.splitlines() if line.startswith("#")]


def pages() -> list[Path]:
    return sorted(p for p in DOCS.rglob("*.md") if p.relative_to(DOCS).as_posix() not in HISTORY)


def nav_pages(nav) -> list[str]:
    found = []
    for item in nav:
        value = next(iter(item.values())) if isinstance(item, dict) else item
        found += nav_pages(value) if isinstance(value, list) else [value]
    return found


def test_the_readme_is_a_front_page_that_opens_with_the_two_commands():
    lines = (REPO / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 200, f"README.md has {len(lines)} lines: move the detail into docs/"
    fence = lines.index("```bash")
    commands = [line.split("#")[0].strip() for line in lines[fence + 1 : lines.index("```", fence)]]
    assert commands == ["make study", "make test"]
    assert fence < 5  # the first thing after the title


def test_no_page_is_organised_by_date_or_issue():
    found = [f"{p.relative_to(REPO)}: {h}" for p in pages() for h in headings(p) if DATED.search(h)]
    assert not found, "headings that date a page or name an issue (history goes in docs/changelog.md):\n" + "\n".join(
        found
    )


def test_every_page_is_in_the_navigation_and_every_navigation_entry_is_a_page():
    config = yaml.load((REPO / "mkdocs.yml").read_text(encoding="utf-8"), Loader=yaml.BaseLoader)
    listed = nav_pages(config["nav"])
    written = sorted(p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md"))
    assert sorted(listed) == written


def test_the_check_finds_what_it_is_for():
    assert DATED.search("## 2026-11-26, later: 53 of 73 trials")
    assert DATED.search("## The third rung (issue 57)")
    assert not DATED.search("## The sequential design: what it guarantees")
    assert nav_pages([{"A": "a.md"}, {"B": ["b/index.md", {"C": "b/c.md"}]}]) == ["a.md", "b/index.md", "b/c.md"]
