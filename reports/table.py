"""Table 3 rebuilt from a results directory: one `ReportRow` per study row, numbers over seeds, the paper beside ours.

This module computes; the writers (`reports.cells`, `reports.legend`, one module per format) only format. Every
number here comes from the trial records (mean and sample standard deviation over the complete seeds), the paper's
from `ablations/study/builtin/table3.yaml`. The table shows the full budget T; the shorter budgets the trials were also
scored at (train.budgets) give each row's gain from the last of them to T, and every claim is judged at each of them
(`ablations.statistics.verdicts`).
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from typing import Any

from ablate.ablations.results import (
    FULL,
    Evidence,
    Record,
    RowSpec,
    StudyResults,
    TrialStatus,
    chrf_signature,
    machines_of,
    source_ratios,
    study_claims,
    study_verdicts,
    system_scores,
)
from ablate.ablations.statistics import (
    ALPHA,
    DEV_FACTORS,
    MAX_SEEDS,
    N_SAMPLES,
    SCREEN_ALPHA,
    SOURCE_RATIO_MIN,
    Claim,
    ClaimVerdict,
    Convergence,
    RowTest,
    SeedCorrelation,
    Tests,
    design_needed,
    half_width_with_one_more_seed,
    row_convergence,
    seed_correlation,
)
from ablate.lightning_modules.metrics import METRICS
from ablate.reports.claims import paper_ratio
from ablate.reports.paper import PaperRow, load_paper_table


@dataclass(frozen=True)
class ConfigColumn:
    """A config field shown as its own column, as in the paper."""

    key: str
    """Column key (also the CSV/JSON field name)."""
    header: str
    """Header in the paper's notation (plain text; formats add their own markup)."""
    section: str
    """Config section: 'model' or 'train'."""
    field: str
    """Field name in that section."""


CONFIG_COLUMNS = (
    ConfigColumn("N", "N", "model", "n_layers"),
    ConfigColumn("d_model", "d_model", "model", "d_model"),
    ConfigColumn("d_ff", "d_ff", "model", "d_ff"),
    ConfigColumn("h", "h", "model", "n_heads"),
    ConfigColumn("d_k", "d_k", "model", "d_k"),
    ConfigColumn("d_v", "d_v", "model", "d_v"),
    ConfigColumn("P_drop", "P_drop", "model", "p_drop"),
    ConfigColumn("eps_ls", "eps_ls", "model", "label_smoothing"),
    ConfigColumn("train_steps", "train steps", "train", "max_steps"),
)
"""The paper's configuration columns, in its order."""

IGNORED_DIFFERENCES = {("train", "seed"), ("data", "seed")}
"""Config fields that differ between rows without making them different experiments."""


@dataclass(frozen=True, kw_only=True)
class Stat:
    """A metric over seeds: mean and sample standard deviation (None with fewer than two seeds)."""

    values: dict[int, float]
    """seed -> value."""

    @property
    def n(self) -> int:
        return len(self.values)

    @property
    def mean(self) -> float:
        return statistics.fmean(self.values.values())

    @property
    def std(self) -> float | None:
        return statistics.stdev(self.values.values()) if self.n >= 2 else None

    @classmethod
    def of(cls, records: list[Record], metric: str) -> Stat | None:
        """The metric over those records that have it, or None if none does (chrF is computed from hypotheses)."""
        if metric == "chrf":
            scores = {r.seed: system_scores(r, "chrf") for r in records}
            values = {seed: s.score for seed, s in scores.items() if s is not None}
        else:
            values = {r.seed: float(r.metrics[metric]) for r in records if r.metrics.get(metric) is not None}
        return cls(values=values) if values else None


