"""What differs between two runs, or between two results directories row by row.

Two runs (`compare_runs`): config fields that differ, metrics side by side, dev-set significance, curves as
sparklines. A run is a record file, or a row of a results directory ('B1', or 'B1@1' for seed 1).

Two results directories (`compare_sweeps`): a study rerun with one change (another corpus, preset or recipe field)
beside the original. Rows are matched by name; each metric is aggregated over the complete seeds of each side, and
B - A is tested with the statistics of the report (`reports.stats`: seed variance pooled over every row of both
directories, plus a paired bootstrap over the dev sentences where both sides scored the same ones). What the two
directories change in every row is shown once; a row that differs in anything else, misses a side, or has not
levelled off is flagged.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ablate.ablations import ledger
from ablate.ablations.record import Record, read_study_json
from ablate.data.errors import AblateError
from ablate.reports.claims import p_text
from ablate.reports.convergence import PLATEAU_BLEU, PLATEAU_PPL, Convergence, row_convergence
from ablate.reports.formats import stat_text
from ablate.reports.metrics import read_lines, system_scores
from ablate.reports.results import StudyResults, load_results
from ablate.reports.stats import (
    METRICS,
    N_SAMPLES,
    RowTest,
    SystemScores,
    compare,
    compare_rows,
    holm,
    resample_weights,
)
from ablate.reports.table import IGNORED_DIFFERENCES, Stat
from ablate.reports.writers import Context, writer

SPARKS = "▁▂▃▄▅▆▇█"
CURVES = (("val", "ppl"), ("val", "bleu"), ("val", "loss"), ("train", "loss"))
"""(curve, key) pairs shown, when either run has them."""


def resolve_run(spec: str, out_dir: str | Path | None = None) -> Record:
    """A record file path, or 'row' / 'row@seed' inside `out_dir`; without a seed, the lowest complete seed."""
    path = Path(spec)
    if path.suffix == ".json" or path.is_file():
        if not path.is_file():
            raise AblateError(f"record file {path} does not exist")
        return Record.read(path)
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
    records = [Record.read(p, out) for p in candidates if p.is_file()]
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
    return _differences(a.config, b.config)


def _differences(a: dict[str, Any], b: dict[str, Any]) -> list[tuple[str, Any, Any]]:
    fa, fb = _flatten(a), _flatten(b)
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
    lines += ["", _dev_test(a, b, n_samples) if problem is None else f"dev hypotheses: not compared ({problem})"]

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


def check_pair(record: Record, base: Record) -> str | None:
    """Why `record` cannot be paired with `base` sentence by sentence on the same dev set, or None if it can."""
    if record.hypotheses is None or not record.hypotheses.is_file():
        return f"{record.label}: no dev hypotheses file"
    if base.hypotheses is None or not base.hypotheses.is_file():
        return f"{base.label}: no dev hypotheses file"
    if base.references is None or not base.references.is_file():
        return f"{base.label}: no dev references file"
    if record.references is not None and record.references != base.references:
        if not record.references.is_file() or read_lines(record.references) != read_lines(base.references):
            return f"{record.label}: dev references differ from those of {base.label}"
    n_refs = len(read_lines(base.references))
    n_hyps = len(read_lines(record.hypotheses))
    if n_hyps != n_refs:
        return f"{record.label}: {n_hyps} hypotheses for {n_refs} references"
    return None


def _dev_test(a: Record, b: Record, n_samples: int) -> str:
    """B's dev BLEU against A's (a pair that `check_pair` accepts), tested as the report tests rows
    (`reports.stats.compare`) with one run a side: the paired bootstrap over the dev sentences alone, since two runs
    cannot tell seed noise."""
    hyps_a, hyps_b = read_lines(a.hypotheses), read_lines(b.hypotheses)  # type: ignore[arg-type]
    changed = sum(x != y for x, y in zip(hyps_a, hyps_b, strict=True))
    scores = [system_scores(replace(r, references=a.references), "bleu") for r in (b, a)]
    if scores[0] is None or scores[1] is None:
        return f"dev hypotheses: {changed}/{len(hyps_a)} lines differ; no BLEU to test"
    test = compare("B", "A", "bleu", [scores[0]], [scores[1]], (None, 0), resample_weights(len(hyps_a), n_samples))
    p = f"{test.p:.4f}" if test.p is not None else "n/a"
    return (
        f"dev hypotheses: {changed}/{len(hyps_a)} lines differ; BLEU B - A = {test.effect:+.2f}, paired bootstrap "
        f"p = {p} (over the dev sentences, {n_samples} resamples; one run a side, so seed noise is not counted)"
    )


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


# ---------------------------------------------------------------------------------- two results directories
NOT_A_CHANGE = IGNORED_DIFFERENCES | {("data", "cache_dir"), ("data", "num_workers")}
"""Config fields that may differ between two directories without making their rows different experiments."""
NOT_A_CHANGE_SECTIONS = ("tracking",)
"""Config sections that say where a run is logged, not how it is trained."""
VOCABULARY_FIELDS = (
    "model.vocab_size",
    "data.vocab_size",
    "data.spm_model_type",
    "data.corpus",
    "data.src",
    "data.tgt",
)
"""Fields whose change makes perplexity (per subword) incomparable in level between the two directories."""
VARIES = "(varies by row)"
"""A setting's value where the rows change the same field to different values (e.g. a preset changes d_model)."""


