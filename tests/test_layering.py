"""The layering of ../shared/STYLE.md as a test, read from the code with `ast` (nothing is imported).

Data flows one way: data -> lightning_modules -> ablations -> reports, benchmarks. A module imports only from its own
folder or the ones before it; reports and benchmarks, the two ends, never import each other; no modules import each
other in a circle. Every import counts: at the top of a file, inside a function, under `if TYPE_CHECKING:`.

reports reads finished results only and never imports training code: no module that reports reaches, through any
chain of imports, imports torch or Lightning when it is loaded (its records, ledger, storages, claims and configs
are what it may read), and reports itself imports neither anywhere.

A dependency written as a string is still a dependency: a module of this repository named in a string
("ablate.reports.table", "ablate.reports.sequential:judge") counts as an import of it for the direction of the
layers, and `importlib.import_module` or `__import__` is called only by the registries that find modules by name
(`REGISTRIES`): the CLI entry, where every layer may be reached (`ablate report` is dispatched from
ablations/cli.py by name), and the plug-ins found by package path (launchers, report formats).
"""

from __future__ import annotations

import ast
import io
import re
import shutil
import tokenize
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
LAYERS = {"data": 0, "lightning_modules": 1, "ablations": 2, "reports": 3, "benchmarks": 3}
TRAINING_LIBRARIES = ("torch", "pytorch_lightning", "lightning")
FACES = {
    "ablate.ablations.results": "the results store: records, ledger, a study folder read back, scores, evidence",
    "ablate.ablations.statistics": "the statistics: tests, verdicts, the sequential design, trends (numbers only)",
    "ablate.ablations.study": "a study's definition: rows, presets, config sections, claims read from YAML",
    "ablate.ablations.runtime": "what every process shares: its environment, interrupts, storage URLs",
    "ablate.ablations.commands": "the parser every command shares",
    "ablate.ablations.tracking": "the W&B run of a training (a loose module: the report logs beside it)",
}
"""The only modules of ablations/ that reports/ may import: each subpackage's `__init__`, its public face."""
PACKAGE_ORDER = (
    "runtime",
    "statistics",
    "study",
    "results",
    "tracking",
    "training",
    "sweep",
    "launchers",
    "cli",
    "commands",
)
"""ablations/ by job, in the one direction its imports go: a package (or loose module) imports only those before it.
The CLI entry reaches every command by name (`REGISTRIES`), which is a lookup, not an import."""
REGISTRIES = {
    "ablations/cli.py": "the CLI entry: every command by module name (`COMMANDS`), the top, where any layer is reached",
    "ablations/launchers/__init__.py": "plug-ins: every module of the launchers package, by package path",
    "reports/writers.py": "plug-ins: the built-in report formats, modules of reports itself",
}
"""The modules that may import by name, and why. Only the CLI entry may name a module of a later layer."""
NAMED_MODULE = re.compile(r"ablate(\.[A-Za-z_]\w*)+(:[A-Za-z_]\w*)?")
"""A string that names a module of this repository, or a function in one ('module:function')."""


@dataclass(frozen=True)
class Import:
    source: str  # the importing module, e.g. "ablate.reports.cells"
    target: str  # the imported module of this repository, or the top-level name of a library
    where: str  # "reports/cells.py:16"
    top_level: bool  # run when the module is loaded (not inside a function)
    by_name: bool = False  # named in a string ("ablate.reports.table"), not an import statement


def module_name(path: Path, root: Path = REPO) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(["ablate", *(parts[:-1] if parts[-1] == "__init__" else parts)])


def read_modules(root: Path = REPO) -> dict[str, Path]:
    return {module_name(p, root): p for folder in LAYERS for p in sorted((root / folder).rglob("*.py"))}