@dataclass(kw_only=True)
class ReportRow:
    """One row of the report."""

    name: str
    """Row name ('base', 'B1', ...)."""
    group: str
    """Row group ('base', 'A', ..., 'big', 'F', or a user study's groups)."""
    config: dict[str, Any]
    """Column key -> this row's value (None where the config does not say)."""
    same_as_base: dict[str, bool]
    """Column key -> True when the value equals the base row's."""
    other: dict[str, Any]
    """Differences outside the paper's columns, 'section.field' -> value (e.g. positions): from the base, or from
    `other_against` where the row is read against another reference."""
    other_against: str | None = None
    """The row this one is read against where it is not the base (`row_references`): the one reference the claims
    compare it with, or its group's (the modern study's M rows add one component each to the paper's base, row
    `paper`: 'activation=swiglu' says what the row is, its differences from the modern base do not)."""
    same_as_reference: dict[str, bool] = field(default_factory=dict)
    """Column key -> True when the value equals the reference's (`other_against`, else the base's): shown blank, as
    in the paper."""
    status: dict[int, TrialStatus]
    """seed -> where that trial stands."""
    ppl: Stat | None = None
    """Dev perplexity over complete seeds."""
    bleu: Stat | None = None
    """Dev BLEU over complete seeds."""
    chrf: Stat | None = None
    """Dev chrF over complete seeds (sacreBLEU, from the dev hypotheses)."""
    test_bleu: Stat | None = None
    """Test-set BLEU over complete seeds (the final weights, beam search, sacreBLEU); None when not scored."""
    test_chrf: Stat | None = None
    """Test-set chrF over complete seeds; None when not scored."""
    convergence: Convergence | None = None
    """Whether the row's trials reached their plateau (its least converged trial's state)."""
    budget_gain: Stat | None = None
    """BLEU at T minus BLEU at the study's last shorter budget, per complete seed; None without shorter budgets."""
    source_ratio: dict[float, float] = field(default_factory=dict)
    """Budget (fraction of T) -> the lowest source_ppl_ratio over the complete seeds, where the records give one."""
    untrainable: dict[float, str] = field(default_factory=dict)
    """Budget -> the measured cause, where this preset did not train the row: its source use stayed below
    `trainable_threshold` of the base's (it never left the language-model plateau). No verdict rests on it there."""
    tests: dict[str, RowTest] = field(default_factory=dict)
    """metric -> test of this row against the base at T (seeds and sentences, Holm-corrected); empty for the base.
    Its BLEU test gives the row's significance mark (`mark`) and, with the shorter budgets', the claims' verdicts."""
    params_m: float | None = None
    """Parameters x10^6."""
    delta_bleu: Stat | None = None
    """BLEU of each of the row's seeds minus the base's mean over all its seeds (`_delta`): its mean is the effect
    the tests use."""
    delta_ppl: Stat | None = None
    """PPL, as delta_bleu."""
    delta_chrf: Stat | None = None
    """chrF, as delta_bleu."""
    paper: PaperRow | None = None
    """The paper's numbers for a row of the same name."""
    wall_time_s: float | None = None
    """Mean wall time of a trial."""
    tokens_per_sec: float | None = None
    """Mean training throughput (source + target tokens per second)."""
    devices: list[str] = field(default_factory=list)
    """Devices the complete trials ran on."""
    mark: str = ""
    """'‡' / '†' when the BLEU test against the base is significant, in the same direction, at every budget (the
    weaker mark of the budgets'), as a claim's verdict needs; '' otherwise, and for a row that gives no verdict
    (diverged, not trainable at this preset, or a pipeline-check preset)."""

    @property
    def n_seeds(self) -> int:
        return len(self.status)

    def no_source(self) -> dict[float, float]:
        """Budget -> source_ppl_ratio, where the row did not learn to translate (a ratio below SOURCE_RATIO_MIN)."""
        return {f: ratio for f, ratio in self.source_ratio.items() if ratio < SOURCE_RATIO_MIN}

    def count(self, state: str) -> int:
        return sum(s.state == state for s in self.status.values())

    @property
    def state(self) -> str:
        """'complete' when every seed is, else the least finished state present (pending < running < failed...)."""
        for state in ("running", "pending", "failed", "pruned"):
            if self.count(state):
                return state
        return "complete"

    @property
    def reasons(self) -> dict[int, str]:
        """seed -> reason, for failed or pruned trials."""
        return {seed: s.reason for seed, s in self.status.items() if s.reason and s.state in ("failed", "pruned")}