@dataclass(frozen=True, kw_only=True)
class SweepSide:
    """One of the two results directories."""

    out_dir: Path
    """The results directory (OUT of `ablate sweep`)."""
    study: str
    """Study name in its study.json."""
    preset: str
    """Preset name in its study.json."""
    seeds: list[int]
    """Seeds study.json declares for every row."""


@dataclass(frozen=True, kw_only=True)
class RowSide:
    """One row in one directory: its metrics over the complete seeds and how far its trials got."""

    stats: dict[str, Stat | None]
    """metric ('bleu', 'ppl', 'chrf') -> mean and std over the complete seeds (None: no value)."""
    states: dict[str, int]
    """Trial state -> number of seeds in it ('pending': no record yet; the Optuna storage is not read)."""
    convergence: Convergence | None
    """The row's least converged trial (None: no finished trial)."""

    @property
    def complete(self) -> int:
        return self.states.get("complete", 0)

    @property
    def total(self) -> int:
        return sum(self.states.values())


@dataclass(kw_only=True)
class RowComparison:
    """One row name, A beside B."""

    name: str
    """Row name, the key the two directories are matched on."""
    group: str
    """Row group (A's where the row is in A)."""
    a: RowSide | None
    """The row in A, or None if A has no such row."""
    b: RowSide | None
    """The row in B, or None if B has no such row."""
    tests: dict[str, RowTest] = field(default_factory=dict)
    """metric -> B - A (`reports.stats.compare`), p_holm over the rows compared on that metric; empty if one side
    lacks the row."""
    same_sentences: bool | None = None
    """True when every complete seed of both sides scored the same dev references; None: cannot tell (a side has no
    complete seed or no references file)."""
    differences: list[tuple[str, Any, Any]] = field(default_factory=list)
    """(field, A, B) for config fields this row changes beyond what the directories change in every row."""
    flags: list[str] = field(default_factory=list)
    """Plain-language warnings: a missing side, missing seeds, no plateau, other differences, other dev sets."""


@dataclass(kw_only=True)
class SweepComparison:
    """Two results directories compared row by row: what `ablate compare OUT_A OUT_B` prints."""

    a: SweepSide
    """The directory compared against (the 'before')."""
    b: SweepSide
    """The directory compared (the 'after'): every difference is B - A."""
    settings: list[tuple[str, Any, Any]]
    """(setting, A, B) for what differs between the directories: study, preset, seeds, and every config field
    changed in every row in common (the intended change); VARIES where the values differ from row to row."""
    rows: list[RowComparison]
    """A's rows in A's order, then the rows only B has."""
    n_samples: int
    """Bootstrap resamples of the dev sentences."""
    notes: list[str] = field(default_factory=list)
    """One-line remarks that hold for the whole comparison."""


def load_sweep(out_dir: str | Path) -> StudyResults:
    """A results directory from its study.json and records (not its Optuna storage: finished trials are what
    compares); AblateError naming the directory when it has no record yet."""
    results = load_results(Path(out_dir), use_optuna=False)
    if not any(s.record is not None for s in results.status.values()):
        raise AblateError(
            f"{results.out_dir}: no trial record yet ({results.out_dir / 'records'} is empty): "
            "wait until a trial of that sweep finishes, or check the path"
        )
    return results


