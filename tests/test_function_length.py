"""No function over 60 lines in the packages (../shared/STYLE.md: "functions of hundreds of lines" is what the good
codebases avoid; nanoGPT's longest is 55). Read with `ast`: a function's lines run from its `def` (decorators left
out) to its last statement, docstring and comments included, nested functions counted inside their parent too."""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("data", "lightning_modules", "ablations", "reports", "benchmarks")
MAX_LINES = 60
OWED: dict[str, str] = {}
"""Functions over the limit that someone owes a split, each with why it is not done yet: no new entries."""


def long_functions(root: Path = REPO, limit: int = MAX_LINES) -> list[str]:
    """'path:line name (N lines)' for every function of the packages under `root` longer than `limit` lines."""
    found = []
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
            for node in ast.walk(tree):
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                    lines = (node.end_lineno or node.lineno) - node.lineno + 1
                    if lines > limit:
                        found.append(f"{path.relative_to(root)}:{node.lineno} {node.name} ({lines} lines)")
    return found


def test_no_function_is_over_60_lines():
    found = long_functions()
    owed = [f for f in found if f"{f.split(':')[0]} {f.split()[1]}" in OWED]
    bad = [f for f in found if f not in owed]
    assert not bad, f"functions over {MAX_LINES} lines (split them by what they do):\n" + "\n".join(bad)
    assert len(owed) == len(OWED), "a function in OWED is split now: drop its line"


def test_the_check_finds_a_long_function(tmp_path):
    (tmp_path / "reports").mkdir()
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_LINES))
    (tmp_path / "reports" / "long.py").write_text(f"def short():\n    return 1\n\n\ndef long():\n{body}\n")
    assert long_functions(tmp_path) == [f"reports/long.py:5 long ({MAX_LINES + 1} lines)"]