@dataclass(kw_only=True)
class ReportTable:
    """The whole report: rows in display order and what a reader needs to trust them."""

    study: str
    preset: str
    seeds: list[int]
    rows: list[ReportRow]
    base: str | None
    """Name of the base row, or None when the study has none (then no deltas and no blank cells)."""
    show_paper: bool
    """True when some row matches a row of the paper's Table 3 by name."""
    notes: list[str]
    """One-line remarks (storage fallback, untested rows, ...)."""
    out_dir: str
    generated_at: str
    n_samples: int = N_SAMPLES
    """Bootstrap resamples of the dev sentences in every test."""
    fractions: list[float] = field(default_factory=lambda: [FULL])
    """The study's budgets as fractions of T, ascending, T (1.0) last (`StudyResults.fractions`)."""
    withheld: str | None = None
    """Why no claim gets a verdict (study.json's pipeline_check: a preset too short to judge anything), else None."""
    precision: dict[float, float] = field(default_factory=dict)
    """Budget -> median over the rows of the half-width of the 95% interval of their BLEU difference from the base."""
    claims: list[ClaimVerdict] = field(default_factory=list)
    """A verdict for each of the study's claims (empty when the study declares none)."""
    nothing_learned: str | None = None
    """Set when the base itself did not learn to translate: the one line the report opens with (then `withheld`
    says the same, and no comparison repeats it)."""
    seed_correlation: SeedCorrelation | None = None
    """How much rows trained with the same seed move together (a seed's effect on dev BLEU at T shared over the
    rows; `ablations.statistics.significance.seed_correlation`); None with fewer than two shared seeds."""
    effect_scale: float | None = None
    """Median over the comparisons of |our effect| / |the paper's| (where the paper's is at least 0.3): how much
    this preset magnifies (or shrinks) the paper's differences; None without the paper's numbers."""
    chrf_signature: str = ""
    """sacreBLEU's signature of the chrF in the table."""
    base_other: dict[str, Any] = field(default_factory=dict)
    """The base's own values of the fields some row changes outside the paper's columns ('section.field' -> value):
    what a row's 'other' differences are changed from (the legend names them)."""
    machines: dict[str, int] = field(default_factory=dict)
    """What the complete trials ran on ('cpu (1 thread), torch 2.13.0+cpu, AVX512 kernels': `Machine.text`) -> how
    many did, the most first."""

    def groups(self) -> list[tuple[str, list[ReportRow]]]:
        """Consecutive rows of the same group, in display order."""
        out: list[tuple[str, list[ReportRow]]] = []
        for row in self.rows:
            if out and out[-1][0] == row.group:
                out[-1][1].append(row)
            else:
                out.append((row.group, [row]))
        return out

    def row(self, name: str) -> ReportRow:
        return next(r for r in self.rows if r.name == name)


def _get(config: dict[str, Any], section: str, name: str) -> Any:
    return (config.get(section) or {}).get(name)


def _config_of(spec: RowSpec, records: list[Record]) -> dict[str, dict[str, Any]]:
    """The row's resolved config: study.json's, else the first record's."""
    return spec.config or (records[0].config if records else {})


def _other_differences(config: dict[str, Any], base: dict[str, Any]) -> dict[str, Any]:
    shown = {(c.section, c.field) for c in CONFIG_COLUMNS}
    other: dict[str, Any] = {}
    for section in sorted(set(config) | set(base)):
        mine, theirs = config.get(section) or {}, base.get(section) or {}
        if not isinstance(mine, dict) or not isinstance(theirs, dict):
            continue
        for name in sorted(set(mine) | set(theirs)):
            if (section, name) in shown or (section, name) in IGNORED_DIFFERENCES:
                continue
            if mine.get(name) != theirs.get(name):
                other[f"{section}.{name}"] = mine.get(name)
    return other


def _delta(row: Stat | None, base: Stat | None) -> Stat | None:
    """Each of the row's seeds minus the base's mean over all its seeds: the mean is the effect every test and verdict
    uses (`ablations.statistics.significance.compare`: rows are not paired by seed, and the base's extra seeds count),
    the spread is the row's own."""
    if row is None or base is None:
        return None
    return Stat(values={s: v - base.mean for s, v in row.values.items()})