def _imports(name: str, path: Path, modules: dict[str, Path], root: Path = REPO) -> list[Import]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    in_function: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            in_function.update(id(child) for child in ast.walk(node) if child is not node)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join(up + ([node.module] if node.module else []))
            # `from ablate.ablations.results import ledger` imports the module ablate.ablations.results.ledger
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
        else:
            continue
        where = f"{path.relative_to(root)}:{node.lineno}"
        for target in dict.fromkeys(targets):
            if not target.startswith("ablate."):
                target = target.partition(".")[0]
            found.append(Import(name, target, where, id(node) not in in_function))
    for node in ast.walk(tree):  # modules named in strings: a dependency all the same
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and NAMED_MODULE.fullmatch(node.value):
            target = node.value.partition(":")[0]
            if target.split(".")[1] in LAYERS:
                where = f"{path.relative_to(root)}:{node.lineno}"
                found.append(Import(name, target, where, id(node) not in in_function, by_name=True))
    return found


def read_imports(root: Path = REPO) -> list[Import]:
    modules = read_modules(root)
    return [imp for name, path in modules.items() for imp in _imports(name, path, modules, root)]


def imports_by_name(root: Path = REPO) -> list[str]:
    """Every call of `importlib.import_module` or `__import__` outside `REGISTRIES`: a dependency the reader of the
    imports cannot see, whatever its argument."""
    bad = []
    for path in read_modules(root).values():
        where = path.relative_to(root).as_posix()
        if where in REGISTRIES:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
            if isinstance(node, ast.Call):
                func = node.func
                called = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
                if called in ("import_module", "__import__"):
                    bad.append(f"{where}:{node.lineno}: {called}(...) outside the registries that import by name")
    return bad


def room(module: str) -> str:
    return module.split(".")[1]


def upward_imports(imports: list[Import]) -> list[str]:
    bad = []
    for imp in imports:
        if not imp.target.startswith("ablate."):
            continue
        src, dst = room(imp.source), room(imp.target)
        if imp.by_name and imp.where.partition(":")[0] == "ablations/cli.py":
            continue  # the CLI entry, the top: every layer may be reached from it (`REGISTRIES`)
        if src != dst and LAYERS[dst] >= LAYERS[src]:
            how = "names" if imp.by_name else "imports"
            bad.append(f"{imp.where}: {imp.source} {how} {imp.target} ({src} may not import {dst})")
    return bad


def beyond_the_faces(imports: list[Import]) -> list[str]:
    """Every import of reports/ into ablations/ that is not one of `FACES` (a module inside a subpackage)."""
    return [
        f"{imp.where}: {imp.source} imports {imp.target}, inside a package: import its face"
        for imp in imports
        if room(imp.source) == "reports"
        and imp.target.startswith("ablate.ablations.")
        and imp.target not in FACES
        and not imp.by_name
    ]


def against_the_package_order(imports: list[Import]) -> list[str]:
    """Every import inside ablations/ from one package (or loose module) to one after it in `PACKAGE_ORDER`."""
    rank = {name: i for i, name in enumerate(PACKAGE_ORDER)}
    bad = []
    for imp in imports:
        if imp.by_name or not (
            imp.source.startswith("ablate.ablations.") and imp.target.startswith("ablate.ablations.")
        ):
            continue
        src, dst = imp.source.split(".")[2], imp.target.split(".")[2]
        if src in rank and dst in rank and rank[dst] > rank[src]:
            bad.append(f"{imp.where}: {imp.source} imports {imp.target} ({src} comes before {dst})")
    return bad