def compare_sweeps(a: StudyResults, b: StudyResults, *, n_samples: int = N_SAMPLES) -> SweepComparison:
    """Compare two results directories row by row (see the module docstring)."""
    names_b = {spec.name for spec in b.rows}
    common = [spec.name for spec in a.rows if spec.name in names_b]
    if not common:
        raise AblateError(
            f"{a.out_dir} and {b.out_dir} have no row in common (A: {', '.join(r.name for r in a.rows)}; "
            f"B: {', '.join(r.name for r in b.rows)}): compare two output directories of the same study, "
            "or two rows of one sweep with `ablate compare ROW_A ROW_B --out OUT`"
        )
    diffs = {name: _differences(_row_config(a, name), _row_config(b, name)) for name in common}
    changed = set.intersection(*({key for key, _, _ in d} for d in diffs.values()))
    sentences = {name: _same_sentences(a.records(name), b.records(name)) for name in common}
    tests = _sweep_tests(a, b, common, sentences, n_samples)
    names_a = {spec.name for spec in a.rows}
    groups = {spec.name: spec.group for spec in (*b.rows, *a.rows)}  # A's group wins
    rows = [
        RowComparison(
            name=name,
            group=groups[name],
            a=_row_side(a, name) if name in names_a else None,
            b=_row_side(b, name) if name in names_b else None,
            tests=tests.get(name, {}),
            same_sentences=sentences.get(name),
            differences=[d for d in diffs.get(name, []) if d[0] not in changed],
        )
        for name in [*(r.name for r in a.rows), *(r.name for r in b.rows if r.name not in names_a)]
    ]
    judged = [same for same in sentences.values() if same is not None]
    all_differ = bool(judged) and not any(judged)  # said once in the notes, not on every row
    for row in rows:
        row.flags = _flags(row, all_differ=all_differ)
    return SweepComparison(
        a=_side(a),
        b=_side(b),
        settings=_study_differences(a, b) + _changed_fields(diffs, changed),
        rows=rows,
        n_samples=n_samples,
        notes=_sweep_notes(rows, changed, all_differ),
    )


def _side(results: StudyResults) -> SweepSide:
    seeds = [int(s) for s in results.meta.get("seeds") or []] or results.seeds
    return SweepSide(out_dir=results.out_dir, study=results.study, preset=results.preset, seeds=seeds)


def _row_config(results: StudyResults, name: str) -> dict[str, Any]:
    """The row's resolved config (study.json's, else its first record's), less what does not change a result."""
    records = results.records(name, state=None)
    config = results.row(name).config or (records[0].config if records else {})
    return {
        section: {k: v for k, v in fields.items() if (section, k) not in NOT_A_CHANGE}
        if isinstance(fields, dict)
        else fields
        for section, fields in config.items()
        if section not in NOT_A_CHANGE_SECTIONS
    }


def _row_side(results: StudyResults, name: str) -> RowSide:
    records = results.records(name)
    states: dict[str, int] = {}
    for (row, _), status in sorted(results.status.items()):
        if row == name:
            states[status.state] = states.get(status.state, 0) + 1
    return RowSide(
        stats={metric: Stat.of(records, metric) for metric in METRICS},
        states=states,
        convergence=row_convergence(results.records(name, state=None)),
    )


@functools.cache
def _digest(path: Path, stamp: tuple[int, int]) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _references_digest(record: Record) -> str | None:
    ref = record.references
    if ref is None or not ref.is_file():
        return None
    stat = ref.stat()
    return _digest(ref, (stat.st_mtime_ns, stat.st_size))


def _same_sentences(a: list[Record], b: list[Record]) -> bool | None:
    """Did every complete seed of both sides score the same dev references? None when that cannot be told."""
    if not a or not b:
        return None
    digests = {_references_digest(r) for r in (*a, *b)}
    return None if None in digests else len(digests) == 1