def _paired_delta(row: Stat | None, base: Stat | None) -> Stat | None:
    if row is None or base is None:
        return None
    shared = sorted(set(row.values) & set(base.values))
    if shared:
        return Stat(values={s: row.values[s] - base.values[s] for s in shared})
    return Stat(values={s: v - base.mean for s, v in row.values.items()})  # no seed in common: vs the base's mean


def _paper_row(spec: RowSpec) -> PaperRow | None:
    """The paper's numbers as the study declares them for this row, if it does."""
    if not spec.paper or all(spec.paper.get(k) is None for k in ("ppl", "bleu")):
        return None
    number = {k: float(v) if v is not None else None for k, v in spec.paper.items() if k in ("ppl", "bleu", "params_m")}
    return PaperRow(row=spec.name, group=spec.group, **{"ppl": None, "bleu": None, "params_m": None} | number)


def _mean(records: list[Record], metric: str) -> float | None:
    stat = Stat.of(records, metric)
    return stat.mean if stat else None


def _paper_numbers(rows: list[ReportRow]) -> dict[str, dict[str, float | None]]:
    return {r.name: {"bleu": r.paper.bleu, "ppl": r.paper.ppl} for r in rows if r.paper is not None}


def build_table(results: StudyResults, *, n_samples: int = N_SAMPLES, claims: list[Claim] | None = None) -> ReportTable:
    """Table 3 for a results directory: configs against the base, metrics over seeds, paper, significance, and a
    verdict for each claim (`claims`, else those study.json carries) at every budget."""
    # By row name only for the built-in study's results written before study.json carried the numbers: a user's
    # own study with a row called 'base' is not the paper's base.
    paper = load_paper_table() if results.meta.get("study") == "table3" else {}
    base_spec = results.base
    base_records = results.records(base_spec.name) if base_spec else []
    base_config = _config_of(base_spec, base_records) if base_spec else {}
    rows = [_report_row(results, spec, base_spec, base_config, paper) for spec in results.rows]
    _others_against_references(rows, results, claims if claims is not None else study_claims(results))
    notes = list(results.notes)
    base_row = next((r for r in rows if base_spec and r.name == base_spec.name), None)
    if base_row is not None:
        notes += _against_base(rows, base_row, base_records)
    elif results.rows:
        notes.append("the study has no row in group 'base': no deltas, no significance, every cell shown")
    table = ReportTable(
        chrf_signature=chrf_signature(),
        study=results.study,
        preset=results.preset,
        seeds=results.seeds,
        rows=rows,
        base=base_spec.name if base_spec else None,
        show_paper=any(r.paper is not None for r in rows),
        notes=notes,
        out_dir=str(results.out_dir),
        generated_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        n_samples=n_samples,
        fractions=results.fractions,
        withheld=results.meta.get("pipeline_check") or None,
        base_other=_base_other(rows, base_config),
        machines=_machines(results),
    )
    evidence = study_verdicts(results, claims, n_samples=n_samples, paper=_paper_numbers(rows)) if base_row else None
    if base_row is not None and evidence is not None:
        _with_verdicts(table, base_row, evidence)
        table.effect_scale = effect_scale(table.claims)
    elif claims:
        notes.append("claims not judged: the study has no base row with a complete trial")
    return table


def _machines(results: StudyResults) -> dict[str, int]:
    """What the complete trials ran on (device, torch version, kernel set) -> how many did, the most first."""
    found = machines_of(r for spec in results.rows for r in results.records(spec.name))
    return {machine.text(): n for machine, n in found.most_common()}


def _base_other(rows: list[ReportRow], base_config: dict[str, Any]) -> dict[str, Any]:
    """The base's values of the fields some row's 'other' lists, where its config has them."""
    values = {}
    for key in sorted({key for row in rows for key in row.other}):
        section, name = key.split(".", 1)
        if name in (base_config.get(section) or {}):
            values[key] = base_config[section][name]
    return values