def circles(imports: list[Import]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    graph: dict[str, set[str]] = {}
    for imp in (i for i in imports if not i.by_name):  # a registry's names are looked up when called, never loaded
        graph.setdefault(imp.source, set())
        if imp.target.startswith("ablate.") and imp.target != imp.source:
            graph[imp.source].add(imp.target)
            graph.setdefault(imp.target, set())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
            elif child not in index:
                index[child] = low[child] = len(index)
                stack.append(child)
                on_stack.add(child)
                work.append((child, iter(sorted(graph[child]))))
            elif child in on_stack:
                low[node] = min(low[node], index[child])
    return found


def training_code_in_reports(imports: list[Import]) -> list[str]:
    by_source: dict[str, list[Import]] = {}
    for imp in (i for i in imports if not i.by_name):
        by_source.setdefault(imp.source, []).append(imp)
    bad = [
        f"{imp.where}: {imp.source} imports {imp.target}"
        for imp in imports
        if room(imp.source) == "reports" and imp.target in TRAINING_LIBRARIES
    ]
    # Breadth first from every reports module, remembering how each module was reached.
    via: dict[str, str] = {m: m for m in by_source if room(m) == "reports"}
    queue = list(via)
    while queue:
        module = queue.pop(0)
        for imp in by_source.get(module, []):
            if imp.target.startswith("ablate.") and imp.target not in via:
                via[imp.target] = f"{via[module]} -> {imp.target}"
                queue.append(imp.target)
            elif imp.target in TRAINING_LIBRARIES and imp.top_level and room(module) != "reports":
                bad.append(f"{imp.where}: {via[module]} imports {imp.target} when loaded")
    return bad


@pytest.fixture(scope="module")
def imports() -> list[Import]:
    return read_imports()


def test_the_reader_sees_the_imports(imports):
    """A guard for the reader itself: the imports it must see are there."""
    edges = {(i.source, i.target, i.top_level) for i in imports}
    assert ("ablate.reports.cells", "ablate.reports.compare", True) in edges
    assert (
        "ablate.ablations.results.load",
        "ablate.ablations.results.ledger",
        True,
    ) in edges  # `from ablate.ablations import x`
    assert ("ablate.ablations.commands.train", "ablate.ablations.training.train", False) in edges  # in a function
    assert ("ablate.lightning_modules.transformer", "torch", True) in edges


def test_no_module_imports_upward(imports):
    bad = upward_imports(imports)
    assert not bad, "imports against data -> lightning_modules -> ablations -> reports, benchmarks:\n" + "\n".join(bad)


def test_only_the_registries_import_by_name():
    bad = imports_by_name()
    assert not bad, "imports by name (a string) outside REGISTRIES:\n" + "\n".join(bad)


def test_reports_import_only_the_public_faces(imports):
    bad = beyond_the_faces(imports)
    assert not bad, "reports reach inside ablations' packages:\n" + "\n".join(bad)


def test_a_planted_import_beyond_a_face_fails_the_check():
    inside = Import("ablate.reports.table", "ablate.ablations.results.ledger", "reports/table.py:1", True)
    face = Import("ablate.reports.table", "ablate.ablations.results", "reports/table.py:2", True)
    assert beyond_the_faces([inside, face]) == [
        "reports/table.py:1: ablate.reports.table imports ablate.ablations.results.ledger, inside a package: "
        "import its face"
    ]


def test_ablations_packages_import_in_one_direction(imports):
    packages = {p.name for p in (REPO / "ablations").iterdir() if (p / "__init__.py").is_file()}
    loose = {p.stem for p in (REPO / "ablations").glob("*.py") if p.name != "__init__.py"}
    assert packages | loose == set(PACKAGE_ORDER), "every package and loose module of ablations/ has its place"
    bad = against_the_package_order(imports)
    assert not bad, "imports against the order of ablations' packages:\n" + "\n".join(bad)
    planted = Import("ablate.ablations.statistics.verdicts", "ablate.ablations.results.record", "x.py:1", True)
    assert against_the_package_order([planted]) == [
        "x.py:1: ablate.ablations.statistics.verdicts imports ablate.ablations.results.record "
        "(statistics comes before results)"
    ]


def test_no_modules_import_in_a_circle(imports):
    found = circles(imports)
    assert not found, "modules that import each other in a circle:\n" + "\n".join(" <-> ".join(c) for c in found)


def test_reports_never_imports_training_code(imports):
    bad = training_code_in_reports(imports)
    assert not bad, "reports reaches training code (torch or Lightning):\n" + "\n".join(bad)


def test_the_checks_catch_what_they_are_for():
    """Planted imports: one upward, one circle, one into training code."""
    up = Import("ablate.data.batching", "ablate.ablations.results.record", "data/batching.py:1", True)
    loop = [
        Import("ablate.reports.a", "ablate.reports.b", "reports/a.py:1", True),
        Import("ablate.reports.b", "ablate.reports.a", "reports/b.py:1", False),
    ]
    training = [
        Import("ablate.reports.x", "ablate.ablations.training.trainer", "reports/x.py:1", False),
        Import("ablate.ablations.training.trainer", "torch", "ablations/training/trainer.py:1", True),
    ]
    assert upward_imports([up]) == [
        "data/batching.py:1: ablate.data.batching imports ablate.ablations.results.record "
        "(data may not import ablations)"
    ]
    assert circles(loop) == [["ablate.reports.a", "ablate.reports.b"]]
    assert training_code_in_reports(training) == [
        "ablations/training/trainer.py:1: ablate.reports.x -> ablate.ablations.training.trainer "
        "imports torch when loaded"
    ]


def _tree_copy(tmp_path: Path) -> Path:
    """The packages' Python files, copied: a tree to plant imports in."""
    for folder in LAYERS:
        shutil.copytree(REPO / folder, tmp_path / folder, ignore=shutil.ignore_patterns("*.pyc", "__pycache__"))
    return tmp_path


@pytest.mark.slow
@pytest.mark.parametrize(
    "planted",
    [
        'importlib.import_module("ablate.reports.table")',
        '__import__("ablate.reports.sequential")',
        'JUDGE = "ablate.reports.sequential:judge"',  # a 'module:function' handed to import_module later
    ],
)
def test_a_planted_string_import_across_layers_fails_the_test(tmp_path, planted):
    """The runner reaching the reports by name, planted in a copy of the tree: the layering test fails on it (and
    passes on the copy as it was), and the CLI entry may still name every layer."""
    root = _tree_copy(tmp_path)
    assert not upward_imports(read_imports(root)) and not imports_by_name(root)
    target = root / "ablations" / "sweep" / "worker.py"
    lines = target.read_text(encoding="utf-8").splitlines()
    lines += ["", "import importlib", "", "", "def _look():", f"    {planted}", ""]
    target.write_text("\n".join(lines), encoding="utf-8")
    line = len(lines) - 1
    found = upward_imports(read_imports(root)) + imports_by_name(root)
    assert found and all(f.startswith(f"ablations/sweep/worker.py:{line}:") for f in found), found
    name = planted.split('"')[1].partition(":")[0]
    assert any(f"ablate.ablations.sweep.worker names {name} (ablations may not import reports)" in f for f in found), (
        found
    )
    entry = root / "ablations" / "cli.py"
    entry.write_text(entry.read_text(encoding="utf-8") + f"\n\ndef _also():\n    {planted}\n", encoding="utf-8")
    assert not [f for f in upward_imports(read_imports(root)) + imports_by_name(root) if "cli.py" in f]


REASON_WORDS = re.compile(r"\breason\b[^\n]{0,12}\.(startswith|endswith)\(|[\"'][^\"'\n]+[\"']\s+in\s+\w+\.reason\b")
"""A branch on the words of a comparison's `reason` (`reason.startswith("too noisy")`, `"noisy" in cv.reason`):
code reads its `cause` field instead (`ablations.statistics.verdicts.Cause`)."""
REASON_WORDS_ALLOWED = {
    "ablations/results/ledger.py": "storages from before `closed_as` say 'duplicate' only in a trial's words",
    "ablations/statistics/convergence.py": "a record of a diverged trial says so only in its failure reason",
}


def reason_branches(root: Path = REPO) -> list[str]:
    """'path:line' for every line of the packages that branches on a reason's words, outside REASON_WORDS_ALLOWED."""
    found = []
    for package in ("data", "lightning_modules", "ablations", "reports", "benchmarks"):
        for path in sorted((root / package).rglob("*.py")):
            relative = path.relative_to(root).as_posix()
            if relative in REASON_WORDS_ALLOWED:
                continue
            for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                if REASON_WORDS.search(line):
                    found.append(f"{relative}:{number}")
    return found


def test_no_code_branches_on_a_reasons_words():
    assert not reason_branches(), reason_branches()


def test_the_reason_check_finds_a_branch_on_words(tmp_path):
    """The line `_with_advice` had before `cause`, planted in a copy: the check finds it."""
    (tmp_path / "reports").mkdir()
    (tmp_path / "reports" / "table.py").write_text(
        'def f(comp):\n    return not comp.reason.startswith("too noisy")\n\n\n'
        'def g(cv):\n    return "noisy" in cv.reason\n',
        encoding="utf-8",
    )
    assert reason_branches(tmp_path) == ["reports/table.py:2", "reports/table.py:6"]


INNER_IMPORTS_AT_MOST = 0.08
"""Imports inside functions, as a share of all the packages' imports: the dependency graph is read from the top of
the files. What stays inside a function imports something that costs time (torch, Lightning, W&B, Optuna, scipy
behind a command's --help) or an optional extra, and says so in a comment on its line."""


def inner_imports(root: Path = REPO) -> tuple[int, list[str]]:
    """The number of import statements in the packages, and 'path:line: reason?' for each inside a function:
    'path:line' alone when its first or last line carries a comment (its reason), else with ': no reason'."""
    total, inner = 0, []
    for folder in LAYERS:
        for path in sorted((root / folder).rglob("*.py")):
            text = path.read_text(encoding="utf-8")
            tree = ast.parse(text, filename=str(path))
            comments = {
                tok.start[0]
                for tok in tokenize.generate_tokens(io.StringIO(text).readline)
                if tok.type == tokenize.COMMENT
            }
            in_function = {
                id(child)
                for node in ast.walk(tree)
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
                for child in ast.walk(node)
            }
            for node in ast.walk(tree):
                if not isinstance(node, ast.Import | ast.ImportFrom):
                    continue
                total += 1
                if id(node) in in_function:
                    where = f"{path.relative_to(root).as_posix()}:{node.lineno}"
                    said = node.lineno in comments or node.end_lineno in comments
                    inner.append(where if said else f"{where}: no reason")
    return total, inner


def test_imports_sit_at_the_top_of_the_files():
    total, inner = inner_imports()
    assert len(inner) <= INNER_IMPORTS_AT_MOST * total, (
        f"{len(inner)} of {total} imports sit inside functions (at most {INNER_IMPORTS_AT_MOST:.0%}): move them to "
        "the top of their files"
    )
    unreasoned = [where for where in inner if where.endswith(": no reason")]
    assert not unreasoned, "imports inside functions without a comment that says why:\n" + "\n".join(unreasoned)


def test_a_planted_inner_import_fails_the_check(tmp_path):
    """In a copy of the tree: one import inside a function without a reason is named; enough of them, each with its
    reason, push the share past the limit."""
    root = _tree_copy(tmp_path)
    target = root / "reports" / "table.py"
    lines = target.read_text(encoding="utf-8").splitlines()
    target.write_text("\n".join([*lines, "", "", "def _late():", "    import json", "", "    return json", ""]))
    total, inner = inner_imports(root)
    assert [w for w in inner if w.endswith(": no reason")] == [f"reports/table.py:{len(lines) + 4}: no reason"]
    assert len(inner) <= INNER_IMPORTS_AT_MOST * total  # one more is still within the share
    planted = "".join(f"\n\ndef _late{i}():\n    import json  # planted\n\n    return json\n" for i in range(150))
    target.write_text(target.read_text(encoding="utf-8") + planted, encoding="utf-8")
    total, inner = inner_imports(root)
    assert len(inner) > INNER_IMPORTS_AT_MOST * total


def face_names(root: Path = REPO) -> dict[str, list[str]]:
    """Each subpackage of ablations/ -> the names its `__init__` exports (`__all__`)."""
    out = {}
    for init in sorted((root / "ablations").glob("*/__init__.py")):
        tree = ast.parse(init.read_text(encoding="utf-8"))
        for node in tree.body:
            if isinstance(node, ast.Assign | ast.AnnAssign):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                if any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets) and node.value is not None:
                    out[f"ablate.ablations.{init.parent.name}"] = [ast.literal_eval(e) for e in node.value.elts]
    return out


