"""The code's shape, for architecture reviews: lines per folder, the largest functions and the import circles.

    python -m benchmarks.structure [TREE]    # TREE: a checkout (default: this one)

Reads source with `ast` only; imports nothing from the tree, so it measures an old checkout as well as this one.
An import circle is a strongly connected group of first-party modules, counting imports inside functions too.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

PACKAGES = ("ablations", "lightning_modules", "data", "reports", "benchmarks")
LONGEST = 60


def _module(path: Path, root: Path) -> str:
    name = ".".join(path.relative_to(root).with_suffix("").parts)
    return name.removesuffix(".__init__")


def _imports(tree: ast.AST) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for other in graph[node]:
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for node in graph:
        if node not in index:
            visit(node)
    return found


def measure(root: Path) -> dict:
    lines, functions, imports = {}, [], {}
    for package in (*PACKAGES, "tests"):
        files = sorted((root / package).rglob("*.py"))
        lines[package] = (sum(len(f.read_text(encoding="utf-8").splitlines()) for f in files), len(files))
        if package == "tests":
            continue
        for path in files:
            tree = ast.parse(path.read_text(encoding="utf-8"))
            imports[_module(path, root)] = _imports(tree)
            for node in ast.walk(tree):
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                    size = (node.end_lineno or node.lineno) - node.lineno + 1
                    functions.append((size, f"{path.relative_to(root)}:{node.name}"))
    # `ablate.reports.cells` (one installed name) and `reports.cells` (older checkouts) both name reports/cells.py
    local = {m: {i.removeprefix("ablate.") for i in names} for m, names in imports.items()}
    graph = {m: {i for i in names if i in imports and i != m} for m, names in local.items()}
    functions.sort(reverse=True)
    return {"lines": lines, "functions": functions, "circles": _circles(graph)}


def main(argv: list[str]) -> int:
    root = Path(argv[0] if argv else ".")
    result = measure(root)
    print(f"{root}: lines per folder (.py)")
    for package, (count, files) in result["lines"].items():
        print(f"  {package:<18} {count:>6} lines in {files} files")
    print("largest functions: " + ", ".join(f"{name} {size}" for size, name in result["functions"][:5]))
    over = [f"{name} {size}" for size, name in result["functions"] if size > LONGEST]
    print(f"functions over {LONGEST} lines: {len(over)}" + (f" ({', '.join(over)})" if over else ""))
    print(f"import circles: {len(result['circles'])}" + "".join(f"\n  {' <-> '.join(c)}" for c in result["circles"]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
