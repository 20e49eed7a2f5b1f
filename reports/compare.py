"""What differs between two runs: config fields that differ, metrics side by side, curves as sparklines.

A run is a record file, or a row of a results directory ('B1', or 'B1@1' for seed 1).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ablations import ledger
from data.errors import AblateError
from reports.results import Record, read_record, read_study_json
from reports.significance import check_pair, paired_test, read_lines

SPARKS = "▁▂▃▄▅▆▇█"
CURVES = (("val", "ppl"), ("val", "bleu"), ("val", "loss"), ("train", "loss"))
"""(curve, key) pairs shown, when either run has them."""


def resolve_run(spec: str, out_dir: str | Path | None = None) -> Record:
    """A record file path, or 'row' / 'row@seed' inside `out_dir`; without a seed, the lowest complete seed."""
    path = Path(spec)
    if path.suffix == ".json" or path.is_file():
        if not path.is_file():
            raise AblateError(f"record file {path} does not exist")
        return read_record(path)
    if out_dir is None:
        raise AblateError(f"'{spec}' is not a record file; to name a row, pass the results directory with --out OUT")
    out = Path(out_dir)
    meta = read_study_json(out)
    row, _, seed_text = spec.partition("@")
    if seed_text and not seed_text.isdigit():
        raise AblateError(f"'{spec}': the seed after '@' must be an integer, e.g. {row}@0")
    if seed_text:
        candidates = [ledger.record_path(out, row, int(seed_text))]
    else:
        candidates = ledger.record_paths(out, row)
    records = [read_record(p, out) for p in candidates if p.is_file()]
    if not records:
        known = ledger.recorded_rows(out)
        declared = [r["name"] for r in meta["rows"]]
        what = "that seed has no record yet" if row in declared or row in known else "no such row"
        raise AblateError(
            f"{out}: no finished run '{spec}' ({what}); rows with records: {', '.join(known) or 'none yet'}"
        )
    return next((r for r in records if r.state == "complete"), records[0])


def _flatten(config: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, value in config.items():
        if isinstance(value, dict):
            flat |= _flatten(value, f"{prefix}{key}.")
        else:
            flat[f"{prefix}{key}"] = value
    return flat


def config_differences(a: Record, b: Record) -> list[tuple[str, Any, Any]]:
    """(field, A's value, B's value) for every config field that differs ('<unset>' where one lacks it)."""
    fa, fb = _flatten(a.config), _flatten(b.config)
    missing = "<unset>"
    return [
        (key, fa.get(key, missing), fb.get(key, missing))
        for key in sorted(set(fa) | set(fb))
        if fa.get(key, missing) != fb.get(key, missing)
    ]


def sparkline(values: list[float], lo: float, hi: float, width: int = 24) -> str:
    """Values resampled to at most `width` points, drawn with block characters on the scale [lo, hi]."""
    if not values:
        return ""
    if len(values) > width:
        values = [values[round(i * (len(values) - 1) / (width - 1))] for i in range(width)]
    span = hi - lo
    return "".join(SPARKS[0 if span <= 0 else min(7, int((v - lo) / span * 7.999))] for v in values)


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}" if abs(value) < 1e6 else f"{value:.3e}"
    if value is None:
        return "-"
    return str(value)


def _series(record: Record, curve: str, key: str) -> list[float]:
    return [float(p[key]) for p in record.curves.get(curve) or [] if p.get(key) is not None]


def _table(rows: list[tuple[str, ...]], indent: str = "  ") -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return [indent + "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]


def compare_runs(a: Record, b: Record, *, n_samples: int = 1000) -> str:
    """The side-by-side text: who the runs are, config differences, metrics, dev-set significance, curves."""
    lines = []
    for tag, r in (("A", a), ("B", b)):
        reason = f" ({r.reason})" if r.reason else ""
        lines.append(f"{tag}: {r.label}  [{r.group}]  {r.state}{reason}  {r.path}")

    diffs = config_differences(a, b)
    lines += ["", f"config: {len(diffs)} field(s) differ" + (":" if diffs else " (same configuration)")]
    if diffs:
        lines += _table([("field", "A", "B")] + [(k, _fmt(va), _fmt(vb)) for k, va, vb in diffs])

    keys = [k for k in dict.fromkeys([*a.metrics, *b.metrics]) if k != "bleu_signature"]
    if keys:
        rows = [("metric", "A", "B", "B - A")]
        for key in keys:
            va, vb = a.metrics.get(key), b.metrics.get(key)
            numeric = isinstance(va, (int, float)) and isinstance(vb, (int, float))
            rows.append((key, _fmt(va), _fmt(vb), f"{vb - va:+.4g}" if numeric else ""))  # type: ignore[operator]
        lines += ["", "metrics:"] + _table(rows)
    sig_a, sig_b = a.metrics.get("bleu_signature"), b.metrics.get("bleu_signature")
    if sig_a and sig_b and sig_a != sig_b:
        lines.append(f"  BLEU signatures differ, so BLEU is not comparable: {sig_a} vs {sig_b}")

    problem = check_pair(b, a)
    if problem is None:
        hyps_a, hyps_b = read_lines(a.hypotheses), read_lines(b.hypotheses)  # type: ignore[arg-type]
        refs = read_lines(a.references)  # type: ignore[arg-type]
        tested = paired_test(hyps_a, {"B": hyps_b}, refs, signature=sig_a, n_samples=n_samples)
        p, delta = tested["B"]
        changed = sum(x != y for x, y in zip(hyps_a, hyps_b, strict=True))
        lines += [
            "",
            f"dev hypotheses: {changed}/{len(refs)} lines differ; BLEU B - A = {delta:+.2f}, "
            f"paired bootstrap p = {p:.4f} (sacrebleu, {n_samples} resamples)",
        ]
    else:
        lines += ["", f"dev hypotheses: not compared ({problem})"]

    curve_lines: list[tuple[str, ...]] = []
    for curve, key in CURVES:
        sa, sb = _series(a, curve, key), _series(b, curve, key)
        if not sa and not sb:
            continue
        lo, hi = min(sa + sb), max(sa + sb)
        for tag, series in (("A", sa), ("B", sb)):
            label = f"{curve} {key}" if tag == "A" else ""
            ends = f"{_fmt(series[0])} -> {_fmt(series[-1])} ({len(series)} points)" if series else "no points"
            curve_lines.append((label, tag, sparkline(series, lo, hi), ends))
    if curve_lines:
        lines += ["", "curves (shared scale per metric, first -> last):"] + _table(curve_lines)
    return "\n".join(lines) + "\n"


def plot_comparison(a: Record, b: Record, path: Path) -> Path:
    """The two runs' curves (dev PPL, dev BLEU, train loss) over steps, as one PNG or SVG."""
    from matplotlib.figure import Figure

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
