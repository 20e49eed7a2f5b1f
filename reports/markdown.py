"""Markdown: the report (its table in the paper's layout, the claims' verdicts, the legend) and a comparison's table.

Both are GitHub-flavoured Markdown that also reads in a terminal (the sweep prints the report's file), and both
tables are written by `md_table`. Registered with `reports.writers` as format 'md' of `ablate report` and of
`ablate compare`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from ablate.reports.cells import SWEEP_COLUMNS, SWEEP_NUMERIC, display_columns, group_cells, sweep_lines
from ablate.reports.claims import comparison_text
from ablate.reports.legend import claim_title, claims_legend, headline, legend, sweep_header, sweep_legend
from ablate.reports.table import ReportTable
from ablate.reports.writers import Context, writer

if TYPE_CHECKING:
    from ablate.reports.compare import SweepComparison


def md_escape(text: str) -> str:
    """Text safe in a table cell or a list item: '|' escaped, line breaks as spaces."""
    return text.replace("|", "\\|").replace("\n", " ")


def md_table(header: Sequence[str], aligns: Sequence[str], rows: Iterable[Sequence[str]]) -> list[str]:
    """The lines of a Markdown table: the header as given (trusted), one alignment per column ('l' or 'r'), then
    each row's cells escaped."""
    return [
        "| " + " | ".join(header) + " |",
        "|" + "|".join(":--" if align == "l" else "--:" for align in aligns) + "|",
        *("| " + " | ".join(md_escape(cell) for cell in row) + " |" for row in rows),
    ]


def to_markdown(table: ReportTable, columns: Sequence[str] | None = None, *, corpus: str | None = None) -> str:
    """A GitHub-flavoured Markdown table in the paper's layout, with its legend. `columns`: keys of `COLUMNS` to
    show, in that order (default: all that apply but the optional ones); `corpus`: named in the legend."""
    cols = display_columns(table, columns, "md")
    lines = [f"## {table.study} ({table.preset})", ""]
    if top := headline(table):
        lines += [*(f"**{md_escape(line)}**" for line in top), ""]
    rows = ([cells[c.key] for c in cols] for group in group_cells(table) for _, cells in group)
    lines += md_table([c.header for c in cols], [c.align for c in cols], rows)
    lines.append("")
    if table.claims:
        # A list rather than a table: it reads the same in a terminal (the sweep prints this file) and rendered.
        lines += ["### The paper's claims", ""]
        for cv in table.claims:
            lines.append(f"- **{cv.verdict.upper()}**: {claim_title(cv)}")
            lines += [f"  - {c.verdict}: {comparison_text(c, table.base)}" for c in cv.comparisons]
        lines += ["", claims_legend(table), ""]
    lines += [f"- {md_escape(line)}" for line in legend(table, corpus)]
    return "\n".join(lines) + "\n"


@writer("md", "Markdown table, claims and legend", suffix=".md", aliases=("markdown",))
def write_markdown(table: ReportTable, ctx: Context) -> str:
    return to_markdown(table, ctx.columns, corpus=ctx.corpus)


@writer("md", "Markdown table", suffix=".md", subject="comparison")
def sweep_to_markdown(cmp: SweepComparison, ctx: Context) -> str:
    """A comparison of two results directories: who A and B are, one table line per row and metric, the legend."""
    lines = [f"## {cmp.a.out_dir.name} (A) vs {cmp.b.out_dir.name} (B)", ""]
    for line in sweep_header(cmp):  # an indented line is an item of the line above
        lines.append(f"  - {md_escape(line.strip())}" if line.startswith(" ") else f"- {md_escape(line)}")
    aligns = ["r" if c in SWEEP_NUMERIC else "l" for c in SWEEP_COLUMNS]
    lines += ["", *md_table(SWEEP_COLUMNS, aligns, sweep_lines(cmp))]
    lines += [""] + [f"- {md_escape(line)}" for line in sweep_legend(cmp)]
    return "\n".join(lines) + "\n"