def _sweep_tests(
    a: StudyResults, b: StudyResults, common: list[str], sentences: dict[str, bool | None], n_samples: int
) -> dict[str, dict[str, RowTest]]:
    """row -> metric -> B - A, with `reports.stats.compare_rows`: the seed variance pooled over every row of both
    directories, the sentence bootstrap only for rows whose two sides scored the same dev sentences, then Holm over
    the rows (each (B, A) pair is its own reference there, so compare_rows' own Holm leaves p as it is)."""
    tests: dict[str, dict[str, RowTest]] = {name: {} for name in common}
    for metric in METRICS:
        systems: dict[str, list[SystemScores]] = {}
        for tag, results in (("A", a), ("B", b)):
            for spec in results.rows:
                scores = [s for s in (system_scores(r, metric) for r in results.records(spec.name)) if s is not None]
                if not sentences.get(spec.name):  # other sentences (or unknown): the bootstrap would pair wrongly
                    scores = [SystemScores(score=s.score) for s in scores]
                systems[f"{tag}:{spec.name}"] = scores
        pairs = [(f"B:{name}", f"A:{name}") for name in common]
        tested = compare_rows(systems, pairs, metric, n_samples=n_samples)
        adjusted = holm([tested[(*pair, metric)].p for pair in pairs])
        for name, pair, p_holm in zip(common, pairs, adjusted, strict=True):
            tests[name][metric] = replace(tested[(*pair, metric)], row=name, against=name, p_holm=p_holm)
    return tests


def _study_differences(a: StudyResults, b: StudyResults) -> list[tuple[str, Any, Any]]:
    sa, sb = _side(a), _side(b)
    pairs = (("study", sa.study, sb.study), ("preset", sa.preset, sb.preset), ("seeds", sa.seeds, sb.seeds))
    return [(key, va, vb) for key, va, vb in pairs if va != vb]


def _changed_fields(diffs: dict[str, list[tuple[str, Any, Any]]], changed: set[str]) -> list[tuple[str, Any, Any]]:
    """Each field changed in every row: its two values, or VARIES where rows change it differently."""
    out = []
    for key in sorted(changed):
        values = {json.dumps(pair, default=str): pair for d in diffs.values() for k, *pair in d if k == key}
        out.append((key, *next(iter(values.values()))) if len(values) == 1 else (key, VARIES, VARIES))
    return out


def _sweep_notes(rows: list[RowComparison], changed: set[str], all_differ: bool) -> list[str]:
    notes = []
    if all_differ:
        notes.append(
            "A and B scored different dev sentences: B - A counts seed noise only, and a BLEU or chrF level on one "
            "dev set is not a level on the other"
        )
    if any(key in changed for key in VOCABULARY_FIELDS):
        notes.append("the corpus or the vocabulary changed: PPL is per subword, so its levels are not comparable")
    if any(t.effect is not None and t.se_seeds is None for r in rows for t in r.tests.values()):
        notes.append(
            "every row has one seed on both sides: seed noise is not estimated, so an interval counts the dev "
            "sentences only (rerun with --seeds 2 or more)"
        )
    return notes


def _flags(row: RowComparison, *, all_differ: bool) -> list[str]:
    """The row's warnings, in plain words."""
    flags = []
    for tag, side in (("A", row.a), ("B", row.b)):
        if side is None:
            flags.append(f"missing in {tag}")
            continue
        others = ", ".join(f"{n} {_STATE_WORDS.get(s, s)}" for s, n in side.states.items() if s != "complete")
        if side.complete == 0:
            flags.append(f"{tag}: no complete seed" + (f" ({others})" if others else ""))
        elif others:
            flags.append(f"{tag}: {side.complete}/{side.total} seeds complete ({others})")
        conv = side.convergence
        if conv is not None and side.complete and conv.state != "plateau":
            flags.append(
                f"{tag}: plateau unknown" if conv.state == "unknown" else f"{tag}: not at plateau, {conv.text}"
            )
    if row.differences:
        shown = ", ".join(f"{k} {_fmt(va)} → {_fmt(vb)}" for k, va, vb in row.differences[:3])
        more = f" and {len(row.differences) - 3} more" if len(row.differences) > 3 else ""
        flags.append(f"also differs: {shown}{more}")
    if row.same_sentences is False and not all_differ:
        flags.append("different dev sentences: seed noise only")
    if row.a is not None and row.b is not None and row.a.complete and row.b.complete and row.same_sentences is None:
        flags.append("no dev references file: sentence noise not counted")
    return flags


_STATE_WORDS = {"pending": "without record", "failed": "failed", "pruned": "pruned", "running": "running"}


# ------------------------------------------------------------------------------------ the comparison written out
# Each format is a writer registered with `reports.writers` (subject 'comparison'): `ablate compare --format`.


def _interval(test: RowTest | None) -> tuple[float, float] | None:
    """The test's 95% interval, or None where no noise could be estimated (one seed, no per-sentence statistics)."""
    if test is None or test.effect is None or (test.se_seeds is None and test.se_sentences is None):
        return None
    return test.ci if all(math.isfinite(end) for end in test.ci) else None


