"""The report's plots, drawn with matplotlib's object API (no pyplot state, Agg rendering) as PNG and SVG.

- BLEU vs parameters: does a bigger model buy BLEU? (mean ± std over seeds)
- dev PPL and BLEU over training steps, one figure per row group, with the base for reference;
- BLEU deltas vs the base with their 95% intervals, significant ones highlighted, the paper's deltas beside them;
- per claim, each compared row's effect with its 95% interval at every budget (T/2, T), the paper's beside it;
- two runs' curves side by side (`ablate compare A B --plot`);
- the claims over model size: each comparison's effect against the base's parameter count, the paper's as a line
  (`ablate compare A B C --claims`).
"""

from __future__ import annotations

import math
import textwrap
from dataclasses import dataclass
from pathlib import Path

from ablate.ablations.results import Record, StudyResults
from ablate.ablations.statistics import budget_label
from ablate.lightning_modules.metrics import METRICS
from ablate.reports.claims import ClaimVerdict, ComparisonVerdict
from ablate.reports.table import ReportRow, ReportTable
from ablate.reports.trend import PLOT_CAPTION, ComparisonTrend, SizeTrend, comparison_label

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
    claim: str | None = None
    """The id of the claim it shows, for a claim's plot (the page sets it beside the claim), else None."""


def _save(fig, out_dir: Path, name: str, title: str, claim: str | None = None) -> Plot:
    fig.tight_layout()
    png, svg = out_dir / f"{name}.png", out_dir / f"{name}.svg"
    fig.savefig(png, dpi=110)
    fig.savefig(svg, metadata={"Date": None})
    return Plot(name=name, title=title, png=png, svg=svg, claim=claim)


def _group_colors(table: ReportTable) -> dict[str, str]:
    groups = list(dict.fromkeys(r.group for r in table.rows))
    return {g: PALETTE[i % len(PALETTE)] for i, g in enumerate(groups)}


DODGE_DECADES = 0.007
"""How far apart, in decades of the log parameter axis (a few pixels), rows of the same size are drawn."""


