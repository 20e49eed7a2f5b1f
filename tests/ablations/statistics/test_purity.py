"""The statistics are functions of numbers (`ablate.ablations.statistics`, rliable's discipline): they import numpy,
scipy, the standard library's pure modules and each other, nothing else; they read and write no file; and they keep no
state in a module (the one memo allowed is `functools.lru_cache` on a function of numbers, which cannot change an
answer). Read from the code with `ast`, so a planted import or file read in a copy of the package fails the check."""

from __future__ import annotations

import ast
import shutil
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[3] / "ablations" / "statistics"
ALLOWED = {
    "__future__", "collections", "dataclasses", "fractions", "functools", "itertools", "math", "typing", "weakref",
    "numpy", "scipy",
}  # fmt: skip
"""Top-level modules a statistics module may import, besides the package itself."""
FILE_CALLS = {"open", "read_text", "read_bytes", "write_text", "write_bytes", "load", "loadtxt", "genfromtxt",
              "fromfile", "save", "savetxt", "tofile", "mkdir", "unlink", "iterdir", "glob", "rglob"}  # fmt: skip
"""Calls that reach the file system (builtins, pathlib's and numpy's)."""


def impurities(package: Path = PACKAGE) -> list[str]:
    """Every import outside `ALLOWED`, call in `FILE_CALLS`, `global` statement and module-level mutable container
    in the package, as 'file:line: what'."""
    found = []
    for path in sorted(package.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        where = f"{path.relative_to(package.parent).as_posix()}"
        for node in ast.walk(tree):
            if isinstance(node, ast.Import | ast.ImportFrom):
                names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
                for name in names:
                    if getattr(node, "level", 0) == 0 and not (name.split(".")[0] in ALLOWED or name.startswith(
                            "ablate.ablations.statistics")):  # fmt: skip
                        found.append(f"{where}:{node.lineno}: imports {name}")
            elif isinstance(node, ast.Call):
                func = node.func
                called = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
                if called in FILE_CALLS:
                    found.append(f"{where}:{node.lineno}: calls {called}(...), which reaches the file system")
            elif isinstance(node, ast.Global):
                found.append(f"{where}:{node.lineno}: global {', '.join(node.names)}")
        for node in tree.body:  # state in the module: a container made when it loads, that calls could fill
            value = node.value if isinstance(node, ast.Assign | ast.AnnAssign) else None
            made = isinstance(value, ast.Dict | ast.List | ast.Set) or (
                isinstance(value, ast.Call)
                and isinstance(value.func, ast.Name)
                and value.func.id in ("dict", "list", "set")
            )
            if made and not _is_all(node):
                found.append(f"{where}:{node.lineno}: a mutable container at module level (state)")
    return found


def _is_all(node: ast.stmt) -> bool:
    targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
    return any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets)


def test_the_statistics_are_pure():
    found = impurities()
    assert not found, "the statistics reach beyond numbers:\n" + "\n".join(found)


def test_the_statistics_import_nothing_of_the_project_but_themselves():
    """The import graph, read as Python loads it: importing the package loads no other module of ablate."""
    import subprocess
    import sys

    code = (
        "import sys; import ablate.ablations.statistics; "
        "print(sorted(m for m in sys.modules if m.startswith('ablate.')"
        " and not m.startswith('ablate.ablations.statistics') and m != 'ablate.ablations'))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "[]", out


@pytest.mark.parametrize(
    ("planted", "said"),
    [
        ("import optuna", "imports optuna"),
        ("from ablate.ablations.results import ledger", "imports ablate.ablations.results"),
        ("from pathlib import Path", "imports pathlib"),
        ("def _read(p):\n    return p.read_text()", "calls read_text(...)"),
        ("def _read(p):\n    with open(p) as fh:\n        return fh.read()", "calls open(...)"),
        ("def _read(p):\n    import numpy as np\n    return np.load(p)", "calls load(...)"),
        ("_SEEN: dict = {}", "a mutable container at module level"),
        ("def _remember(x):\n    global _LAST\n    _LAST = x", "global _LAST"),
    ],
)
def test_a_planted_impurity_fails_the_check(tmp_path, planted, said):
    """Each kind of impurity planted in a copy of the package is found, at its line; the copy as it was passes."""
    copy = tmp_path / "statistics"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    assert not impurities(copy)
    target = copy / "verdicts.py"
    lines = target.read_text(encoding="utf-8").splitlines()
    target.write_text("\n".join([*lines, "", planted, ""]), encoding="utf-8")
    found = impurities(copy)
    assert found and all(f.startswith("statistics/verdicts.py:") for f in found), found
    assert any(said in f for f in found), found
