"""HTML: the report as one self-contained page (inline CSS, plots as data URIs, no script, no network), rendered
from `templates/report.html.j2`; the claims' trend over model size as another, from `templates/trend.html.j2`.
Registered with `reports.writers` as format 'html' of `ablate report` and of the trend.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ablate.reports.cells import (
    STAT_COLUMNS,
    Column,
    display_columns,
    group_cells,
    mean_text,
    other_spans,
    sd_text,
    state_text,
)
from ablate.reports.claims import comparison_text
from ablate.reports.legend import claim_title, claims_legend, headline, legend
from ablate.reports.table import ReportRow, ReportTable
from ablate.reports.trend import (
    LEGEND,
    PLOT_CAPTION,
    SizeTrend,
    comparison_label,
    inside_text,
    paper_text,
    point_text,
    rung_header,
    rung_line,
    summary_line,
)
from ablate.reports.writers import Context, writer

_HTML_HEADERS = {
    "d_model": "d<sub>model</sub>",
    "d_ff": "d<sub>ff</sub>",
    "d_k": "d<sub>k</sub>",
    "d_v": "d<sub>v</sub>",
    "P_drop": "P<sub>drop</sub>",
    "eps_ls": "ε<sub>ls</sub>",
}
"""Headers the page writes in the paper's notation (trusted markup; everything else is escaped)."""


def data_uri(path: Path) -> str:
    """A PNG or SVG file as a data: URI, so the page needs no other file."""
    mime = "image/svg+xml" if path.suffix == ".svg" else "image/png"
    return f"data:{mime};base64,{base64.b64encode(path.read_bytes()).decode('ascii')}"


def _html_cell(col: Column, row: ReportRow, cells: dict[str, str]) -> dict[str, Any]:
    """A cell for the template. A `Stat` column gives its mean, deviation and mark apart, from the row's values, so
    that the page sets the deviation in a smaller type (the mean reads first, and Table 3 fits a 1400 px window) and
    the significance mark in full size; any other column, its text."""
    cell = {"key": col.key, "align": col.align, "text": cells[col.key], "sd": "", "mark": ""}
    stat = getattr(row, col.key) if col.key in STAT_COLUMNS else None
    if stat is not None:
        digits, sign = STAT_COLUMNS[col.key]
        mark = row.mark if col.key == "delta_bleu" else ""
        cell.update(text=mean_text(stat, digits, sign), sd=sd_text(stat, digits), mark=mark)
    return cell


def to_html(
    table: ReportTable,
    plots: dict[str, Path] | None = None,
    columns: Sequence[str] | None = None,
    *,
    corpus: str | None = None,
    claim_plots: dict[str, Path] | None = None,
) -> str:
    """One self-contained page (inline CSS, plots as data URIs, no script, no network). `plots`: title -> PNG, shown
    under the table; `claim_plots`: claim id -> PNG, shown beside its claim; `columns`: keys of `COLUMNS` (default:
    all that apply but the optional ones); `corpus`: named in the legend."""
    import markupsafe  # lazy: only the HTML page needs it

    env = _environment()
    cols = display_columns(table, columns, "html")
    spans = other_spans(table, cols)
    if spans is not None:  # as in LaTeX: each row's differences written across its blank configuration cells
        cols = [c for c in cols if c.key != "other"]
    groups = []
    for group in group_cells(table):
        body = []
        for row, cells in group:
            tds = [_html_cell(c, row, cells) for c in cols]
            # seeds: the counts in the cell (a failure's reason would make the row tall), the reasons on hover and
            # in the legend
            for td in tds:
                if td["key"] == "seeds":
                    td.update(text=state_text(row, width=0), title=state_text(row) if row.reasons else "")
            if spans is not None and row.name in spans:
                start, n = spans[row.name]
                tds[start : start + n] = [{"key": "other", "align": "l", "text": cells["other"], "colspan": n}]
            body.append({"state": row.state, "cells": tds})
        groups.append(body)
    images = [
        {"title": title, "src": data_uri(path)}
        for title, path in (plots or {}).items()
        if path.suffix == ".png" and path.is_file()
    ]
    return env.get_template("report.html.j2").render(
        title=f"{table.study} ({table.preset})",
        headers=[
            (c.key, c.align, markupsafe.Markup(_HTML_HEADERS[c.key]) if c.key in _HTML_HEADERS else c.header)
            for c in cols
        ],
        groups=groups,
        headline=headline(table),
        legend=legend(table, corpus),
        claims=_html_claims(table, claim_plots or {}),
        claims_legend=claims_legend(table),
        images=images,
        generated_at=table.generated_at,
    )


def _environment():
    import jinja2  # lazy: only the HTML page needs it

    return jinja2.Environment(
        loader=jinja2.PackageLoader("ablate.reports", "templates"),
        autoescape=jinja2.select_autoescape(["html", "j2"]),
        trim_blocks=True,
        lstrip_blocks=True,
    )


def _html_claims(table: ReportTable, plots: dict[str, Path]) -> list[dict[str, Any]]:
    """Each claim for the template: title, verdict, one line of evidence per comparison, and its plot if drawn."""
    return [
        {
            "title": claim_title(cv),
            "verdict": cv.verdict,
            "evidence": [f"{c.verdict}: {comparison_text(c, table.base)}" for c in cv.comparisons],
            "plot": data_uri(plots[cv.claim.id]) if cv.claim.id in plots and plots[cv.claim.id].is_file() else None,
        }
        for cv in table.claims
    ]


@writer("html", "one self-contained page with the plots", suffix=".html", plots=True)
def write_html(table: ReportTable, ctx: Context) -> str:
    plots = {p.title: p.png for p in ctx.plots if p.claim is None}
    claim_plots = {p.claim: p.png for p in ctx.plots if p.claim is not None}
    return to_html(table, plots, ctx.columns, corpus=ctx.corpus, claim_plots=claim_plots)


def trend_to_html(trend: SizeTrend, plots: Sequence[Path] = ()) -> str:
    """The claims over model size as one self-contained page: the rungs, the table (a cell per rung, shaded by its
    verdict, greyed where the rung is left out of the trend), the summary, the legend and the plot (`plots`: PNGs)."""
    rows = [
        {
            "claim": f"{claim.id}: {claim.text}" + (f" ({claim.section})" if claim.section else ""),
            "comparison": comparison_label(comp),
            "paper": paper_text(comp),
            "cells": [
                {
                    "text": point_text(p, comp.usable(i)),
                    "cls": p.verdict if p is not None and comp.usable(i) else "out",
                }
                for i, p in enumerate(comp.points)
            ],
            "trend": comp.trend,
            "why": comp.why + inside_text(comp),
        }
        for claim, comp in trend.comparisons
    ]
    template = _environment().get_template("trend.html.j2")
    return template.render(
        title=f"Claims over model size: {' < '.join(r.label for r in trend.rungs)}",
        rungs=[rung_line(r) for r in trend.rungs],
        headers=[rung_header(r) for r in trend.rungs],
        rows=rows,
        summary=summary_line(trend),
        legend=LEGEND,
        images=[{"title": PLOT_CAPTION, "src": data_uri(p)} for p in plots if p.suffix == ".png" and p.is_file()],
    )


@writer("html", "one self-contained page with the plot", suffix=".html", subject="trend", plots=True)
def write_trend_html(trend: SizeTrend, ctx: Context) -> str:
    return trend_to_html(trend, [p.png for p in ctx.plots])
