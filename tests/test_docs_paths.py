"""Nothing names a module, function, file or docs section that does not exist: the docs (README.md, docs/*.md) and
the code's own docstrings and comments are read for

- repository paths (`ablations/statistics/sequential.py`, `tests/ablations/sweep/test_sweep.py`, `docs/speed.md`),
- dotted names of this project (`ablations.statistics.sequential.walk`, `ablate.reports.table`, `reports.load`),
- docs sections named in quotes after their file (docs/method/sequential.md, "The looks"),

and each must resolve: the file exists; the longest prefix of a dotted name is a module and the rest a name defined
in it (a function, class, constant or a class's attribute); the section is a heading of that file. Read with `ast`
and regular expressions; nothing is imported."""

from __future__ import annotations

import ast
import re
from functools import cache
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("ablations", "lightning_modules", "data", "reports", "benchmarks")
DOCS = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
FOLDERS = "ablations|lightning_modules|data|reports|benchmarks|tests|scripts|docs"
PATH = re.compile(rf"(?<![\w/.-])((?:{FOLDERS})/[\w./-]*\w)")
DOTTED = re.compile(r"(?<![\w/.-])(?:ablate\.)?((?:ablations|lightning_modules|reports|benchmarks)(?:\.\w+)+)")
SECTION = re.compile(r"(docs/[\w/-]+\.md),? (?:section )?\"([^\"]+)\"")
SKIP_PATH_PARTS = ("*", "<", "{", "NAME", "...")
"""Paths written as patterns or placeholders (`ablations/commands/<name>.py`, `runs/NAME`), not files."""


@cache
def defined_names(module: Path) -> frozenset[str]:
    """Names a module defines at its top level or in its classes (functions, classes, assignments, imports)."""
    tree = ast.parse(module.read_text(encoding="utf-8"))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
    return frozenset(names)


def module_file(parts: list[str]) -> Path | None:
    base = REPO.joinpath(*parts)
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def resolves(dotted: str) -> bool:
    """True if `dotted` is a module of this repository, or a module and then names defined in it."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        found = module_file(parts[:cut])
        if found is None:
            continue
        rest = parts[cut:]
        if not rest:
            return True
        if rest[0] in defined_names(found):
            return True
        sub = found.parent / rest[0]  # a package's submodule named after it
        return found.name == "__init__.py" and (sub.with_suffix(".py").is_file() or sub.is_dir())
    return False


def headings(doc: Path) -> list[str]:
    return [line.lstrip("#").strip() for line in doc.read_text(encoding="utf-8").splitlines() if line.startswith("#")]


def problems(text: str, where: str) -> list[str]:
    found = []
    for match in PATH.finditer(text):
        path = match.group(1).rstrip(".")
        if any(part in path for part in SKIP_PATH_PARTS) or not (REPO / path.split(":")[0]).exists():
            if not any(part in path for part in SKIP_PATH_PARTS):
                found.append(f"{where}: no such path {path}")
    for match in DOTTED.finditer(text):
        name = match.group(1).rstrip(".")
        if not resolves(name):
            found.append(f"{where}: {name} names no module or name of this repository")
    for match in SECTION.finditer(text):
        doc, title = REPO / match.group(1), match.group(2)
        if doc.is_file() and not any(title.lower() in h.lower() or h.lower() in title.lower() for h in headings(doc)):
            found.append(f'{where}: {match.group(1)} has no section "{title}"')
    return found


def _docstrings_and_comments(path: Path) -> str:
    """A module's docstrings and comments, without its code (a string the program prints is not documentation)."""
    source = path.read_text(encoding="utf-8")
    tree = ast.parse(source)
    texts = [
        node.body[0].value.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
        and isinstance(node.body[0].value.value, str)
    ]
    # attribute docstrings: a string statement right after an assignment
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list):
            for before, after in zip(body, body[1:], strict=False):
                if isinstance(before, ast.Assign | ast.AnnAssign) and isinstance(after, ast.Expr):
                    if isinstance(after.value, ast.Constant) and isinstance(after.value.value, str):
                        texts.append(after.value.value)
    texts += [line.split("#", 1)[1] for line in source.splitlines() if "#" in line and line.strip().startswith("#")]
    return "\n".join(texts)


def test_the_docs_name_only_what_exists():
    found = [p for doc in DOCS for p in problems(doc.read_text(encoding="utf-8"), doc.relative_to(REPO).as_posix())]
    assert not found, "the docs name what does not exist:\n" + "\n".join(found)


def test_the_code_names_only_what_exists():
    found = [
        p
        for folder in PACKAGES
        for path in sorted((REPO / folder).rglob("*.py"))
        for p in problems(_docstrings_and_comments(path), path.relative_to(REPO).as_posix())
    ]
    assert not found, "docstrings and comments name what does not exist:\n" + "\n".join(found)


def test_the_check_finds_what_it_is_for():
    text = (
        "see `ablations/design.py`, `ablations.stats.holm`, `ablations.statistics.sequential.nothing_here`, "
        'docs/method/verdicts.md, "A section nobody wrote"; and `ablations/statistics/sequential.py`, '
        "`ablations.statistics.sequential.walk`, `ablate.reports.table`, `reports.load`"
    )
    assert problems(text, "x") == [
        "x: no such path ablations/design.py",
        "x: ablations.stats.holm names no module or name of this repository",
        "x: ablations.statistics.sequential.nothing_here names no module or name of this repository",
        'x: docs/method/verdicts.md has no section "A section nobody wrote"',
    ]
