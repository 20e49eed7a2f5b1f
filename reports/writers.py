"""The one registry of report writers: every format `ablate report` and `ablate compare` write, with one signature.

A writer turns what it writes out (a `ReportTable` for `ablate report`, subject 'report'; a `SweepComparison` for
`ablate compare`, subject 'comparison') and the run's `Context` into the file's text. Both commands take their
`--format` choices and help from here, and `reports.build` writes a report's files from here, so adding a format is
one decorated function in one file:

    @writer("txt", "plain text table", suffix=".txt")
    def to_text(table: ReportTable, ctx: Context) -> str: ...

in the module of its format (`reports/markdown.py` holds both Markdown writers, the report's and the comparison's):
the modules in `BUILTIN_MODULES`, imported before the registry is read. A format defined anywhere else is registered
once its module is imported.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from ablate.data.errors import AblateError

if TYPE_CHECKING:
    from ablate.reports.plots import Plot

Subject = Literal["report", "comparison", "claims", "trend"]
"""What a writer writes out: a `ReportTable` ('report'), a `SweepComparison` ('comparison'), a `ClaimsComparison`
('claims': two studies' verdicts side by side, `ablate compare A B --claims`) or a `SizeTrend` ('trend': the claims
over studies at several sizes, `ablate compare A B C --claims`)."""

BUILTIN_MODULES = (
    "ablate.reports.text",
    "ablate.reports.markdown",
    "ablate.reports.latex",
    "ablate.reports.csvfile",
    "ablate.reports.jsonfile",
    "ablate.reports.htmlpage",
    "ablate.reports.claims_compare",
    "ablate.reports.terminal",
)
"""The modules whose writers every command offers (imported on the registry's first read), in the order their
formats are offered and written, whichever of them was imported first."""


@dataclass(frozen=True)
class Context:
    """What a writer may use besides the table or comparison it writes out; each writer reads the fields it needs."""

    columns: tuple[str, ...] | None = None
    """Keys of `reports.cells.COLUMNS` the display tables (Markdown, LaTeX, HTML) show, in that order; None: each
    format's default."""
    corpus: str | None = None
    """The data the study trained on, named in the legend or caption (`reports.build.describe_corpus`)."""
    plots: tuple[Plot, ...] = ()
    """The plots drawn for this report (the HTML page shows them)."""
    width: int = 160
    """Characters per line of a terminal table (`ablate compare`'s text printed to a terminal)."""


Write = Callable[[Any, Context], "str | None"]
"""(what is written out, context) -> the file's text; None: nothing to write for this one (a companion's choice)."""


@dataclass(frozen=True)
class Writer:
    """A registered format: its name on the command line, one line of help, the file suffix, and the function."""

    name: str
    help: str
    suffix: str
    write: Write
    subject: Subject = "report"
    aliases: tuple[str, ...] = ()
    """Other names `--format` accepts for it ('markdown' for 'md')."""
    companion_of: str | None = None
    """Written along with that format and not offered on its own (the claims CSV beside the CSV)."""
    plots: bool = False
    """It shows the plots (`Context.plots`): a report draws them only for such a format (or for W&B)."""


REGISTRY: dict[tuple[Subject, str], Writer] = {}
"""(subject, name) -> writer, in registration order. Read it through `registry()`, which loads the built-in ones."""


def writer(
    name: str,
    help: str,
    *,
    suffix: str,
    subject: Subject = "report",
    aliases: Sequence[str] = (),
    companion_of: str | None = None,
    plots: bool = False,
) -> Callable[[Write], Write]:
    """Register the decorated function `(table_or_comparison, ctx: Context) -> str` as format `name`."""

    def register(write: Write) -> Write:
        known = REGISTRY.get((subject, name))
        if known is not None and _origin(known.write) != _origin(write):  # a module reloaded registers itself again
            raise ValueError(f"a {subject} writer named '{name}' is already registered ({known.write.__module__}): "
                             "give this one another name")  # fmt: skip
        REGISTRY[(subject, name)] = Writer(name, help, suffix, write, subject, tuple(aliases), companion_of, plots)
        return write

    return register


def _origin(write: Write) -> tuple[str, str]:
    return (getattr(write, "__module__", ""), getattr(write, "__qualname__", ""))


def registry() -> dict[tuple[Subject, str], Writer]:
    """Every registered writer, the built-in modules' included."""
    for module in BUILTIN_MODULES:
        importlib.import_module(module)
    return REGISTRY


def writers(subject: Subject = "report") -> list[Writer]:
    """The formats offered for `subject`, in the order they are written (companions left out): the built-in ones in
    the order of `BUILTIN_MODULES`, then the others in the order they were registered."""
    offered = [w for (s, _), w in registry().items() if s == subject and w.companion_of is None]
    return sorted(offered, key=_builtin_rank)


def _builtin_rank(w: Writer) -> int:
    module = getattr(w.write, "__module__", "")
    return BUILTIN_MODULES.index(module) if module in BUILTIN_MODULES else len(BUILTIN_MODULES)


def format_names(subject: Subject = "report") -> list[str]:
    """The names `--format` offers for `subject`, in the order they are written."""
    return [w.name for w in writers(subject)]


def get_writer(name: str, subject: Subject = "report") -> Writer:
    """The writer of format `name` (an alias names it too); AblateError listing the choices for an unknown one."""
    for w in writers(subject):
        if name in (w.name, *w.aliases):
            return w
    raise AblateError(f"--format: unknown format '{name}'; choose from {','.join(format_names(subject))}")


def companions(name: str, subject: Subject = "report") -> list[Writer]:
    """The writers whose files go along with format `name`'s."""
    return [w for (s, _), w in registry().items() if s == subject and w.companion_of == name]


def parse_formats(text: str | Sequence[str], subject: Subject = "report") -> list[str]:
    """'md,tex' or ['md', 'tex'] (aliases and a leading dot allowed: 'markdown', '.tex') -> the checked format names,
    each once; AblateError naming the unknown ones and listing the choices."""
    items = text.split(",") if isinstance(text, str) else list(text)
    wanted = [f.strip().lower().lstrip(".") for f in items if f.strip()]
    names = {alias: w.name for w in writers(subject) for alias in (w.name, *w.aliases)}
    unknown = [f for f in wanted if f not in names]
    if unknown or not wanted:
        choices = ",".join(format_names(subject))
        raise AblateError(f"--format: unknown format '{','.join(unknown)}'; choose from {choices}")
    return list(dict.fromkeys(names[f] for f in wanted))


def format_of(path: Path, subject: Subject = "report") -> str | None:
    """The format whose suffix `path` has ('cmp.md' -> 'md'), or None."""
    return next((w.name for w in writers(subject) if w.suffix == path.suffix.lower()), None)


def formats_help(subject: Subject = "report") -> str:
    """'md (Markdown table), tex (LaTeX ...), ...': every format with its line of help, for `--format`'s help."""
    return ", ".join(f"{w.name} ({w.help})" for w in writers(subject))
