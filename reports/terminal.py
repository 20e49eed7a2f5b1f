"""The report as a terminal prints it: what the report says first, each claim's verdict with its comparisons (the
effect at T, and why an inconclusive one is), and a compact table of the rows, every line at most `WIDTH`
characters. The legend and the paper's configuration columns stay in the files. Registered with `reports.writers` as
format 'text' of `ablate report` (OUT/report/<study>-<preset>.txt), which `ablate report` prints, and so does the end
of `ablate sweep` (it runs `ablate report`).
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence

from ablate.lightning_modules.metrics import METRICS
from ablate.reports.cells import COLUMNS, cut, group_cells
from ablate.reports.claims import ComparisonVerdict, effect_text
from ablate.reports.legend import headline
from ablate.reports.table import CONFIG_COLUMNS, ReportTable
from ablate.reports.writers import Context, writer

WIDTH = 100
"""The widest line the terminal text has."""

SHOWN = {"params": "params M", "ppl": "dev PPL", "bleu": "dev BLEU", "delta_bleu": "ΔBLEU", "seeds": "seeds"}
"""The compact table's columns after the row and what it changes (`reports.cells.COLUMNS` keys), with their short
headers (ΔBLEU: against the base, its mark as the report's)."""


def wrapped(text: str, indent: str = "", then: str | None = None) -> list[str]:
    """`text` in lines of at most WIDTH characters, the first indented by `indent`, the others by `then`."""
    return textwrap.wrap(text, WIDTH, initial_indent=indent, subsequent_indent=indent if then is None else then,
                         break_on_hyphens=False, break_long_words=True)  # fmt: skip


def comparison_line(cv: ComparisonVerdict, base: str | None, claim_verdict: str, withheld: bool) -> str:
    """'A1 vs base, BLEU +1.20 [+0.07, +2.33]: budget-sensitive: ...': the comparison's effect at T, its verdict
    where it is not its claim's, and why it is inconclusive (not said again for a study that gives none)."""
    comp = cv.comparison
    test = cv.test
    head = f"{comp.row} vs {comp.against or base or '?'}, {METRICS[comp.metric].label}"
    if test is None or test.effect is None:
        return f"{head}: no complete trials to compare"
    text = f"{head} {effect_text(test, METRICS[comp.metric].digits)}"
    if cv.verdict != claim_verdict:
        text += f", {cv.verdict}"
    return f"{text}: {cv.reason}" if cv.reason and not withheld else text


def verdict_lines(table: ReportTable) -> list[str]:
    """Each claim's verdict, then one line per comparison (wrapped at WIDTH)."""
    if not table.claims:
        return ["no claims tested"]
    lines = [f"verdicts ({len(table.claims)} claims; each comparison's effect at T with its 95% interval):"]
    for cv in table.claims:
        lines.append(f"  {cv.claim.id}: {cv.verdict.upper()}")
        for c in cv.comparisons:
            lines += wrapped(comparison_line(c, table.base, cv.verdict, bool(table.withheld)), "    ", "      ")
    return lines


def changes_text(cells: dict[str, str]) -> str:
    """What a row changes from the row its blank cells repeat, as 'h=1 d_k=64 d_v=64 positions=learned'."""
    config = [f"{COLUMNS[c.key].header.replace('train ', '')}={cells[c.key]}" for c in CONFIG_COLUMNS if cells[c.key]]
    return " ".join([*config, *([cells["other"]] if cells.get("other") else [])])


def compact_table(table: ReportTable) -> list[str]:
    """One line per row: its name, what it changes (cut to fit), then `SHOWN`, every line at most WIDTH wide."""
    keys = [k for k in SHOWN if k != "delta_bleu" or table.base is not None]
    header = ["row", "changes", *(SHOWN[k] for k in keys)]
    rows = []
    for group in group_cells(table):
        for row, cells in group:
            changes = "(the base)" if row.name == table.base else changes_text(cells)
            rows.append([row.name, changes, *(cells[k] for k in keys)])
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    room = WIDTH - sum(w for i, w in enumerate(widths) if i != 1) - 2 * (len(widths) - 1)
    widths[1] = max(len(header[1]), min(widths[1], room))
    return [_line([cut(cell, widths[i]) for i, cell in enumerate(r)], widths) for r in [header, *rows]]


def _line(cells: Sequence[str], widths: Sequence[int]) -> str:
    """Cells padded to their widths, the first two (row, changes) left-aligned, the numbers right-aligned."""
    return "  ".join(c.ljust(w) if i < 2 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths, strict=True)))


def to_text(table: ReportTable) -> str:
    """The terminal text: title, what the report says first, the verdicts, the compact table."""
    lines = [f"{table.study} ({table.preset}): {len(table.rows)} rows, seeds {', '.join(map(str, table.seeds))}"]
    for line in headline(table):
        lines += wrapped(line)
    lines += ["", *verdict_lines(table), "", *compact_table(table)]
    return "\n".join(line.rstrip() for line in lines) + "\n"


@writer("text", "the verdicts and a 100-column table, as a terminal prints them", suffix=".txt")
def write_text(table: ReportTable, ctx: Context) -> str:
    return to_text(table)


__all__ = ["WIDTH", "compact_table", "to_text", "verdict_lines"]
