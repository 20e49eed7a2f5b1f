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

import numpy as np
from ablate.ablations.statistics.claims import Claim, Comparison, Metric
from ablate.ablations.statistics.sequential import (
    ErrorControl,
    Walk,
    comparison_key,
    controls_of,
    seed_range,
    walk,
)
from ablate.ablations.statistics.significance import SystemScores, compare_rows
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
    unstable: Sequence[str] = (),
    design: Design = Design(),
    noise: Noise = Noise(),
    replicates: int = 1000,
    n_samples: int = 200,
    seed: int = 0,
    progress: Callable[[int, int], None] | None = None,
) -> SimulationResult:
    """The claims of a study of `rows` (its base `base`) simulated at `design`: `effects` plants a true difference
    (row, metric) -> its value against the base at both budgets (0 elsewhere; a comparison against another row
    sees the difference of the two); the rows in `unstable` have ten times the seed variance. `n_samples`: the
    bootstrap's resamples (fewer than a report's 1000 keeps a replicate fast; the sentence SE is estimated well).
    `progress(done, replicates)` is called after each replicate."""
    from scipy import stats

    effects = dict(effects or {})
    rng = np.random.default_rng(seed)
    comparisons = [c for claim in claims for c in claim.compare]
    controls = controls_of([(c.row, c.against) for c in comparisons], base, list(rows))
    most = seed_range(rows, controls, min_seeds=design.min_seeds, max_seeds=design.max_seeds)[1]
    keys = [comparison_key(c) for c in comparisons]
    wrong_any, trials = 0, 0
    wrong = dict.fromkeys(keys, 0)
    reproduced = dict.fromkeys(keys, 0)
    metric_names = sorted({c.metric for c in comparisons})
    for done in range(replicates):
        drawn = _draw(rng, rows, most, metric_names, effects, unstable, noise)
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
    upper = float(stats.beta.ppf(0.975, wrong_any + 1, replicates - wrong_any)) if wrong_any < replicates else 1.0
    return SimulationResult(
        replicates=replicates,
        fwer=wrong_any / replicates,
        fwer_upper=upper,
        reproduced={k: v / replicates for k, v in reproduced.items()},
        wrong={k: v / replicates for k, v in wrong.items()},
        trials=trials / replicates,
        most_trials=sum(most.get(r, design.max_seeds) for r in rows),
    )


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


Drawn = dict[tuple[str, int, float, str], SystemScores]
"""(row, seed, budget, metric) -> the system's synthetic scores."""


def _draw(
    rng: np.random.Generator,
    rows: Sequence[str],
    most: Mapping[str, int],
    metric_names: Sequence[str],
    effects: Mapping[tuple[str, str], float],
    unstable: Sequence[str],
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
            scale = math.sqrt(10.0) if row in unstable else 1.0
            seeds = rng.multivariate_normal([0.0, 0.0], cov, size=n) * scale
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
            tests = {}
            for fraction in (0.5, 1.0):
                tests[fraction] = {}
                for metric in metric_names:
                    systems = {r: [drawn[(r, s, fraction, metric)] for s in chosen.get(r, ())] for r in rows}
                    tests[fraction].update(compare_rows(systems, pairs, metric, n_samples=n_samples))
            seen[key] = judge(list(claims), tests, base, metrics=metrics)
        return seen[key]

    return judged


__all__ = ["Design", "Noise", "SimulationResult", "simulate"]
