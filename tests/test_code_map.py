"""The code map's Layout section (docs/code-map.md, "Layout") names the tree as it is: every repository path it quotes
exists (a module moved without its line there fails here)."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TOP = ("ablations/", "lightning_modules/", "data/", "reports/", "benchmarks/", "tests/", "docs/", "scripts/")


def quoted_paths(section: str) -> list[str]:
    """The `...` spans of a README section that name a file or folder of the repository (a top folder first)."""
    spans = re.findall(r"`([^`\s]+)`", section)
    return sorted({s.split(":")[0] for s in spans if s.startswith(TOP) and "*" not in s and "<" not in s})


def test_every_path_the_layout_section_quotes_exists():
    page = (REPO / "docs" / "code-map.md").read_text(encoding="utf-8")
    section = page[page.index("## Layout") :]
    end = section.find("\n## ", 1)
    section = section if end < 0 else section[:end]
    paths = quoted_paths(section)
    assert len(paths) > 20, paths  # the section quotes the tree; a parse that finds nothing proves nothing
    missing = [p for p in paths if not (REPO / p).exists()]
    assert not missing, f"docs/code-map.md's Layout names paths that are not in the tree: {missing}"