def row_references(rows: list[RowSpec], base: str | None, claims: list[Claim]) -> dict[str, str]:
    """Row -> the row it is read against where that is not the base: the one reference the claims compare it with,
    else, for a row no claim names, the one reference its group's other rows are compared with (the modern study's
    M-qknorm, in no claim, is read against `paper` as M-swiglu is). The base and the references themselves are read
    against the base."""
    names = {spec.name for spec in rows}
    against: dict[str, set[str]] = {}
    for claim in claims:
        for comparison in claim.compare:
            against.setdefault(comparison.row, set()).add(comparison.against or base or "")
    references = {name for found in against.values() for name in found}
    by_group: dict[str, set[str]] = {}
    for spec in rows:
        if spec.name in against:
            by_group.setdefault(spec.group, set()).update(against[spec.name])
    out = {}
    for spec in rows:
        if spec.name == base or spec.name in references:
            continue
        found = against.get(spec.name) or by_group.get(spec.group) or set()
        reference = next(iter(found)) if len(found) == 1 else None
        if reference in names and reference not in (base, spec.name):
            out[spec.name] = reference
    return out


def _others_against_references(rows: list[ReportRow], results: StudyResults, claims: list[Claim]) -> None:
    """A row read against another reference than the base (`row_references`) shows its differences from that
    reference, and blank cells where it has the reference's values."""
    specs = {spec.name: spec for spec in results.rows}
    base = results.base.name if results.base else None
    for name, reference in row_references(results.rows, base, claims).items():
        row = next(r for r in rows if r.name == name)
        mine = _config_of(specs[name], results.records(name, state=None))
        theirs = _config_of(specs[reference], results.records(reference, state=None))
        row.other, row.other_against = _other_differences(mine, theirs), reference
        row.same_as_reference = {
            c.key: _get(mine, c.section, c.field) == _get(theirs, c.section, c.field) for c in CONFIG_COLUMNS
        }


def _report_row(results: StudyResults, spec, base_spec, base_config: dict, paper: dict) -> ReportRow:
    """One row: its configuration against the base's, and its metrics over the complete seeds."""
    records = results.records(spec.name)
    config = _config_of(spec, results.records(spec.name, state=None))
    values = {c.key: _get(config, c.section, c.field) for c in CONFIG_COLUMNS}
    is_base = base_spec is not None and spec.name == base_spec.name
    same = {
        c.key: bool(base_spec) and not is_base and values[c.key] == _get(base_config, c.section, c.field)
        for c in CONFIG_COLUMNS
    }
    params = _mean(records, "params")
    return ReportRow(
        name=spec.name,
        group=spec.group,
        config=values,
        same_as_base=same,
        same_as_reference=same,
        other={} if is_base or not base_spec else _other_differences(config, base_config),
        status={seed: s for (name, seed), s in sorted(results.status.items()) if name == spec.name},
        ppl=Stat.of(records, "ppl"),
        bleu=Stat.of(records, "bleu"),
        chrf=Stat.of(records, "chrf"),
        test_bleu=Stat.of(records, "test_bleu"),
        test_chrf=Stat.of(records, "test_chrf"),
        convergence=row_convergence(results.records(spec.name, state=None)),
        budget_gain=_budget_gain(results, spec.name),
        source_ratio=source_ratios(results, spec.name),
        params_m=params / 1e6 if params is not None else None,
        paper=_paper_row(spec) or paper.get(spec.name),
        wall_time_s=_mean(records, "wall_time_s"),
        tokens_per_sec=_mean(records, "tokens_per_sec"),
        devices=sorted({device for r in records if (device := r.device)}),
    )


def _budget_gain(results: StudyResults, name: str) -> Stat | None:
    """BLEU at T minus BLEU at the last shorter budget, paired by seed; None when the study has no shorter budget."""
    if len(results.fractions) < 2:
        return None
    shorter = results.at_budget(results.fractions[-2]).records(name)
    return _paired_delta(Stat.of(results.records(name), "bleu"), Stat.of(shorter, "bleu"))


