"""Do a study's effects approach the paper's as the model grows? The same claims judged at several sizes (rungs: one
study at several presets), each comparison's effect followed from the smallest base to the largest
(`ablate compare OUT_A OUT_B [OUT_C ...] --claims`).

Every rung is judged as its own report judges it (`reports.sequential.report_table`: a study run at the sequential
design keeps the design's verdicts) and the rungs are ordered by their base row's parameter count. Each comparison
(claim, row, reference, metric) gets its effect at T with the 95% interval at every rung, its ratio to the paper's
difference, the verdict, and one trend over the rungs, `classify`'s. Numbers stay numbers here; the phrases all
three writers share (`point_text`, `trend_text`, `LEGEND`) are at the end, the writers are in `reports.markdown`,
`reports.latex` and `reports.htmlpage` (subject 'trend'), the plot in `reports.plots.plot_trend`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from ablate.ablations.statistics import Trend, budget_label, classify, ratio_text
from ablate.data.errors import AblateError
from ablate.lightning_modules.metrics import METRICS
from ablate.reports.claims import ComparisonVerdict, paper_ratio
from ablate.reports.table import ReportTable

SAME_SIZE = 1.1
"""Two bases whose parameter counts are within this factor are one size, not two rungs (the modern study matches the
paper's count within 0.2%; a rung up in width multiplies it several times)."""


# --- one comparison in one study, and the studies' names (`reports.claims_compare` reads them too) -------------


@dataclass(frozen=True, kw_only=True)
class Effect:
    """One comparison of a claim in one study, at T: the effect, its 95% interval and its verdict."""

    row: str
    against: str
    metric: str
    verdict: str
    effect: float | None
    low: float | None
    high: float | None
    paper_ratio: float | None
    """Our effect over the paper's (signed), where the paper gives one of at least 0.3."""
    reason: str
    """Why it is inconclusive ('' otherwise)."""
    paper_delta: float | None = None
    """The paper's difference for the same comparison, where it gives both numbers."""
    excluded: tuple[str, ...] = ()
    """Why T gives no verdict whatever the test says (a row of it diverged or did not train at this preset, one seed
    only, a study that gives no verdict at all); () otherwise."""

    @property
    def digits(self) -> int:
        return METRICS[self.metric].digits


def effect_of(cv: ComparisonVerdict, base: str | None, withheld: str | None = None) -> Effect:
    """One comparison at T as its study judged it; `withheld`: why the study gives no verdict at all, else None."""
    test = cv.test
    tested = test if test is not None and test.effect is not None else None
    return Effect(
        row=cv.comparison.row,
        against=cv.comparison.against or base or "",
        metric=cv.comparison.metric,
        verdict=cv.verdict,
        effect=tested.effect if tested else None,
        low=tested.ci[0] if tested else None,
        high=tested.ci[1] if tested else None,
        paper_ratio=paper_ratio(cv),
        reason=cv.reason,
        paper_delta=cv.paper_delta,
        excluded=(*(cv.budgets[-1].excluded if cv.budgets else ()), *((withheld,) if withheld else ())),
    )


def study_labels(*tables: ReportTable) -> tuple[str, ...]:
    """'table3 (tiny)' for each study; where two read the same (one study rerun on another corpus, say), each one's
    results directory instead, so that the columns can be told apart."""
    for labels in (
        tuple(f"{t.study} ({t.preset})" for t in tables),
        tuple(Path(t.out_dir).name for t in tables),
    ):
        if len(set(labels)) == len(labels):
            return labels
    return tuple(str(t.out_dir) for t in tables)


@dataclass(frozen=True, kw_only=True)
class Rung:
    """One study of the trend: a size."""

    label: str
    """'table3 (tiny)', or its directory where two studies read the same."""
    out_dir: str
    params_m: float
    """The base row's parameters x10^6 (mean over its complete trials): the rung's place on the size axis."""
    seeds: tuple[int, ...]
    trials: tuple[int, int]
    """(complete, all) trials of the rows some rung has begun (a study's report table shows every declared row, the
    ones no sweep queued as pending): a rung still under way says so beside its seeds."""
    budgets: tuple[str, ...]
    """The budgets each verdict needed to agree at ('T/2', 'T')."""
    sequential: bool
    """True when the study ran at the sequential design (its verdicts are the design's)."""


@dataclass(frozen=True, kw_only=True)
class ComparisonTrend:
    """One comparison of a claim at every rung, and its trend."""

    row: str
    against: str
    metric: str
    paper_delta: float | None
    """The paper's difference (the first rung's that gives one)."""
    points: tuple[Effect | None, ...]
    """The comparison at each rung, smallest first; None where the study does not have it."""
    trend: Trend
    why: str
    """What the trend rests on ('10.5x -> 6.3x -> 1.0x: nearer the paper's beyond the noise'), or why there is none."""
    paper_inside: str | None
    """The largest classified rung's label when its 95% interval holds the paper's difference, else None."""

    def usable(self, i: int) -> bool:
        """Whether rung i enters the trend: tested, with a finite interval, and no row of it excluded at T."""
        return _usable(self.points[i])


@dataclass(frozen=True, kw_only=True)
class ClaimTrend:
    id: str
    text: str
    section: str
    verdicts: tuple[str | None, ...]
    """The claim's verdict at each rung; None where the study does not have the claim."""
    comparisons: tuple[ComparisonTrend, ...]


@dataclass(frozen=True, kw_only=True)
class SizeTrend:
    """The claims over the rungs, smallest base first."""

    rungs: tuple[Rung, ...]
    claims: tuple[ClaimTrend, ...]
    not_run: tuple[str, ...] = ()
    """Comparisons left out because no rung ran their rows ('A1 vs base, BLEU'): a claims file names every row of
    Table 3, a ladder of five rows tests a few of them."""

    @property
    def comparisons(self) -> list[tuple[ClaimTrend, ComparisonTrend]]:
        return [(claim, comp) for claim in self.claims for comp in claim.comparisons]


# --- the rungs -----------------------------------------------------------------------------------------------------


def base_params_m(table: ReportTable) -> float | None:
    """The base row's parameters x10^6, or None without a base that has a complete trial."""
    if table.base is None:
        return None
    return table.row(table.base).params_m


def require_sizes(tables: Sequence[ReportTable]) -> None:
    """AblateError, one line, for a study whose base has no finished trial yet (a sweep under way): it has no size to
    order it by, and none of its claims can be judged."""
    for table in tables:
        if base_params_m(table) is None:
            raise AblateError(f"{table.out_dir}: the base row has no complete trial with a parameter count, so the "
                              "study has no size to order it by; compare it once a base trial has finished (`ablate "
                              f"status {table.out_dir}` says where it stands), or leave it out")  # fmt: skip


def distinct_sizes(tables: Sequence[ReportTable]) -> bool:
    """True when every study's base has a known size and no two are within SAME_SIZE of each other."""
    known = [size for t in tables if (size := base_params_m(t)) is not None]
    if len(known) < len(tables):
        return False
    sizes = sorted(known)
    return all(b >= a * SAME_SIZE for a, b in zip(sizes, sizes[1:], strict=False))


def size_trend(tables: Sequence[ReportTable], *, sequential: Sequence[bool] | None = None) -> SizeTrend:
    """The studies' claims followed over size. `tables`: each study's report table (`report_table`), in any order;
    `sequential`: whether each ran at the sequential design. AblateError when a base's size is unknown or two
    bases are one size."""
    sequential = sequential or [False] * len(tables)
    require_sizes(tables)
    for table in tables:
        if not table.claims:
            raise AblateError(f"--claims: {table.out_dir} declares no claims; give studies with a claims file")
    order = sorted(range(len(tables)), key=lambda i: base_params_m(tables[i]) or 0.0)
    tables = [tables[i] for i in order]
    flags = [sequential[i] for i in order]
    for small, large in zip(tables, tables[1:], strict=False):
        a, b = base_params_m(small) or 0.0, base_params_m(large) or 0.0
        if b < a * SAME_SIZE:
            raise AblateError(f"{small.out_dir} and {large.out_dir} have bases of one size ({a:.3g}M and {b:.3g}M "
                              "parameters): a trend needs rungs of different sizes; compare studies of one size two "
                              "at a time")  # fmt: skip
    labels = study_labels(*tables)
    begun = {row.name for t in tables for row in t.rows if any(s.state != "pending" for s in row.status.values())}
    rungs = tuple(
        Rung(
            label=label,
            out_dir=str(t.out_dir),
            params_m=base_params_m(t) or 0.0,
            seeds=tuple(t.seeds),
            trials=(
                sum(r.count("complete") for r in t.rows if r.name in begun),
                sum(r.n_seeds for r in t.rows if r.name in begun),
            ),
            budgets=tuple(budget_label(f) for f in t.fractions),
            sequential=seq,
        )
        for label, t, seq in zip(labels, tables, flags, strict=True)
    )
    claims = _claims(tables, rungs)
    not_run = tuple(
        comparison_label(comp) for claim in claims for comp in claim.comparisons if not any(map(_ran, comp.points))
    )
    kept = [
        replace(claim, comparisons=tuple(c for c in claim.comparisons if any(map(_ran, c.points)))) for claim in claims
    ]
    return SizeTrend(rungs=rungs, claims=tuple(c for c in kept if c.comparisons), not_run=not_run)


def _ran(point: Effect | None) -> bool:
    """Whether a rung ran the comparison's rows: it has an effect, whatever its verdict."""
    return point is not None and point.effect is not None


def _claims(tables: Sequence[ReportTable], rungs: Sequence[Rung]) -> list[ClaimTrend]:
    """Every claim of any rung (by id, in the first order found), its comparisons matched by (row, reference,
    metric)."""
    by_rung = [{cv.claim.id: cv for cv in t.claims} for t in tables]
    ids = list(dict.fromkeys(i for claims in by_rung for i in claims))
    out = []
    for claim_id in ids:
        verdicts = [claims.get(claim_id) for claims in by_rung]
        claim = next(cv for cv in verdicts if cv is not None).claim
        effects: dict[tuple[str, str, str], list[Effect | None]] = {}
        for i, (cv, table) in enumerate(zip(verdicts, tables, strict=True)):
            for comp in cv.comparisons if cv is not None else ():
                effect = effect_of(comp, table.base, table.withheld)
                effects.setdefault((effect.row, effect.against, effect.metric), [None] * len(tables))[i] = effect
        comparisons = tuple(_comparison(key, points, rungs) for key, points in effects.items())
        out.append(ClaimTrend(id=claim_id, text=claim.text, section=claim.section or "",
                              verdicts=tuple(cv.verdict if cv else None for cv in verdicts),
                              comparisons=comparisons))  # fmt: skip
    return out


def _comparison(key: tuple[str, str, str], points: list[Effect | None], rungs: Sequence[Rung]) -> ComparisonTrend:
    used = [i for i, p in enumerate(points) if _usable(p)]
    paper = next((p.paper_delta for p in points if p is not None and p.paper_delta is not None), None)
    numbers = [_numbers(points[i]) for i in used]
    trend, why = classify(numbers, [rungs[i].label for i in used])
    inside = None
    if numbers:
        _, low, high, paper_last = numbers[-1]
        if paper_last is not None and low <= paper_last <= high:
            inside = rungs[used[-1]].label
    row, against, metric = key
    return ComparisonTrend(row=row, against=against, metric=metric, paper_delta=paper, points=tuple(points),
                           trend=trend, why=why, paper_inside=inside)  # fmt: skip


def _numbers(point: Effect | None) -> tuple[float, float, float, float | None]:
    """(effect, low, high, paper's difference) of a usable point."""
    assert point is not None and point.effect is not None and point.low is not None and point.high is not None
    return point.effect, point.low, point.high, point.paper_delta


def _usable(point: Effect | None) -> bool:
    return (
        point is not None
        and point.effect is not None
        and point.low is not None
        and point.high is not None
        and math.isfinite(point.low)
        and math.isfinite(point.high)
        and not point.excluded
    )


# --- the phrases the writers share --------------------------------------------------------------------------------


def rung_header(rung: Rung) -> str:
    """'table3 (tiny), base 0.065M'."""
    return f"{rung.label}, base {rung.params_m:.3g}M"


def interval_text(point: Effect) -> str:
    """'-22.12 [-26.22, -18.02]': the effect at T with its 95% interval; '+0.00 (no variance)' where every seed and
    sentence scored the same (the interval is the effect itself: no interval)."""
    assert point.effect is not None and point.low is not None and point.high is not None
    d = point.digits
    if point.low == point.high:
        return f"{0.0 if round(point.effect, d) == 0 else point.effect:+.{d}f} (no variance)"
    return f"{point.effect:+.{d}f} [{point.low:+.{d}f}, {point.high:+.{d}f}]"


def point_text(point: Effect | None, used: bool) -> str:
    """'-22.12 [-26.22, -18.02] 10.5x, reproduced'; a rung left out of the trend says why in brackets."""
    if point is None:
        return "not in this study"
    if point.effect is None or point.low is None or point.high is None:
        return f"untested ({point.verdict})" if point.verdict != "untested" else "untested"
    text = interval_text(point)
    if point.paper_ratio is not None:
        text += f" {ratio_text(point.paper_ratio)}"
    text += f", {point.verdict}"
    if not used:
        text += f" (not in the trend: {'; '.join(point.excluded) or 'no finite interval'})"
    return text


def comparison_label(comp: ComparisonTrend) -> str:
    """'C1 vs base, BLEU'."""
    return f"{comp.row} vs {comp.against}, {METRICS[comp.metric].label}"


def paper_text(comp: ComparisonTrend) -> str:
    return f"{comp.paper_delta:+.2f}" if comp.paper_delta is not None else "-"


def trend_text(comp: ComparisonTrend) -> str:
    """'toward: 10.5x -> 5.3x -> 1.0x: nearer the paper's beyond the noise; the paper's -2.10 is inside the interval
    at table3 (medium)'."""
    return f"{comp.trend}: {comp.why}{inside_text(comp)}"


def inside_text(comp: ComparisonTrend) -> str:
    """'; the paper's -2.10 is inside the interval at table3 (medium)', or '' where it is not."""
    if comp.paper_inside is None:
        return ""
    return f"; the paper's {paper_text(comp)} is inside the interval at {comp.paper_inside}"


def rung_line(rung: Rung) -> str:
    """'table3 (tiny): runs/table3-tiny, base 0.065M parameters, seeds 0, 1, 2, verdicts at T/2 and T (sequential
    design)', with '(3 of 12 trials complete)' after the seeds while the rung is under way."""
    design = ", at the sequential design" if rung.sequential else ""
    done, queued = rung.trials
    progress = f" ({done} of {queued} trials complete)" if done < queued else ""
    return (
        f"{rung.label}: {rung.out_dir}, base {rung.params_m:.3g}M parameters, seeds "
        f"{', '.join(map(str, rung.seeds))}{progress}, verdicts over {' and '.join(rung.budgets)}{design}"
    )


def summary_line(trend: SizeTrend) -> str:
    """'3 comparisons over 3 rungs: 1 toward the paper's, 1 flips, 1 flat; 1 with the paper's value inside the
    interval at the largest rung'."""
    comparisons = [c for _, c in trend.comparisons]
    counts: dict[str, int] = {}
    for c in comparisons:
        counts[c.trend] = counts.get(c.trend, 0) + 1
    names = {"toward": "toward the paper's", "away": "away from the paper's"}
    order = ("toward", "away", "flips", "mixed", "flat", "n/a")
    parts = [f"{counts[k]} {names.get(k, k)}" for k in order if k in counts]
    inside = sum(c.paper_inside is not None for c in comparisons)
    text = f"{len(comparisons)} comparisons over {len(trend.rungs)} rungs: {', '.join(parts)}"
    text += f"; {inside} with the paper's value inside the interval at the largest rung" if inside else ""
    if trend.not_run:
        text += f"; left out, their rows run at no rung: {', '.join(trend.not_run)}"
    return text


LEGEND = (
    "Each cell: the effect at T (row minus reference) [95% interval, seed and dev-sentence noise], its ratio to the "
    "paper's difference, and the verdict as that study's report gives it. Rungs are ordered by the base's parameter "
    "count; a rung where a row did not train, diverged, or the comparison is untested is shown and left out of the "
    "trend. Trend, over the ratio r: flips = two rungs with intervals clear of 0 on opposite sides; toward (away) = "
    "the largest rung nearer (farther from) the paper's than the smallest on the absolute log of r (r <= 0 farthest), "
    "by more than the two intervals' combined noise, with no step between neighbouring rungs the other way beyond the "
    "noise; "
    "mixed = real steps both ways; flat = no change beyond the noise; n/a = fewer than two rungs, or no paper "
    "difference of at least 0.3."
)

PLOT_CAPTION = (
    "Each comparison's effect at T against the base's parameter count (log scale), with its 95% interval, coloured "
    "by the rung's verdict; dashed: the paper's difference; hollow grey: a rung left out of the trend."
)


__all__ = [
    "LEGEND",
    "PLOT_CAPTION",
    "ClaimTrend",
    "ComparisonTrend",
    "Effect",
    "Rung",
    "SizeTrend",
    "Trend",
    "base_params_m",
    "classify",
    "distinct_sizes",
    "require_sizes",
    "effect_of",
    "interval_text",
    "size_trend",
    "study_labels",
    "summary_line",
    "trend_text",
]