def _dodged(params_m: dict[str, float]) -> dict[str, float]:
    """Row -> x to draw it at: rows with the same parameter count (Table 3's A, D, E rows keep the base's) spread side
    by side around it, so that their error bars do not hide each other. On a log axis a factor is a fixed shift."""
    same: dict[str, list[str]] = {}
    for name, params in params_m.items():
        same.setdefault(f"{params:.4g}", []).append(name)
    return {
        name: params_m[name] * 10 ** (DODGE_DECADES * (i - (len(group) - 1) / 2))
        for group in same.values()
        for i, name in enumerate(group)
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
    from matplotlib.figure import Figure  # lazy: matplotlib costs ~0.3 s, only when plotting
    from matplotlib.ticker import FuncFormatter  # lazy: matplotlib costs ~0.3 s, only when plotting

    rows = [r for r in table.rows if r.bleu is not None and r.params_m is not None]
    if not rows:
        return None
    colors = _group_colors(table)
    xs = _dodged({r.name: r.params_m for r in rows if r.params_m is not None})
    bleu = {r.name: r.bleu for r in rows if r.bleu is not None}
    fig = Figure(figsize=(6.4, 4.4))
    ax = fig.add_subplot()
    seen: set[str] = set()
    for row in rows:
        ax.errorbar(
            xs[row.name],
            bleu[row.name].mean,
            yerr=bleu[row.name].std or 0.0,
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
    labels = [ax.text(xs[r.name], bleu[r.name].mean, r.name, fontsize=7) for r in rows]
    adjust_text(
        labels,
        x=[xs[r.name] for r in rows],
        y=[bleu[r.name].mean for r in rows],
        ax=ax,
        arrowprops={"arrowstyle": "-", "color": "#888", "lw": 0.5},
        # A number of iterations, not adjustText's default of one second: the labels must not depend on how busy the
        # machine is, or the same study draws two plots (and two HTML pages).
        iter_lim=ITER_LIM,
    )
    return fig


ITER_LIM = 1000
"""adjustText's iterations for the BLEU-vs-parameters labels: it stops earlier once no label overlaps."""


def _curve(points: list[dict], key: str) -> tuple[list[float], list[float]]:
    pairs = [(p["step"], p[key]) for p in points if p.get("step") is not None and p.get(key) is not None]
    return [s for s, _ in pairs], [v for _, v in pairs]


def plot_curves(table: ReportTable, results: StudyResults, out_dir: Path) -> list[Plot]:
    """Dev PPL and BLEU over steps, one figure per row group (every seed drawn; the base dashed for reference)."""
    from matplotlib.figure import Figure  # lazy: matplotlib costs ~0.3 s, only when plotting
    from matplotlib.ticker import LogFormatter  # lazy: matplotlib costs ~0.3 s, only when plotting

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
    """BLEU minus the base's per row with the 95% interval of its test (± std over paired seeds where untested);
    rows the test marks significant filled, the paper's deltas beside."""
    from matplotlib.figure import Figure  # lazy: matplotlib costs ~0.3 s, only when plotting

    deltas = {r.name: r.delta_bleu for r in table.rows if r.delta_bleu is not None}
    rows = [r for r in table.rows if r.name in deltas]
    if not rows:
        return None
    paper_base = table.row(table.base).paper if table.base else None
    fig = Figure(figsize=(6.4, 0.8 + 0.32 * len(rows)))
    ax = fig.add_subplot()
    ys = list(range(len(rows)))[::-1]
    for y, row in zip(ys, rows, strict=True):
        test, delta = row.tests.get("bleu"), deltas[row.name]
        if test is not None and test.effect is not None and all(math.isfinite(v) for v in test.ci):
            x, err = test.effect, [[test.effect - test.ci[0]], [test.ci[1] - test.effect]]
        else:
            x, err = delta.mean, delta.std or 0.0
        significant = bool(row.mark)
        color = "#d62728" if significant else "#1f77b4"
        ax.errorbar(x, y, xerr=err, fmt="o", color=color, mfc=None if significant else "white", capsize=3)
        if row.paper and row.paper.bleu is not None and paper_base and paper_base.bleu is not None:
            ax.plot(row.paper.bleu - paper_base.bleu, y, marker="D", color="#999", mfc="none", linestyle="none")
    ax.axvline(0.0, color="#444", linewidth=0.8)
    ax.set_yticks(ys, [f"{r.name} {r.mark}".strip() for r in rows])
    ax.set_xlabel(f"BLEU − BLEU({table.base})")
    ax.set_title("BLEU vs base: filled red = significant (Holm p < 0.05, the verdicts' test); ◇ = paper", fontsize=9)
    ax.grid(axis="x", alpha=0.3)
    return _save(fig, out_dir, "bleu_deltas", "BLEU deltas vs base (95% interval of the test; ◇ the paper's)")


def plot_claims(table: ReportTable, out_dir: Path) -> list[Plot]:
    """One plot per claim with a tested comparison: each compared row's effect (row minus reference, in the
    comparison's metric) with its 95% interval at every budget side by side, the paper's difference beside it, a
    zero line, and the equivalence margin of a `same` comparison shaded."""
    plots = []
    for cv in table.claims:
        fig = claim_figure(cv, table)
        if fig is None:
            continue
        labels = " and ".join(budget_label(f) for f in table.fractions)
        title = f"{cv.claim.id}: effect vs {table.base} at {labels} (95% intervals; ◇ the paper's)"
        plots.append(_save(fig, out_dir, f"claim_{_safe(cv.claim.id)}", title, claim=cv.claim.id))
    return plots


def claim_figure(cv: ClaimVerdict, table: ReportTable):
    """The figure of one claim in `plot_claims` (one panel per metric, stacked), or None when nothing was tested."""
    from matplotlib.figure import Figure  # lazy: matplotlib costs ~0.3 s, only when plotting

    tested = [c for c in cv.comparisons if any(b.test is not None and b.test.effect is not None for b in c.budgets)]
    if not tested:
        return None
    metrics = list(dict.fromkeys(c.comparison.metric for c in tested))
    counts = [sum(c.comparison.metric == m for c in tested) for m in metrics]
    fig = Figure(figsize=(6.0, 0.6 + sum(1.0 + 0.45 * n for n in counts)))
    axes = fig.subplots(len(metrics), 1, squeeze=False, height_ratios=[1.0 + 0.45 * n for n in counts])[:, 0]
    for ax, metric in zip(axes, metrics, strict=True):
        _claim_panel(ax, [c for c in tested if c.comparison.metric == metric], table)
        label = METRICS[metric].label
        ax.set_xlabel(f"{label} of the row − {label} of the reference", fontsize=8)
    shown: dict[str, object] = {}  # one legend entry per budget, paper and margin, from every panel
    for ax in axes:
        for handle, name in zip(*ax.get_legend_handles_labels(), strict=True):
            shown.setdefault(name, handle)
    axes[0].legend(list(shown.values()), list(shown), fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0))
    fig.suptitle(textwrap.fill(f"{cv.claim.text} ({cv.verdict})", 70), fontsize=9)
    return fig


def _claim_panel(ax, comparisons: list[ComparisonVerdict], table: ReportTable) -> None:
    """One metric's comparisons of a claim, top to bottom: an interval per budget, the paper's ◇, the margin."""
    ys = list(range(len(comparisons)))[::-1]
    colors = {f: PALETTE[i % len(PALETTE)] for i, f in enumerate(table.fractions)}
    step = 0.5 / max(len(table.fractions), 1)
    for y, cv in zip(ys, comparisons, strict=True):
        for i, b in enumerate(cv.budgets):
            test = b.test
            if test is None or test.effect is None:
                continue
            lo, hi = (v if math.isfinite(v) else test.effect for v in test.ci)
            at = y + step * ((len(cv.budgets) - 1) / 2 - i)
            ax.errorbar(test.effect, at, xerr=[[test.effect - lo], [hi - test.effect]], fmt="o", markersize=4,
                        color=colors.get(b.fraction, "#444"), capsize=3, label=budget_label(b.fraction))  # fmt: skip
        if cv.paper_delta is not None:
            ax.plot(cv.paper_delta, y, marker="D", color="#777", mfc="none", linestyle="none", label="paper")
        margin = cv.comparison.margin
        if cv.comparison.expect == "same" and margin:
            ax.fill_betweenx([y - 0.4, y + 0.4], -margin, margin, color="#2ca02c", alpha=0.15, label="margin")
        elif cv.comparison.expect == "no_worse" and margin:  # everything better than -margin passes
            sign = 1.0 if METRICS[cv.comparison.metric].higher_is_better else -1.0
            ends = [abs(v) for b in cv.budgets if b.test is not None for v in b.test.ci if math.isfinite(v)]
            far = 1.2 * max([margin, *ends])
            ax.fill_betweenx([y - 0.4, y + 0.4], -sign * margin, sign * far, color="#2ca02c", alpha=0.15,
                             label="margin")  # fmt: skip
    ax.axvline(0.0, color="#444", linewidth=0.8)
    against = [c.comparison.against or table.base for c in comparisons]
    ax.set_yticks(ys, [f"{c.comparison.row} vs {a}" for c, a in zip(comparisons, against, strict=True)])
    ax.set_ylim(-0.7, len(comparisons) - 0.3)
    ax.grid(axis="x", alpha=0.3)


def make_plots(table: ReportTable, results: StudyResults, out_dir: Path) -> list[Plot]:
    """Every plot the data allows (none for a study with no complete trial), written under `out_dir`."""
    out_dir.mkdir(parents=True, exist_ok=True)
    plots = [
        plot_bleu_vs_params(table, out_dir),
        *plot_curves(table, results, out_dir),
        plot_bleu_deltas(table, out_dir),
        *plot_claims(table, out_dir),
    ]
    return [p for p in plots if p is not None]


VERDICT_COLORS = {"reproduced": "#2ca02c", "contradicted": "#d62728", "inconclusive": "#1f77b4"}


def plot_trend(trend: SizeTrend, out_dir: Path, name: str) -> Plot | None:
    """One panel per comparison with a tested rung: its effect at T with the 95% interval against the base's
    parameter count (log scale), coloured by the rung's verdict (hollow where the rung is left out of the trend),
    the paper's difference dashed and zero solid; written as `name`.png and .svg. None when nothing was tested."""
    from matplotlib.figure import Figure  # lazy: matplotlib costs ~0.3 s, only when plotting
    from matplotlib.lines import Line2D  # lazy: matplotlib costs ~0.3 s, only when plotting
    from matplotlib.ticker import FuncFormatter, NullFormatter  # lazy: matplotlib costs ~0.3 s, only when plotting

    shown = [(claim, comp) for claim, comp in trend.comparisons if any(_tested(p) for p in comp.points)]
    if not shown:
        return None
    cols = min(3, len(shown))
    rows = math.ceil(len(shown) / cols)
    fig = Figure(figsize=(3.6 * cols, 0.6 + 2.9 * rows))
    axes = fig.subplots(rows, cols, squeeze=False).ravel()
    sizes = [r.params_m for r in trend.rungs]
    for ax, (claim, comp) in zip(axes, shown, strict=False):
        _trend_panel(ax, comp, sizes)
        ax.set_title(textwrap.fill(f"{claim.id}: {comparison_label(comp)} ({comp.trend})", 44), fontsize=8)
        ax.set_xscale("log")
        ax.set_xticks(sizes, [f"{s:.3g}" for s in sizes], fontsize=7)
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:+g}" if v else "0"))
        ax.tick_params(axis="y", labelsize=7)
        ax.set_xlabel("base parameters ×10⁶ (log scale)", fontsize=7)
        ax.grid(alpha=0.3)
    for ax in axes[len(shown) :]:
        ax.set_visible(False)
    handles = [
        Line2D([], [], marker="o", color=color, linestyle="none", label=verdict)
        for verdict, color in VERDICT_COLORS.items()
    ]
    handles += [
        Line2D([], [], marker="o", color="#999", mfc="white", linestyle="none", label="not in the trend"),
        Line2D([], [], color="#777", linestyle="--", label="paper"),
    ]
    axes[0].legend(handles=handles, fontsize=6, loc="best")
    fig.suptitle(textwrap.fill(f"Effects over model size: {' < '.join(r.label for r in trend.rungs)}", 100), fontsize=9)
    out_dir.mkdir(parents=True, exist_ok=True)
    return _save(fig, out_dir, name, PLOT_CAPTION)