def _delta(test: RowTest | None, digits: int) -> str:
    if test is None or test.effect is None:
        return ""
    ci = _interval(test)
    interval = f" [{ci[0]:+.{digits}f}, {ci[1]:+.{digits}f}]" if ci else ""
    return f"{test.effect:+.{digits}f}{interval}"


def _seeds(side: RowSide | None) -> str:
    return "-" if side is None else f"{side.complete}/{side.total}"


SWEEP_COLUMNS = ("row", "seeds A → B", "metric", "A", "B", "B − A [95% CI]", "p (Holm)", "flags")
"""The table's columns (text and Markdown): one line per row and metric."""


def sweep_lines(cmp: SweepComparison) -> list[tuple[str, ...]]:
    """The table's cells, one tuple per row x metric; row name, seeds and flags on the row's first line."""
    lines = []
    for row in cmp.rows:
        for i, (metric, spec) in enumerate(METRICS.items()):
            first = i == 0
            test = row.tests.get(metric)
            lines.append(
                (
                    row.name if first else "",
                    f"{_seeds(row.a)} → {_seeds(row.b)}" if first else "",
                    spec.label,
                    stat_text(row.a.stats.get(metric) if row.a else None, spec.digits),
                    stat_text(row.b.stats.get(metric) if row.b else None, spec.digits),
                    _delta(test, spec.digits),
                    p_text(test.p_holm) if test and test.p_holm is not None else "",
                    "; ".join(row.flags) if first else "",
                )
            )
    return lines


def sweep_header(cmp: SweepComparison) -> list[str]:
    """Who A and B are, and what the two directories change in every row (said once, not per row)."""
    lines = [
        f"{tag}: {s.out_dir}  (study {s.study}, preset {s.preset}, seeds {', '.join(map(str, s.seeds))})"
        for tag, s in (("A", cmp.a), ("B", cmp.b))
    ]
    if cmp.settings:
        lines.append("B differs from A in every row in common:")
        lines += [f"  {key}: {_fmt(va)} → {_fmt(vb)}" for key, va, vb in cmp.settings]
    else:
        lines.append("A and B have the same settings in every row in common")
    return lines


def sweep_legend(cmp: SweepComparison) -> list[str]:
    return [
        "A, B: mean ± sample standard deviation over the complete seeds (seeds: complete/all, from the records).",
        "B − A: difference of the means with its 95% interval, counting seed noise (the variance over seeds pooled "
        f"over every row of both directories) and, where both sides scored the same dev sentences, sentence noise "
        f"(paired bootstrap, {cmp.n_samples} resamples); p: two-sided, Holm-corrected over the rows compared on "
        "that metric.",
        f"Not at plateau: dev BLEU moved by {PLATEAU_BLEU:g} or more, or dev PPL fell by more than "
        f"{PLATEAU_PPL:.0%}, between the last two validations: that row's numbers measure speed, not worth.",
        *cmp.notes,
    ]


@writer("text", "the terminal table", suffix=".txt", subject="comparison")
def sweep_to_text(cmp: SweepComparison, ctx: Context) -> str:
    """The terminal table (rich), `ctx.width` characters wide, with the header above and the legend below."""
    import io

    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    table = Table(show_lines=False)
    for col in SWEEP_COLUMNS:
        numeric = col in ("A", "B", "B − A [95% CI]", "p (Holm)")
        table.add_column(col, justify="right" if numeric else "left", overflow="fold")
    n = len(METRICS)
    for i, line in enumerate(sweep_lines(cmp)):
        table.add_row(*(Text(cell) for cell in line), end_section=(i + 1) % n == 0)
    buffer = io.StringIO()
    console = Console(file=buffer, width=ctx.width, no_color=True, highlight=False, emoji=False)
    console.print(Text("\n".join(sweep_header(cmp))))
    console.print(table)
    console.print(Text("\n".join(sweep_legend(cmp))))
    return buffer.getvalue()


