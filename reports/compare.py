"""What differs between two runs, or between two results directories row by row.

Two runs (`compare_runs`): config fields that differ, metrics side by side, dev-set significance, curves as
sparklines. A run is a record file, or a row of a results directory ('B1', or 'B1@1' for seed 1): `reports.lookup`
finds it, and `reports.plots.plot_comparison` draws the two runs' curves.

Two results directories (`compare_sweeps`): a study rerun with one change (another corpus, preset or recipe field)
beside the original. Rows are matched by name; each metric is aggregated over the complete seeds of each side, and
B - A is tested with the statistics of the report (`ablations.statistics.significance`: seed variance pooled over every
row of both directories, plus a paired bootstrap over the dev sentences where both sides scored the same ones). What the
two directories change in every row is shown once; a row that differs in anything else, misses a side, or has not
levelled off is flagged. The result is a `SweepComparison`; each format writes it out (`ablate compare --format`:
`reports.text`, `reports.markdown`, `reports.csvfile`, `reports.jsonfile`, through `reports.writers`).
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ablate.ablations.results import Record, StudyResults, read_lines, system_scores
from ablate.ablations.statistics import (
    N_SAMPLES,
    Convergence,
    RowTest,
    SystemScores,
    compare,
    compare_rows,
    holm,
    resample_weights,
    row_convergence,
)
from ablate.data.errors import AblateError
from ablate.lightning_modules.metrics import METRICS
from ablate.reports.table import IGNORED_DIFFERENCES, Stat

SPARKS = "▁▂▃▄▅▆▇█"
CURVES = (("val", "ppl"), ("val", "bleu"), ("val", "loss"), ("train", "loss"))
"""(curve, key) pairs shown, when either run has them."""


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


def short_value(value: Any) -> str:
    """A value in four significant figures where it is a float, '-' for None (`ablate compare`'s config values)."""
    if isinstance(value, float):
        return f"{value:.4g}" if abs(value) < 1e6 else f"{value:.3e}"
    if value is None:
        return "-"
    return str(value)


def sparkline(values: list[float], lo: float, hi: float, width: int = 24) -> str:
    """Values resampled to at most `width` points, drawn with block characters on the scale [lo, hi]."""
    if not values:
        return ""
    if len(values) > width:
        values = [values[round(i * (len(values) - 1) / (width - 1))] for i in range(width)]
    span = hi - lo
    return "".join(SPARKS[0 if span <= 0 else min(7, int((v - lo) / span * 7.999))] for v in values)


def _series(record: Record, curve: str, key: str) -> list[float]:
    return [float(p[key]) for p in record.curves.get(curve) or [] if p.get(key) is not None]


def _table(rows: list[tuple[str, ...]], indent: str = "  ") -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return [indent + "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]


def compare_runs(a: Record, b: Record, *, n_samples: int = N_SAMPLES) -> str:
    """The side-by-side text: who the runs are, config differences, metrics, dev-set significance, curves."""
    lines = []
    for tag, r in (("A", a), ("B", b)):
        reason = f" ({r.reason})" if r.reason else ""
        lines.append(f"{tag}: {r.label}  [{r.group}]  {r.state}{reason}  {r.path}")

    diffs = config_differences(a, b)
    lines += ["", f"config: {len(diffs)} field(s) differ" + (":" if diffs else " (same configuration)")]
    if diffs:
        lines += _table([("field", "A", "B")] + [(k, short_value(va), short_value(vb)) for k, va, vb in diffs])

    keys = [k for k in dict.fromkeys([*a.metrics, *b.metrics]) if k != "bleu_signature"]
    if keys:
        rows = [("metric", "A", "B", "B - A")]
        for key in keys:
            va, vb = a.metrics.get(key), b.metrics.get(key)
            diff = f"{vb - va:+.4g}" if isinstance(va, int | float) and isinstance(vb, int | float) else ""
            rows.append((key, short_value(va), short_value(vb), diff))
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
            ends = "no points"
            if series:
                ends = f"{short_value(series[0])} -> {short_value(series[-1])} ({len(series)} points)"
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
    (`ablations.statistics.significance.compare`) with one run a side: the paired bootstrap over the dev sentences
    alone, since two runs cannot tell seed noise."""
    assert a.hypotheses is not None and b.hypotheses is not None  # `check_pair` made sure
    hyps_a, hyps_b = read_lines(a.hypotheses), read_lines(b.hypotheses)
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
    """metric -> B - A (`ablations.statistics.significance.compare`), p_holm over the rows compared on that metric;
    empty if one side
    lacks the row."""
    same_sentences: bool | None = None
    """True when every complete seed of both sides scored the same dev references; None: cannot tell (a side has no
    complete seed or no references file)."""
    differences: list[tuple[str, Any, Any]] = field(default_factory=list)
    """(field, A, B) for config fields this row changes beyond what the directories change in every row."""
    flags: list[str] = field(default_factory=list)
    """Plain-language warnings: a missing side, missing seeds, no plateau, other differences, other dev sets."""

    def interval(self, metric: str) -> tuple[float, float] | None:
        """B - A's 95% interval on `metric`, or None where no noise could be estimated (one seed, no per-sentence
        statistics) or one side lacks the row."""
        test = self.tests.get(metric)
        if test is None or test.effect is None or (test.se_seeds is None and test.se_sentences is None):
            return None
        return test.ci if all(math.isfinite(end) for end in test.ci) else None


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


def compare_sweeps(a: StudyResults, b: StudyResults, *, n_samples: int = N_SAMPLES) -> SweepComparison:
    """Compare two results directories row by row (see the module docstring)."""
    names_b = {spec.name for spec in b.rows}
    common = [spec.name for spec in a.rows if spec.name in names_b]
    if not common:
        raise AblateError(
            f"{a.out_dir} and {b.out_dir} have no row in common (A: {', '.join(r.name for r in a.rows)}; "
            f"B: {', '.join(r.name for r in b.rows)}): compare two output directories of the same study, "
            "or two rows of one sweep with `ablate compare ROW_A ROW_B --study OUT`"
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
    """row -> metric -> B - A, with `ablations.statistics.significance.compare_rows`: the seed variance pooled over
    every row of both directories, the sentence bootstrap only for rows whose two sides scored the same dev sentences,
    then Holm over the rows (each (B, A) pair is its own reference there, so compare_rows' own Holm leaves p as it
    is)."""
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
        shown = ", ".join(f"{k} {short_value(va)} → {short_value(vb)}" for k, va, vb in row.differences[:3])
        more = f" and {len(row.differences) - 3} more" if len(row.differences) > 3 else ""
        flags.append(f"also differs: {shown}{more}")
    if row.same_sentences is False and not all_differ:
        flags.append("different dev sentences: seed noise only")
    if row.a is not None and row.b is not None and row.a.complete and row.b.complete and row.same_sentences is None:
        flags.append("no dev references file: sentence noise not counted")
    return flags


_STATE_WORDS = {"pending": "without record", "failed": "failed", "pruned": "pruned", "running": "running"}
