"""The report's plots, drawn with matplotlib's object API (no pyplot state, Agg rendering) as PNG and SVG.

- BLEU vs parameters: does a bigger model buy BLEU? (mean ± std over seeds)
- dev PPL and BLEU over training steps, one figure per row group, with the base for reference;
- BLEU deltas vs the base with error bars, significant ones highlighted, the paper's deltas beside them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from reports.results import StudyResults
from reports.table import ReportRow, ReportTable

PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22")


@dataclass(frozen=True)
class Plot:
    """One written plot."""

    name: str
    """File stem, e.g. 'bleu_vs_params' or 'curves_B'."""
    title: str
    """Caption for pages and W&B."""
    png: Path
    svg: Path


def _save(fig, out_dir: Path, name: str, title: str) -> Plot:
    fig.tight_layout()
    png, svg = out_dir / f"{name}.png", out_dir / f"{name}.svg"
    fig.savefig(png, dpi=110)
    fig.savefig(svg, metadata={"Date": None})
    return Plot(name=name, title=title, png=png, svg=svg)


def _group_colors(table: ReportTable) -> dict[str, str]:
    groups = list(dict.fromkeys(r.group for r in table.rows))
    return {g: PALETTE[i % len(PALETTE)] for i, g in enumerate(groups)}


DODGE_DECADES = 0.007
"""How far apart, in decades of the log parameter axis (a few pixels), rows of the same size are drawn."""


def _dodged(rows: list[ReportRow]) -> dict[str, float]:
    """Row -> x to draw it at: rows with the same parameter count (Table 3's A, D, E rows keep the base's) spread side
    by side around it, so that their error bars do not hide each other. On a log axis a factor is a fixed shift."""
    same: dict[str, list[ReportRow]] = {}
    for row in rows:
        same.setdefault(f"{row.params_m:.4g}", []).append(row)
    return {
        row.name: row.params_m * 10 ** (DODGE_DECADES * (i - (len(group) - 1) / 2))  # type: ignore[operator]
        for group in same.values()
        for i, row in enumerate(group)
    }


def _log_minor_label(value: float, _pos: int) -> str:
    """0.2, 0.3, 0.5, 2, 3, 5... on a log axis (plain numbers, not 2e-01), the other minor ticks unlabelled."""
    mantissa = value / 10 ** math.floor(math.log10(value))
    return f"{value:g}" if round(mantissa) in (2, 3, 5) and abs(mantissa - round(mantissa)) < 1e-6 else ""


def plot_bleu_vs_params(table: ReportTable, out_dir: Path) -> Plot | None:
    """Dev BLEU (mean ± std over seeds) against parameter count (log scale), one colour per row group."""
    fig = bleu_vs_params_figure(table)
    if fig is None:
        return None
    title = "Dev BLEU vs parameters (mean ± std over seeds; rows of the same size drawn side by side)"
    return _save(fig, out_dir, "bleu_vs_params", title)


def bleu_vs_params_figure(table: ReportTable):
    """The figure of `plot_bleu_vs_params` (a matplotlib Figure), or None when no row has BLEU and parameters."""
    from adjustText import adjust_text  # moves labels off each other and off the points, deterministically
    from matplotlib.figure import Figure
    from matplotlib.ticker import FuncFormatter

    rows = [r for r in table.rows if r.bleu is not None and r.params_m is not None]
    if not rows:
        return None
    colors = _group_colors(table)
    xs = _dodged(rows)
    fig = Figure(figsize=(6.4, 4.4))
    ax = fig.add_subplot()
    seen: set[str] = set()
    for row in rows:
        ax.errorbar(
            xs[row.name],
            row.bleu.mean,  # type: ignore[union-attr]
            yerr=row.bleu.std or 0.0,  # type: ignore[union-attr]
            fmt="o",
            markersize=4,
            elinewidth=1,
            color=colors[row.group],
            capsize=2,
            label=None if row.group in seen else row.group,
        )
        seen.add(row.group)
    ax.set_xscale("log")
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.xaxis.set_minor_formatter(FuncFormatter(_log_minor_label))
    ax.set_xlabel("parameters ×10⁶ (log scale)")
    ax.set_ylabel("BLEU (dev)")
    ax.set_title(f"{table.study}: dev BLEU vs parameters", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, title="group", title_fontsize=7)
    fig.tight_layout()
    # Labels last, once the axes have their final size: adjustText needs it to measure them.
    labels = [ax.text(xs[r.name], r.bleu.mean, r.name, fontsize=7) for r in rows]  # type: ignore[union-attr]
    adjust_text(
        labels,
        x=[xs[r.name] for r in rows],
        y=[r.bleu.mean for r in rows],  # type: ignore[union-attr]
        ax=ax,
        arrowprops={"arrowstyle": "-", "color": "#888", "lw": 0.5},
    )
    return fig


def _curve(points: list[dict], key: str) -> tuple[list[float], list[float]]:
    pairs = [(p["step"], p[key]) for p in points if p.get("step") is not None and p.get(key) is not None]
    return [s for s, _ in pairs], [v for _, v in pairs]


def plot_curves(table: ReportTable, results: StudyResults, out_dir: Path) -> list[Plot]:
    """Dev PPL and BLEU over steps, one figure per row group (every seed drawn; the base dashed for reference)."""
    from matplotlib.figure import Figure
    from matplotlib.ticker import LogFormatter

    plots = []
    for group, rows in table.groups():
        shown: list[ReportRow] = list(rows)
        if table.base and all(r.name != table.base for r in rows):
            shown.insert(0, table.row(table.base))
        if not any(r.curves.get("val") for row in rows for r in results.records(row.name, state=None)):
            continue
        fig = Figure(figsize=(9.0, 3.6))
        axes = fig.subplots(1, 2)
        for i, row in enumerate(shown):
            is_ref = row.name == table.base and row.group != group
            style = {"color": "#777", "linestyle": "--"} if is_ref else {"color": PALETTE[i % len(PALETTE)]}
            for j, record in enumerate(results.records(row.name, state=None)):
                label = row.name if j == 0 else None
                for ax, key in zip(axes, ("ppl", "bleu"), strict=True):
                    steps, values = _curve(record.curves.get("val") or [], key)
                    if steps:
                        ax.plot(steps, values, marker=".", linewidth=1.2, alpha=0.85, label=label, **style)
        for ax, key in zip(axes, ("PPL (dev)", "BLEU (dev)"), strict=True):
            ax.set_xlabel("training step")
            ax.set_ylabel(key)
            ax.grid(alpha=0.3)
        axes[0].set_yscale("log")
        axes[0].yaxis.set_major_formatter(LogFormatter())
        axes[0].yaxis.set_minor_formatter(LogFormatter(minor_thresholds=(2, 0.4)))
        axes[1].legend(fontsize=7)
        fig.suptitle(f"{table.study}: group {group}, dev curves")
        title = f"Dev PPL and BLEU over training steps, group {group}"
        plots.append(_save(fig, out_dir, f"curves_{_safe(group)}", title))
    return plots


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_" else "_" for c in name)


def plot_bleu_deltas(table: ReportTable, out_dir: Path) -> Plot | None:
    """BLEU minus the base's per row, ± std over paired seeds; significant rows filled, the paper's deltas beside."""
    from matplotlib.figure import Figure

    rows = [r for r in table.rows if r.delta_bleu is not None]
    if not rows:
        return None
    paper_base = table.row(table.base).paper if table.base else None
    fig = Figure(figsize=(6.4, 0.8 + 0.32 * len(rows)))
    ax = fig.add_subplot()
    ys = list(range(len(rows)))[::-1]
    for y, row in zip(ys, rows, strict=True):
        significant = bool(row.significance and row.significance.mark)
        ax.errorbar(
            row.delta_bleu.mean,  # type: ignore[union-attr]
            y,
            xerr=row.delta_bleu.std or 0.0,  # type: ignore[union-attr]
            fmt="o",
            color="#d62728" if significant else "#1f77b4",
            mfc=None if significant else "white",
            capsize=3,
        )
        if row.paper and row.paper.bleu is not None and paper_base and paper_base.bleu is not None:
            ax.plot(row.paper.bleu - paper_base.bleu, y, marker="D", color="#999", mfc="none", linestyle="none")
    ax.axvline(0.0, color="#444", linewidth=0.8)
    ax.set_yticks(ys, [f"{r.name} {r.significance.mark if r.significance else ''}".strip() for r in rows])
    ax.set_xlabel(f"BLEU − BLEU({table.base})")
    ax.set_title("BLEU vs base: filled red = significant (paired bootstrap); ◇ = paper", fontsize=9)
    ax.grid(axis="x", alpha=0.3)
    return _save(fig, out_dir, "bleu_deltas", "BLEU deltas vs base (± std over paired seeds; ◇ the paper's)")


def make_plots(table: ReportTable, results: StudyResults, out_dir: Path) -> list[Plot]:
    """Every plot the data allows (none for a study with no complete trial), written under `out_dir`."""
    out_dir.mkdir(parents=True, exist_ok=True)
    plots = [
        plot_bleu_vs_params(table, out_dir),
        *plot_curves(table, results, out_dir),
        plot_bleu_deltas(table, out_dir),
    ]
    return [p for p in plots if p is not None]
