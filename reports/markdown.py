"""Markdown: the report (its table in the paper's layout, the claims' verdicts, the legend), a comparison's table,
and the claims' trend over model size.

All are GitHub-flavoured Markdown that also reads in a terminal (the sweep prints the report's file), and every
table is written by `md_table`. Registered with `reports.writers` as format 'md' of `ablate report` and of
`ablate compare` (and 'text' of the trend, which a terminal gets).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from ablate.reports.cells import SWEEP_COLUMNS, SWEEP_NUMERIC, display_columns, group_cells, sweep_lines
from ablate.reports.claims import comparison_text
from ablate.reports.legend import claim_title, claims_legend, headline, legend, sweep_header, sweep_legend
from ablate.reports.table import ReportTable
from ablate.reports.trend import (
    LEGEND,
    SizeTrend,
    comparison_label,
    paper_text,
    point_text,
    rung_header,
    rung_line,
    summary_line,
    trend_text,
)
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


@writer("md", "Markdown table, as a terminal prints it", suffix=".md", subject="trend", aliases=("text",), plots=True)
def trend_to_markdown(trend: SizeTrend, ctx: Context) -> str:
    """The claims over model size: the rungs, one table line per comparison (a cell per rung, then the trend), the
    summary, the legend, and the plot where it was drawn beside the file (`ctx.plots`)."""
    lines = [f"## Claims over model size: {' < '.join(r.label for r in trend.rungs)}", ""]
    lines += [f"- {md_escape(rung_line(r))}" for r in trend.rungs]
    header = ["claim", "comparison", "paper", *(md_escape(rung_header(r)) for r in trend.rungs), "trend"]
    rows = (
        (
            f"{claim.id}: {claim.text}" + (f" ({claim.section})" if claim.section else ""),
            comparison_label(comp),
            paper_text(comp),
            *(point_text(p, comp.usable(i)) for i, p in enumerate(comp.points)),
            trend_text(comp),
        )
        for claim, comp in trend.comparisons
    )
    lines += ["", *md_table(header, "llr" + "l" * (len(trend.rungs) + 1), rows), ""]
    lines += [f"- {md_escape(summary_line(trend))}.", f"- {md_escape(LEGEND)}"]
    lines += [f"\n![{md_escape(p.title)}]({p.png.name})" for p in ctx.plots]
    return "\n".join(lines) + "\n"