FACE_FOR_PLUGINS = {
    "ablate.ablations.launchers.Launcher": "the contract a launcher module outside this repository implements",
}
"""Names a face exports for code outside this repository, and why."""


def unused_face_names(root: Path = REPO) -> list[str]:
    """'module.name' for each name a face exports that nothing outside its subpackage imports from the face (the
    packages and the tests): a face lists what other packages use, and nothing else."""
    faces = face_names(root)
    used: dict[str, set[str]] = {face: set() for face in faces}
    for folder in (*LAYERS, "tests"):
        for path in sorted((root / folder).rglob("*.py")):
            inside = path.relative_to(root).as_posix()
            tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
            bound: dict[str, str] = {}  # a name this file binds to a face's module -> the face
            for node in ast.walk(tree):
                if isinstance(node, ast.ImportFrom) and node.module == "ablate.ablations":
                    bound |= {a.asname or a.name: f"ablate.ablations.{a.name}" for a in node.names}
                if isinstance(node, ast.ImportFrom) and node.module in faces:
                    if inside.startswith(node.module.removeprefix("ablate.").replace(".", "/") + "/"):
                        continue  # the package's own modules do not make a name public
                    used[node.module] |= {alias.name for alias in node.names}
            for node in ast.walk(tree):  # `launchers.get(...)` after `from ablate.ablations import launchers`
                if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
                    face = bound.get(node.value.id)
                    if face in used and not inside.startswith(face.removeprefix("ablate.").replace(".", "/") + "/"):
                        used[face].add(node.attr)
    unused = [f"{face}.{name}" for face, names in faces.items() for name in names if name not in used[face]]
    return [name for name in unused if name not in FACE_FOR_PLUGINS]


def test_each_face_exports_only_what_other_packages_use():
    assert not unused_face_names(), "exported by a face and imported by no other package: " + ", ".join(
        unused_face_names()
    )


def test_the_face_check_finds_a_name_nothing_imports(tmp_path):
    root = _tree_copy(tmp_path)
    shutil.copytree(REPO / "tests", root / "tests", ignore=shutil.ignore_patterns("*.pyc", "__pycache__"))
    assert not unused_face_names(root)
    face = root / "ablations" / "sweep" / "__init__.py"
    face.write_text(face.read_text(encoding="utf-8").replace("__all__: list[str] = []", '__all__ = ["Plan"]'))
    assert unused_face_names(root) == ["ablate.ablations.sweep.Plan"]


def test_the_reports_never_run_the_design_or_judge_a_claim():
    """reports/ renders what ablations/ decided: no `walk(` (the design's looks) and no `judge(` (the claims'
    verdicts) in it; the looks come from `ablations.results.evidence` (`design_walk`, `replay_walk`)."""
    calls = [
        f"{path.relative_to(REPO).as_posix()}:{number}"
        for path in sorted((REPO / "reports").rglob("*.py"))
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if re.search(r"(?<![\w.])(walk|judge)\(", line)
    ]
    assert not calls, calls