def _tested(point) -> bool:
    return point is not None and point.effect is not None and point.low is not None and point.high is not None


def _trend_panel(ax, comp: ComparisonTrend, sizes: list[float]) -> None:
    """One comparison over the rungs: the intervals, a line through the rungs in the trend, the paper's line."""
    line = []
    for i, (point, x) in enumerate(zip(comp.points, sizes, strict=True)):
        if point is None or point.effect is None or point.low is None or point.high is None:
            continue
        effect = point.effect
        lo, hi = (v if math.isfinite(v) else effect for v in (point.low, point.high))
        used = comp.usable(i)
        color = VERDICT_COLORS.get(point.verdict, "#777") if used else "#999"
        ax.errorbar(x, effect, yerr=[[effect - lo], [hi - effect]], fmt="o", markersize=5, color=color,
                    mfc=color if used else "white", capsize=3, elinewidth=1)  # fmt: skip
        if used:
            line.append((x, effect))
    if len(line) > 1:
        ax.plot(*zip(*line, strict=True), color="#555", linewidth=0.8, zorder=0)
    ax.axhline(0.0, color="#444", linewidth=0.8)
    if comp.paper_delta is not None:
        ax.axhline(comp.paper_delta, color="#777", linestyle="--", linewidth=1.0)
    metric = METRICS[comp.metric].label
    ax.set_ylabel(f"{metric} − {metric} of {comp.against}", fontsize=7)


def plot_comparison(a: Record, b: Record, path: Path) -> Path:
    """The two runs' curves (dev PPL, dev BLEU, train loss) over steps, as one PNG or SVG."""
    from matplotlib.figure import Figure  # lazy: matplotlib costs ~0.3 s, only when plotting

    fig = Figure(figsize=(11.0, 3.4))
    axes = fig.subplots(1, 3)
    for ax, (curve, key) in zip(axes, (("val", "ppl"), ("val", "bleu"), ("train", "loss")), strict=True):
        for record, color in ((a, "#1f77b4"), (b, "#d62728")):
            points = [p for p in record.curves.get(curve) or [] if p.get(key) is not None and p.get("step") is not None]
            ax.plot([p["step"] for p in points], [p[key] for p in points], color=color, label=record.label)
        ax.set_title(f"{curve} {key}", fontsize=9)
        ax.set_xlabel("training step")
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    return path