def _against_base(rows: list[ReportRow], base_row: ReportRow, base_records) -> list[str]:
    """Fill each row's deltas against the base; return the notes this leaves."""
    for row in rows:
        if row is base_row:
            continue
        row.delta_bleu = _delta(row.bleu, base_row.bleu)
        row.delta_ppl = _delta(row.ppl, base_row.ppl)
        row.delta_chrf = _delta(row.chrf, base_row.chrf)
    if not base_records:
        return [f"the base row '{base_row.name}' has no complete trial yet: no deltas, no significance"]
    return []


def _with_verdicts(table: ReportTable, base_row: ReportRow, evidence: Evidence) -> None:
    """The claims' verdicts (`ablations.results.evidence.study_verdicts`) into the table: why no verdict at all, which
    rows this preset did not train, every row's tests against the base at T and its mark, the precision at each budget,
    and each claim with advice where it is too noisy to see the paper's difference."""
    table.nothing_learned = evidence.nothing_learned
    table.withheld = evidence.withheld
    for row in table.rows:
        row.untrainable.update(evidence.untrainable.get(row.name, {}))
    tests, excluded = evidence.tests, evidence.excluded
    for row in table.rows:
        if row is not base_row:
            row.tests = {metric: tests[FULL][(row.name, base_row.name, metric)] for metric in METRICS}
            silent = table.withheld or any(row.name in excluded[f] for f in table.fractions)
            row.mark = "" if silent else _mark([tests[f].get((row.name, base_row.name, "bleu")) for f in tests])
    table.precision = {
        f: width for f, by_key in tests.items() if (width := _median_half_width(by_key, base_row.name)) is not None
    }
    table.seed_correlation = seed_correlation({r.name: r.bleu.values for r in table.rows if r.bleu is not None})
    table.notes += _out_of_line(tests, base_row.name, table.precision)
    table.claims = [_with_advice(cv, table) for cv in evidence.claims]


def _out_of_line(tests: dict[float, Tests], base: str, precision: dict[float, float]) -> list[str]:
    """A note for each row whose seeds spread beyond the study's (its screen over every budget,
    `ablations.statistics.variance.screen`): by how much, what its own variance does to its interval at T, and what
    one more seed would make of it at the same spread."""
    notes = []
    for (row, against, metric), test in tests.get(FULL, {}).items():
        spread = test.spread
        if against != base or metric != "bleu" or spread is None or spread.p >= SCREEN_ALPHA or not test.se > 0:
            continue
        width = (test.ci[1] - test.ci[0]) / 2
        study = f" against the study's median ±{precision[FULL]:.2f}" if FULL in precision else ""
        more = half_width_with_one_more_seed(test)
        then = f"; one more seed at the same spread would make it about ±{more:.2f}" if more is not None else ""
        p = "p < 0.001" if spread.p < 0.001 else f"p {spread.p:.3f}"
        notes.append(
            f"{row}'s seeds are out of line: their spread over every budget is {spread.ratio:.1f}x the study's "
            f"({p} on {spread.df} df), so the row keeps its own seed variance: its BLEU interval at T is "
            f"±{width:.2f}{study}{then}"
        )
    return notes


def _with_advice(cv: ClaimVerdict, table: ReportTable) -> ClaimVerdict:
    """Each comparison too noisy to see the paper's difference gets the cheapest design that would (80% power): the
    seeds it needs and their cost in core-hours (the row's and the base's extra trials at their measured mean trial
    times, one core each), and a larger dev set where the sentence noise alone hides the difference."""
    parts = []
    for comp in cv.comparisons:
        test = comp.test
        if comp.verdict != "inconclusive" or comp.cause != "too_noisy" or test is None:
            parts.append(comp)
            continue
        design = design_needed(test, comp.paper_delta) if comp.paper_delta else None
        if design is None:
            parts.append(replace(comp, advice=(
                f"beyond this study's reach: even a dev set {DEV_FACTORS[-1]}x as large and {MAX_SEEDS} seeds a row "
                "would not show the paper's difference"
            )))  # fmt: skip
            continue
        factor, needed = design
        ratio = test.n_against / test.n_row
        row, base = table.row(comp.comparison.row), table.row(comp.comparison.against or table.base or "")
        extra = [(row, needed - test.n_row), (base, math.ceil(needed * ratio) - test.n_against)]
        hours = sum(n * (r.wall_time_s or math.nan) for r, n in extra if n > 0) / 3600
        cost = f", about {hours:.1f} core-hours more" if math.isfinite(hours) and hours > 0 else ""
        seeds = f"about {needed} seeds a row (the base {math.ceil(needed * ratio)}){cost}"
        if factor > 1:  # the sentence noise is the floor: seeds alone cannot get under it (not within MAX_SEEDS)
            seeds = f"a dev set {factor}x as large (seeds alone cannot get under its sentence noise) and {seeds}"
        parts.append(replace(comp, advice=f"to see the paper's {comp.paper_delta:+.2f} at 80% power: {seeds}"))
    return replace(cv, comparisons=tuple(parts))


