"""Plain text for a terminal: `ablate compare`'s table of two results directories, drawn with rich, `ctx.width`
characters wide. Registered with `reports.writers` as format 'text' of `ablate compare` (what it prints).
"""

from __future__ import annotations

import io
from typing import TYPE_CHECKING

from ablate.lightning_modules.metrics import METRICS
from ablate.reports.cells import SWEEP_COLUMNS, SWEEP_NUMERIC, sweep_lines
from ablate.reports.legend import sweep_header, sweep_legend
from ablate.reports.writers import Context, writer

if TYPE_CHECKING:
    from ablate.reports.compare import SweepComparison


@writer("text", "the terminal table", suffix=".txt", subject="comparison")
def sweep_to_text(cmp: SweepComparison, ctx: Context) -> str:
    """The terminal table (rich), `ctx.width` characters wide, with the header above and the legend below."""
    from rich.console import Console  # lazy: rich's console, only for a terminal view
    from rich.table import Table  # lazy: rich's console, only for a terminal view
    from rich.text import Text  # lazy: rich's console, only for a terminal view

    table = Table(show_lines=False)
    for col in SWEEP_COLUMNS:
        table.add_column(col, justify="right" if col in SWEEP_NUMERIC else "left", overflow="fold")
    n = len(METRICS)
    for i, line in enumerate(sweep_lines(cmp)):
        table.add_row(*(Text(cell) for cell in line), end_section=(i + 1) % n == 0)
    buffer = io.StringIO()
    console = Console(file=buffer, width=ctx.width, no_color=True, highlight=False, emoji=False)
    console.print(Text("\n".join(sweep_header(cmp))))
    console.print(table)
    console.print(Text("\n".join(sweep_legend(cmp))))
    return buffer.getvalue()
