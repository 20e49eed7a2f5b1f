"""The shipped rule, simulated: a study's claims on synthetic per-seed scores, judged by the code a sweep runs.

Each replicate draws every row's seeds at both budgets (T/2 and T: seed SDs and their correlation from an archive)
and a dev set (each row's sentence-level scores, so that the paired bootstrap measures sentence noise as it does on
real records, and the dev set's own luck moves each row's score). It then runs the design exactly as the sweep does:
`ablations.statistics.sequential.walk` takes the looks, each look's evidence comes from
`ablations.statistics.significance.compare_rows` and `ablations.statistics.verdicts.judge` on the seeds it reads,
and the family, the boundaries and the futility rule are theirs. Nothing here re-implements a rule: what is measured
is what ships. A fixed design is the same walk with min_seeds = max_seeds (one look, Holm over the claims).

What a replicate counts: a comparison's final verdict is wrong when it is reproduced though the planted truth is
not what the claim says (no difference, or the other sign; for `same`, a difference at the margin or beyond; for
`no_worse`, worse by the margin or more), or contradicted though the truth is what the claim says (or is on the
margin). The family-wise error is the share of replicates with any wrong verdict; the power of a comparison, the
share in which it is reproduced; the cost, the trials the design ran.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import scipy  # its submodules (special, stats, optimize) load on first use, so --help pays none of them
from ablate.ablations.statistics.claims import Claim, Comparison, Metric
from ablate.ablations.statistics.sequential import (
    ErrorControl,
    Walk,
    comparison_key,
    controls_of,
    seed_range,
    walk,
)
from ablate.ablations.statistics.significance import SystemScores, compare_rows, screen_budgets
from ablate.ablations.statistics.verdicts import ClaimVerdict, judge


@dataclass(frozen=True, kw_only=True)
class Noise:
    """The noise a simulated study's scores carry, in the metric's units (default: table3-tiny's archive, BLEU)."""

    seed_sd: tuple[float, float] = (1.13, 0.85)
    """One seed's SD at T/2 and at T."""
    correlation: float = 0.76
    """Of a seed's scores at T/2 and at T."""
    sentence_se: float = 0.35
    """The paired bootstrap's SE of a difference between two rows' means (sentence noise), at both budgets."""
    blocks: int = 40
    """Dev-set blocks the sentence noise is drawn over (each a group of sentences): the bootstrap resamples them."""


@dataclass(frozen=True, kw_only=True)
class Design:
    """The design simulated: a sequential one (min_seeds < max_seeds) or a fixed one (equal)."""

    min_seeds: int = 2
    max_seeds: int = 3
    error: ErrorControl = "spending"


@dataclass(frozen=True, kw_only=True)
class SimulationResult:
    """What `simulate` measured over its replicates."""

    replicates: int
    fwer: float
    """Share of replicates with any wrong verdict among the claimed comparisons."""
    fwer_upper: float
    """The upper end of the family-wise error's 95% Clopper-Pearson interval (Monte Carlo error)."""
    reproduced: dict[str, float] = field(default_factory=dict)
    """'row/metric/expect/against' -> share of replicates in which the comparison was reproduced."""
    wrong: dict[str, float] = field(default_factory=dict)
    """'row/metric/expect/against' -> share of replicates in which its verdict was wrong."""
    trials: float = 0.0
    """Mean trials the design ran (every row, controls included)."""
    most_trials: int = 0
    """Trials if every row ran to max_seeds (the controls at their share)."""


def simulate(
    claims: Sequence[Claim],
    rows: Sequence[str],
    base: str,
    *,
    metrics: Mapping[str, Metric],
    effects: Mapping[tuple[str, str], float] | None = None,
    spread: Spread | None = None,
    design: Design = Design(),
    noise: Noise = Noise(),
    replicates: int = 1000,
    n_samples: int = 200,
    seed: int = 0,
    progress: Callable[[int, int], None] | None = None,
) -> SimulationResult:
    """The claims of a study of `rows` (its base `base`) simulated at `design`: `effects` plants a true difference
    (row, metric) -> its value against the base at both budgets (0 elsewhere; a comparison against another row
    sees the difference of the two; `scenario` builds them); `spread`: which rows' seeds vary more, by how much, and
    the seeds' distribution (default: every row alike, normal). `n_samples`: the
    bootstrap's resamples (fewer than a report's 1000 keeps a replicate fast; the sentence SE is estimated well).
    `progress(done, replicates)` is called after each replicate."""
    effects = dict(effects or {})
    rng = np.random.default_rng(seed)
    comparisons = [c for claim in claims for c in claim.compare]
    controls = controls_of([(c.row, c.against) for c in comparisons], base, list(rows))
    most = seed_range(rows, controls, min_seeds=design.min_seeds, max_seeds=design.max_seeds)[1]
    keys = [comparison_key(c) for c in comparisons]
    wrong_any, trials = 0, 0
    wrong, reproduced = dict.fromkeys(keys, 0), dict.fromkeys(keys, 0)
    metric_names = sorted({c.metric for c in comparisons})
    for done in range(replicates):
        drawn = _draw(rng, rows, most, metric_names, effects, spread or Spread(), noise)
        judged = _judged(drawn, claims, rows, base, metrics, n_samples)
        have = {r: list(range(most.get(r, design.max_seeds))) for r in rows}
        walked = walk(judged, have, controls, min_seeds=design.min_seeds, max_seeds=design.max_seeds,
                      error=design.error)  # fmt: skip
        verdicts = _verdicts(walked, comparisons, keys)
        bad = False
        for c, key in zip(comparisons, keys, strict=True):
            truth = effects.get((c.row, c.metric), 0.0) - effects.get((c.against or base, c.metric), 0.0)
            is_wrong = _wrong(c, verdicts[key], truth, metrics[c.metric].higher_is_better)
            wrong[key] += is_wrong
            reproduced[key] += verdicts[key] == "reproduced"
            bad |= is_wrong
        wrong_any += bad
        trials += sum(walked.seeds.values())
        if progress is not None:
            progress(done + 1, replicates)
    upper = float(scipy.stats.beta.ppf(0.975, wrong_any + 1, replicates - wrong_any)) if wrong_any < replicates else 1.0
    return SimulationResult(
        replicates=replicates,
        fwer=wrong_any / replicates,
        fwer_upper=upper,
        reproduced={k: v / replicates for k, v in reproduced.items()},
        wrong={k: v / replicates for k, v in wrong.items()},
        trials=trials / replicates,
        most_trials=sum(most.get(r, design.max_seeds) for r in rows),
    )


Scenario = Literal["null", "mixed", "least_favourable"]
FAR = 8.0
"""How far off, in the metric's units, a scenario plants a comparison that is not a null: about ten seed SDs, so
that it is decided, and decided right, in nearly every replicate."""


def scenario(
    kind: Scenario,
    claims: Sequence[Claim],
    base: str,
    *,
    nulls: Sequence[str],
    metrics: Mapping[str, Metric],
    far: float = FAR,
) -> dict[tuple[str, str], float]:
    """The planted effects of a scenario, (row, metric) -> its difference from the base:

    - `null`: every row scores as the base (the global null);
    - `mixed`: every second comparison of the rows not in `nulls` is `far` off in the claim's direction (a `same`
      claim: `far` off, so that it is rightly contradicted), and every other comparison sits at its null;
    - `least_favourable`: the rows in `nulls` sit at their null and every other comparison is `far` off, so that it
      is decided and Holm passes the whole level on to the nulls.

    A comparison's null is the boundary where both verdicts are wrong: no difference for `higher` and `lower`, the
    margin for `same` and worse by the margin for `no_worse`. Rows are placed one comparison at a time from the base
    (a comparison against another row places its row from that one)."""
    comparisons = [c for claim in claims for c in claim.compare]
    others = [c for c in comparisons if c.row not in nulls]
    off = {id(c) for c in (others if kind == "least_favourable" else others[::2] if kind == "mixed" else [])}
    claimed = {(c.row, c.metric) for c in comparisons}
    placed: dict[tuple[str, str], float] = {}
    for _ in comparisons:  # a pass per comparison at most: each pass places every comparison whose anchor is placed
        for c in comparisons:
            anchor, key = (c.against or base, c.metric), (c.row, c.metric)
            if c.row == base:  # the base against another row: that row moves, so every other truth stays put
                anchor, key = key, anchor
            if key in placed or (anchor[0] != base and anchor in claimed and anchor not in placed):
                continue
            if id(c) in off:
                delta = far
            elif kind != "null":  # a null (`mixed`: every comparison not planted off)
                delta = -(c.margin or 0.0) if c.expect == "no_worse" else (c.margin or 0.0)
            else:
                continue
            delta *= _better_sign(c, metrics[c.metric].higher_is_better) * (-1.0 if c.row == base else 1.0)
            placed[key] = placed.get(anchor, 0.0) + delta
    return placed


def _better_sign(comparison: Comparison, higher_is_better: bool) -> float:
    """+1 when the claim's direction is a higher score (`higher`, `same`, or `no_worse` of a metric where higher is
    better), -1 when it is a lower one."""
    if comparison.expect == "higher":
        return 1.0
    if comparison.expect == "lower":
        return -1.0
    return 1.0 if higher_is_better else -1.0


NOISY_FIRST = ("A1", "C4", "B1", "D1")
"""The rows a grid's cell makes noisy first, where the study has them: A1 and C4 are the rows the check of issue 84
made noisy, B1 and D1 two more groups' rows; then the claimed rows in order."""
GRID_COUNTS: tuple[int | Literal["all"], ...] = (0, 1, 2, 4, "all")
GRID_RATIOS = (3.0, 10.0, 30.0)
SCENARIOS: tuple[Scenario, ...] = ("null", "mixed", "least_favourable")


@dataclass(frozen=True)
class Cell:
    """One case of the guarantee's grid: a study's claims under a scenario, with `noisy` of its claimed rows at
    `ratio` times the seed variance, seeds drawn with `tails`."""

    study: str
    scenario: Scenario
    noisy: int | Literal["all"]
    ratio: float
    tails: Tails = "normal"

    @property
    def name(self) -> str:
        noisy = "no noisy row" if self.noisy == 0 else f"{self.noisy} noisy at {self.ratio:g}x"
        return f"{self.study}, {self.scenario.replace('_', ' ')}, {noisy}, {self.tails}"


def grid_cells(studies: Sequence[str] = ("table3", "modern")) -> list[Cell]:
    """The grid the guarantee is stated over (docs/method/verdicts.md, "What the verdicts guarantee"), per study.

    table3's least favourable configuration is crossed in full: no noisy row (the first claimed row the null), and 1,
    2, 4 and every claimed row at 3, 10 and 30 times the seed variance, normal seeds; with t(3) seeds at 10x. It is
    the worst case of each count by construction (every other comparison decided, so Holm's whole level reaches the
    nulls). The global and mixed nulls, which leave the nulls less of the level, run at 10x, with every claimed row
    noisy at every ratio, and under t(3) seeds at their corners. modern (a larger study: more rows, a trial costs more
    to simulate) runs the least favourable configuration at 3x and 10x, and one cell of each other kind."""
    cells: list[Cell] = []
    for study in studies:
        full = study == "table3"
        ratios = GRID_RATIOS if full else (3.0, 10.0)
        cells.append(Cell(study, "least_favourable", 0, 1.0))
        cells += [Cell(study, "least_favourable", n, r) for n in GRID_COUNTS if n != 0 for r in ratios]
        if not full:
            cells += [Cell(study, "least_favourable", 1, 10.0, "t3"), Cell(study, "null", "all", 10.0),
                      Cell(study, "mixed", 2, 10.0)]  # fmt: skip
            continue
        cells += [Cell(study, "least_favourable", n, 10.0 if n else 1.0, "t3") for n in GRID_COUNTS]
        cells += [Cell(study, "null", n, 10.0 if n else 1.0) for n in GRID_COUNTS]
        cells += [Cell(study, "null", "all", r) for r in (3.0, 30.0)]
        cells += [Cell(study, "null", n, 10.0 if n else 1.0, "t3") for n in (0, "all")]
        cells += [Cell(study, "mixed", n, 10.0 if n else 1.0) for n in GRID_COUNTS]
    return cells


def noisy_rows(claims: Sequence[Claim], base: str, count: int | Literal["all"]) -> list[str]:
    """The `count` claimed rows a cell makes noisy (`NOISY_FIRST` first, then in claim order), or every one."""
    claimed = list(dict.fromkeys(c.row for claim in claims for c in claim.compare if c.row != base))
    order = [r for r in NOISY_FIRST if r in claimed] + [r for r in claimed if r not in NOISY_FIRST]
    return order if count == "all" else order[:count]


def simulate_cell(
    cell: Cell,
    claims: Sequence[Claim],
    rows: Sequence[str],
    base: str,
    *,
    metrics: Mapping[str, Metric],
    design: Design,
    replicates: int,
    seed: int,
) -> tuple[SimulationResult, list[str]]:
    """One cell of the grid for a study's `claims` and `rows` at its `design`: its noisy rows (`noisy_rows`), the
    scenario's effects with them as the nulls (the first claimed row where none is noisy), simulated. Returns the
    result and the noisy rows; what `ablate simulate --grid` and the suite's grid tests both run."""
    noisy = noisy_rows(claims, base, cell.noisy)
    effects = scenario(cell.scenario, claims, base, nulls=noisy or noisy_rows(claims, base, 1), metrics=metrics)
    spread = Spread(noisy, cell.ratio, cell.tails)
    result = simulate(claims, rows, base, metrics=metrics, effects=effects, spread=spread, design=design,
                      replicates=replicates, seed=seed)  # fmt: skip
    return result, noisy


def _verdicts(walked: Walk, comparisons: Sequence[Comparison], keys: Sequence[str]) -> dict[str, str]:
    """Each comparison's verdict as its row stopped with it (inconclusive where its row never stopped)."""
    stopped = walked.stopped()
    out = {}
    for c, key in zip(comparisons, keys, strict=True):
        row = stopped.get(c.row)
        out[key] = row.verdicts.get(key, "inconclusive") if row is not None else "inconclusive"
    return out


def _wrong(comparison: Comparison, verdict: str, truth: float, higher_is_better: bool) -> bool:
    """Whether a verdict is wrong for the planted truth (see the module docstring)."""
    margin = comparison.margin or 0.0
    if comparison.expect == "same":
        holds, fails = abs(truth) < margin, abs(truth) > margin
    elif comparison.expect == "no_worse":
        better = truth if higher_is_better else -truth
        holds, fails = better > -margin, better < -margin
    else:
        sign = 1.0 if comparison.expect == "higher" else -1.0
        holds, fails = sign * truth > 0, sign * truth < 0
    return (verdict == "reproduced" and not holds) or (verdict == "contradicted" and not fails)


Tails = Literal["normal", "t3"]


@dataclass(frozen=True)
class Spread:
    """Which rows' seeds vary more than the archive's, by how much (a variance ratio), and the seeds' tails."""

    unstable: Sequence[str] = ()
    ratio: float = 10.0
    tails: Tails = "normal"


Drawn = dict[tuple[str, int, float, str], SystemScores]
"""(row, seed, budget, metric) -> the system's synthetic scores."""


def _draw(
    rng: np.random.Generator,
    rows: Sequence[str],
    most: Mapping[str, int],
    metric_names: Sequence[str],
    effects: Mapping[tuple[str, str], float],
    spread: Spread,
    noise: Noise,
) -> Drawn:
    """One replicate's systems: each row's seeds at T/2 and T, on a dev set of `noise.blocks` blocks whose
    sentence-level differences give the paired bootstrap the archive's sentence SE."""
    half, full = noise.seed_sd
    cov = np.array([[half**2, noise.correlation * half * full], [noise.correlation * half * full, full**2]])
    # Each row's block scores: independent N(0, tau^2 blocks) offsets, so that its mean over the dev set moves by
    # N(0, tau^2) and the difference of two rows by the archive's sentence SE (tau = SE / sqrt 2).
    tau = noise.sentence_se / math.sqrt(2)
    out: Drawn = {}
    for metric in metric_names:
        for row in rows:
            n = most.get(row, 1)
            scale = math.sqrt(spread.ratio) if row in spread.unstable else 1.0
            seeds = rng.multivariate_normal([0.0, 0.0], cov, size=n) * scale
            if spread.tails == "t3":  # a seed's pair of scores over one chi2 draw: multivariate t, unit variance
                seeds *= math.sqrt(1 / 3) / np.sqrt(rng.chisquare(3, size=(n, 1)) / 3)
            blocks = rng.normal(0.0, tau * math.sqrt(noise.blocks), size=noise.blocks)
            for s in range(n):
                for b, fraction in enumerate((0.5, 1.0)):
                    level = effects.get((row, metric), 0.0) + seeds[s, b]
                    values = (level + blocks)[:, None] / noise.blocks  # summed over the blocks: their mean
                    score = float(values.sum())
                    out[(row, s, fraction, metric)] = SystemScores(
                        score=score, stats=values, scorer=_block_mean, scores_of=_block_means
                    )
    return out


def _block_mean(sums: np.ndarray) -> float:
    return float(sums[0])


def _block_means(sums: np.ndarray) -> np.ndarray:
    return sums[:, 0]


def _judged(drawn: Drawn, claims: Sequence[Claim], rows: Sequence[str], base: str, metrics, n_samples: int):
    """The evidence of a look on the drawn systems: every row against the base and each claimed pair, at both
    budgets, judged as a study's records are (`ablations.results.evidence.study_verdicts`)."""
    claimed = [(c.row, c.against) for claim in claims for c in claim.compare if c.against]
    pairs = [(r, base) for r in rows if r != base]
    pairs += [p for p in dict.fromkeys(claimed) if p not in pairs and p[0] != p[1]]
    metric_names = sorted({c.metric for claim in claims for c in claim.compare})
    seen: dict[tuple, list[ClaimVerdict]] = {}

    def judged(chosen: Mapping[str, tuple[int, ...]]) -> list[ClaimVerdict]:
        key = tuple(sorted((r, len(s)) for r, s in chosen.items()))
        if key not in seen:
            tests: dict[float, dict] = {0.5: {}, 1.0: {}}
            for metric in metric_names:
                scores = {f: {r: {s: drawn[(r, s, f, metric)].score for s in chosen.get(r, ())} for r in rows}
                          for f in tests}  # fmt: skip
                screened = screen_budgets(scores)
                for fraction in tests:
                    systems = {r: [drawn[(r, s, fraction, metric)] for s in chosen.get(r, ())] for r in rows}
                    tests[fraction].update(compare_rows(systems, pairs, metric, n_samples=n_samples,
                                                        screened=screened))  # fmt: skip
            seen[key] = judge(list(claims), tests, base, metrics=metrics)
        return seen[key]

    return judged


__all__ = [
    "FAR",
    "GRID_COUNTS",
    "GRID_RATIOS",
    "NOISY_FIRST",
    "SCENARIOS",
    "Cell",
    "grid_cells",
    "noisy_rows",
    "Design",
    "Noise",
    "Scenario",
    "SimulationResult",
    "Spread",
    "Tails",
    "scenario",
    "simulate",
    "simulate_cell",
]