MARKS = ((0.01, "‡"), (ALPHA, "†"))
"""(threshold on the Holm-corrected p, mark), strictest first: ‡ p(Holm) < 0.01, † p(Holm) < ALPHA."""


def significance_mark(test: RowTest | None) -> str:
    """'‡' or '†' (`MARKS`) when the test finds the row different from its reference, '' otherwise: the same test
    that judges the claims, so a mark and a verdict never disagree on what is significant."""
    if test is None or test.p_holm is None:
        return ""
    return next((mark for threshold, mark in MARKS if test.p_holm < threshold), "")


def _mark(tests: list[RowTest | None]) -> str:
    """The weaker of the budgets' marks when every budget's test is significant with the same sign, else '' (and
    '' while seed noise is unknown: one seed per row)."""
    if any(t is not None and t.effect is not None and t.se_seeds is None for t in tests):
        return ""
    marks = [significance_mark(t) for t in tests]
    signs = {math.copysign(1.0, t.effect) for t in tests if t is not None and t.effect is not None}
    if not all(marks) or len(signs) != 1:
        return ""
    return "†" if "†" in marks else marks[0]


def _median_half_width(tests: Tests, base: str) -> float | None:
    """The median over the rows of the half-width of the 95% interval of their BLEU difference from the base."""
    widths = [
        (t.ci[1] - t.ci[0]) / 2
        for (_, against, metric), t in tests.items()
        if against == base and metric == "bleu" and t.effect is not None
    ]
    widths = [w for w in widths if math.isfinite(w)]
    return statistics.median(widths) if widths else None


def effect_scale(claims: list[ClaimVerdict], floor: float = 0.3) -> float | None:
    """Median over the claims' comparisons at T of |our effect| / |the paper's|, where the paper's is at least
    `floor` (a ratio to a difference of 0.1 says little); None when no comparison has both."""
    ratios = [abs(r) for cv in claims for c in cv.comparisons if (r := paper_ratio(c, floor)) is not None]
    return statistics.median(ratios) if ratios else None


def select_rows(table: ReportTable, names: list[str]) -> ReportTable:
    """The table of the rows `names` and of the rows they are compared with (the base, the row their blank cells
    repeat, their claims' references), in display order, with each claim that compares two of them; every number,
    test and verdict stays the whole study's (a view of the study, not a smaller study)."""
    base = table.base
    wanted = set(names) | ({base} if base else set())
    wanted |= {row.other_against for row in table.rows if row.name in names and row.other_against}
    for cv in table.claims:
        wanted |= {c.comparison.against or base for c in cv.comparisons if c.comparison.row in names} - {None}
    rows = [row for row in table.rows if row.name in wanted]
    claims = [
        cv
        for cv in table.claims
        if any(c.comparison.row in wanted and (c.comparison.against or base) in wanted for c in cv.comparisons)
    ]
    added = [row.name for row in rows if row.name not in names]
    note = (
        f"rows shown: {', '.join(r.name for r in rows if r.name in names)}"
        + (f", and what they are compared with: {', '.join(added)}" if added else "")
        + f" (of the study's {len(table.rows)}; the tests, their Holm correction and the verdicts are the whole "
        "study's)"
    )
    base_other = {key: value for key, value in table.base_other.items() if any(key in r.other for r in rows)}
    return replace(table, rows=rows, claims=claims, notes=[*table.notes, note], base_other=base_other)