@writer("md", "Markdown table", suffix=".md", subject="comparison")
def sweep_to_markdown(cmp: SweepComparison, ctx: Context) -> str:
    def cell(text: str) -> str:
        return text.replace("|", "\\|")

    lines = [f"## {cmp.a.out_dir.name} (A) vs {cmp.b.out_dir.name} (B)", ""]
    lines += [f"  - {cell(line.strip())}" if line.startswith(" ") else f"- {cell(line)}" for line in sweep_header(cmp)]
    lines += [
        "",
        "| " + " | ".join(SWEEP_COLUMNS) + " |",
        "|" + "|".join(":--" if c in ("row", "metric", "seeds A → B", "flags") else "--:" for c in SWEEP_COLUMNS) + "|",
    ]
    lines += ["| " + " | ".join(cell(c) for c in line) + " |" for line in sweep_lines(cmp)]
    lines += [""] + [f"- {cell(line)}" for line in sweep_legend(cmp)]
    return "\n".join(lines) + "\n"


def _num(value: float | None) -> float | None:
    return None if value is None or not math.isfinite(value) else round(value, 6)


def sweep_record(row: RowComparison) -> dict[str, Any]:
    """One row as flat raw values (a CSV line; the core of a JSON row)."""
    record: dict[str, Any] = {"row": row.name, "group": row.group, "in_a": row.a is not None, "in_b": row.b is not None}
    for tag, side in (("a", row.a), ("b", row.b)):
        record[f"seeds_complete_{tag}"] = side.complete if side else None
        record[f"seeds_total_{tag}"] = side.total if side else None
    for metric in METRICS:
        for tag, side in (("a", row.a), ("b", row.b)):
            stat = side.stats.get(metric) if side else None
            record[f"{metric}_mean_{tag}"] = _num(stat.mean) if stat else None
            record[f"{metric}_std_{tag}"] = _num(stat.std) if stat else None
        test = row.tests.get(metric)
        record[f"{metric}_delta"] = _num(test.effect) if test else None
        ci = _interval(test)
        record[f"{metric}_ci_low"] = _num(ci[0]) if ci else None
        record[f"{metric}_ci_high"] = _num(ci[1]) if ci else None
        record[f"{metric}_se"] = _num(test.se) if test else None
        record[f"{metric}_p"] = test.p if test else None  # not rounded: a p of 1e-9 is not 0
        record[f"{metric}_p_holm"] = test.p_holm if test else None
    for tag, side in (("a", row.a), ("b", row.b)):
        record[f"plateau_{tag}"] = side.convergence.state if side and side.convergence else None
    record["same_sentences"] = row.same_sentences
    record["other_differences"] = "; ".join(f"{k}={_fmt(va)}->{_fmt(vb)}" for k, va, vb in row.differences)
    record["flags"] = "; ".join(row.flags)
    return record


@writer("csv", "one line per row", suffix=".csv", subject="comparison")
def sweep_to_csv(cmp: SweepComparison, ctx: Context) -> str:
    import csv
    import io

    records = [sweep_record(r) for r in cmp.rows]
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(records[0]))
    writer.writeheader()
    writer.writerows(records)
    return buffer.getvalue()


@writer("json", "every value, per row and side", suffix=".json", subject="comparison")
def sweep_to_json(cmp: SweepComparison, ctx: Context) -> str:
    def side(s: SweepSide) -> dict[str, Any]:
        return {"out_dir": str(s.out_dir), "study": s.study, "preset": s.preset, "seeds": s.seeds}

    def detail(row: RowComparison) -> dict[str, Any]:
        per_side = {
            tag: None
            if r is None
            else {
                "states": r.states,
                "values": {m: {str(k): v for k, v in s.values.items()} for m, s in r.stats.items() if s is not None},
                "convergence": None
                if r.convergence is None
                else {"state": r.convergence.state, "text": r.convergence.text, "detail": r.convergence.detail},
            }
            for tag, r in (("a", row.a), ("b", row.b))
        }
        tests = {
            m: {
                "se_seeds": _num(t.se_seeds),
                "se_sentences": _num(t.se_sentences),
                "df": _num(t.df),
                "notes": list(t.notes),
            }
            for m, t in row.tests.items()
        }
        differences = [{"field": k, "a": va, "b": vb} for k, va, vb in row.differences]
        return sweep_record(row) | {"flags": row.flags, "differences": differences, "sides": per_side, "tests": tests}

    doc = {
        "a": side(cmp.a),
        "b": side(cmp.b),
        "settings": [{"setting": k, "a": va, "b": vb} for k, va, vb in cmp.settings],
        "n_samples": cmp.n_samples,
        "legend": sweep_legend(cmp),
        "rows": [detail(r) for r in cmp.rows],
    }
    return json.dumps(doc, indent=2, ensure_ascii=False, default=str) + "\n"
