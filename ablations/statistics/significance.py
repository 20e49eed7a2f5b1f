"""Is a row different from the base, counting both kinds of noise: which seed trained it, and which sentences the
dev set happens to hold?

For a row R and a reference row B (the base), with seeds s and a metric M scored on the whole dev set:

    effect = mean_s M(R_s) - mean_s M(B_s)
    SE^2   = s~_R^2 / n_R + s~_B^2 / n_B    seed noise: training randomness, each row's spread over seeds
           + Var_boot(effect)               sentence noise: a paired bootstrap over the dev sentences

s~^2 is a row's seed variance moderated toward the study's by empirical Bayes (`ablations.statistics.variance`: Smyth,
2004; a row whose seeds spread beyond the others' over every budget keeps its own, `screen`): every row follows one
recipe, so rows that agree share the pooled variance (with two seeds a row alone would give one degree of freedom, a
95% interval of +-12.7 standard errors), while a row whose seeds disagree beyond the others keeps its own wide interval
instead of widening everyone's. The
base trains more seeds than a row (`Study.control_seeds`, Dunnett's sqrt(k) allocation), as it is in every
comparison. Rows are not paired by seed: how much rows trained with the same seed (the same data order) move
together is measured on every study (`seed_correlation`) and stated in the report's method note
(docs/method/noise.md has the measured values). The bootstrap
resamples the sentences once per replicate for every system (paired), and recomputes corpus-level scores from
sacreBLEU's sufficient statistics, as sacreBLEU's own paired test does. The interval uses Student's t with
Welch-Satterthwaite degrees of freedom (each seed part on its moderated degrees of freedom); p-values are two-sided
and Holm-corrected (Holm, 1979) over every row tested
against the same reference on the same metric. This follows Bouthillier et al. (2021), "Accounting for variance in
machine learning benchmarks": randomise the seeds and the test sample, and count both.

The same test marks the table (`reports.table.significance_mark`) and judges the claims, so a mark and a verdict never
disagree on what is significant. Its power is stated as the minimum detectable effect (`RowTest.mde`): what it finds
four times in five.
"""

from __future__ import annotations

import functools
import math
import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

import numpy as np
import scipy  # its submodules (special, stats, optimize) load on first use, so --help pays none of them
from ablate.ablations.statistics.variance import Moderated, Screen, holm, moderate, screen

ALPHA = 0.05
"""Significance level of every test and 1 - coverage of every interval."""
N_SAMPLES = 1000
"""Bootstrap resamples of the dev sentences."""
BOOTSTRAP_SEED = 12345
"""The resampled sentence indices are fixed, so a report is reproducible (sacreBLEU's default seed)."""
POWER = 0.8
"""The power at which the minimum detectable effect is stated (the usual 80%)."""


@dataclass(frozen=True, kw_only=True)
class SystemScores:
    """One trained model (row x seed) on the dev set: its corpus score and, where known, per-sentence statistics."""

    score: float
    """Corpus-level score, as reported."""
    stats: np.ndarray | None = None
    """(sentences, k) sufficient statistics whose column sums give the corpus score through `scorer`."""
    scorer: Callable[[np.ndarray], float] | None = None
    """stats sums (k,) -> score."""
    scores_of: Callable[[np.ndarray], np.ndarray] | None = None
    """stats sums (n, k) -> n scores, each what `scorer` gives that row: the bootstrap's 1000 replicates in one call
    (`ablations.results.scores` gives sacreBLEU's metrics in numpy); None: `scorer` row by row."""
    replicates: dict[int, tuple[weakref.ref, np.ndarray | None]] = field(default_factory=dict, compare=False,
                                                                          repr=False)  # fmt: skip
    """Its bootstrap scores already computed (`bootstrap_all`): id of the weights -> (a weak reference to those
    weights, the scores)."""


@dataclass(frozen=True, kw_only=True)
class RowTest:
    """One row against one reference row on one metric."""

    row: str
    against: str
    metric: str
    n_row: int
    n_against: int
    effect: float | None
    """mean(row) - mean(reference), in the metric's units."""
    se: float = math.nan
    se_seeds: float | None = None
    """Seed part of the standard error (None: only one seed anywhere, seed noise unknown)."""
    se_sentences: float | None = None
    """Sentence part of the standard error (None: no per-sentence statistics)."""
    df: float = math.inf
    ci: tuple[float, float] = (math.nan, math.nan)
    """95% confidence interval of the effect (not adjusted for multiplicity)."""
    p: float | None = None
    """Two-sided p-value of effect != 0."""
    p_holm: float | None = None
    """p, Holm-corrected over every row tested against the same reference on the same metric (the table's marks;
    the claims' verdicts are corrected over the study's claims instead: `ablations.statistics.family`)."""
    spread: Screen | None = None
    """The row's seed spread against the study's over every budget (`ablations.statistics.variance.screen`; None:
    not screened)."""
    seed_vars: tuple[float, float] | None = None
    """The seed variance of one seed of the row and of the reference that the seed part used (None: not estimated):
    what the sequential design's information fractions are computed from."""
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def mde(self) -> float | None:
        """The minimum detectable effect: the smallest |effect| this test finds with POWER at ALPHA (two-sided),
        (t_{1-ALPHA/2, df} + t_{POWER, df}) * SE, with the test's own SE and df; None without a standard error."""
        return self.detectable(ALPHA)

    def detectable(self, level: float) -> float | None:
        """The smallest |effect| this test finds with POWER at a two-sided `level` (`mde` at ALPHA; a claim's at the
        level its family holds it to); None without a standard error."""
        if not self.se > 0:
            return None

        return float((scipy.stats.t.ppf(1 - level / 2, self.df) + scipy.stats.t.ppf(POWER, self.df)) * self.se)

    def power(self, delta: float, level: float) -> float | None:
        """The chance that a two-sided test at `level` finds a true difference `delta` with its sign:
        1 - T_df(t_{1-level/2, df} - |delta| / SE), the shifted-t approximation `detectable` inverts (at
        |delta| = detectable(level) it gives POWER). None without a standard error."""
        if not self.se > 0:
            return None

        return float(scipy.stats.t.sf(scipy.stats.t.ppf(1 - level / 2, self.df) - abs(delta) / self.se, self.df))

    def p_tost(self, margin: float) -> float | None:
        """p-value of the two one-sided tests (TOST) of |effect| < margin (equivalence)."""
        if self.effect is None or not self.se > 0:
            return None

        lower = scipy.stats.t.sf((self.effect + margin) / self.se, self.df)
        upper = scipy.stats.t.sf((margin - self.effect) / self.se, self.df)
        return float(max(lower, upper))


@dataclass(frozen=True)
class SeedNoise:
    """The seed variances behind one comparison: the row's and the reference's, each on its degrees of freedom
    (inf: known, as a pooled variance over many rows is treated; var None: not estimated)."""

    row_var: float | None
    row_df: float
    ref_var: float | None
    ref_df: float

    @classmethod
    def shared(cls, var: float | None, df: float) -> SeedNoise:
        """One variance for both (the pooled one of `pooled_seed_variance`)."""
        return cls(var, df, var, df)

    def se(self, n_row: int, n_ref: int) -> tuple[float | None, float]:
        """The seed part of the effect's standard error and its Welch-Satterthwaite degrees of freedom."""
        if self.row_var is None or self.ref_var is None or not (self.row_df > 0 and self.ref_df > 0):
            return None, 0.0
        a, b = self.row_var / n_row, self.ref_var / n_ref
        if (a + b) == 0:
            return 0.0, math.inf
        if self.row_df == self.ref_df and self.row_var == self.ref_var:  # one shared variance: its own df
            return math.sqrt(a + b), self.row_df
        df = (a + b) ** 2 / (a**2 / self.row_df + b**2 / self.ref_df)
        return math.sqrt(a + b), df


def pooled_seed_variance(rows: Sequence[Sequence[float]]) -> tuple[float | None, int]:
    """Within-row variance over seeds pooled across rows, and its degrees of freedom (None, 0 with one seed each)."""
    ss, df = 0.0, 0
    for values in rows:
        values = [v for v in values if math.isfinite(v)]
        if len(values) >= 2:
            mean = sum(values) / len(values)
            ss += sum((v - mean) ** 2 for v in values)
            df += len(values) - 1
    return (ss / df, df) if df else (None, 0)


@functools.lru_cache(maxsize=4)
def resample_weights(n_sentences: int, n_samples: int = N_SAMPLES, seed: int = BOOTSTRAP_SEED) -> np.ndarray:
    """(n_samples, n_sentences) counts: how often each sentence is drawn in each bootstrap replicate. Read-only,
    and made once a process for a dev set: every comparison of a report resamples the same sentences."""
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, n_sentences, size=(n_samples, n_sentences))
    flat = (np.arange(n_samples)[:, None] * n_sentences + idx).ravel()
    weights = np.bincount(flat, minlength=n_samples * n_sentences).astype(np.float64)
    weights = weights.reshape(n_samples, n_sentences)
    weights.flags.writeable = False
    return weights


def bootstrap_scores(system: SystemScores, weights: np.ndarray) -> np.ndarray | None:
    """The system's corpus score on every bootstrap replicate, or None without per-sentence statistics."""
    if system.stats is None or system.scorer is None or system.stats.shape[0] != weights.shape[1]:
        return None
    sums = weights @ system.stats
    if system.scores_of is not None:
        return np.asarray(system.scores_of(sums), dtype=np.float64)
    return np.array([system.scorer(row) for row in sums], dtype=np.float64)


def compare(
    row: str,
    against: str,
    metric: str,
    mine: list[SystemScores],
    theirs: list[SystemScores],
    seed_var: SeedNoise | tuple[float | None, float],
    weights: np.ndarray | None,
    cache: dict[int, np.ndarray | None] | None = None,
) -> RowTest:
    """The test of one row against a reference (see the module docstring); `cache` holds bootstrap scores by id.
    scipy's t ufuncs (`stdtr`, `stdtrit`) rather than its distribution objects: the same numbers, a hundred times
    faster, which the design's simulations need."""

    if not mine or not theirs:
        return RowTest(row=row, against=against, metric=metric, n_row=len(mine), n_against=len(theirs), effect=None)
    effect = float(np.mean([s.score for s in mine]) - np.mean([s.score for s in theirs]))
    variance, notes = 0.0, []
    noise = seed_var if isinstance(seed_var, SeedNoise) else SeedNoise.shared(*seed_var)
    se_seeds, df_seed = noise.se(len(mine), len(theirs))
    if se_seeds is None:
        notes.append("one seed per row: seed noise not estimated (run more seeds)")
    else:
        variance += se_seeds**2
    se_sent = _sentence_se(mine, theirs, weights, cache)
    if se_sent is None:
        notes.append("no per-sentence statistics: sentence noise not counted")
    else:
        variance += se_sent**2
    se = _beyond_roundoff(math.sqrt(variance), [s.score for s in (*mine, *theirs)])
    # Welch-Satterthwaite: only the seed part is estimated from few values; the bootstrap part is known well.
    df = (
        math.inf
        if se_seeds is None or df_seed == 0 or math.isinf(df_seed) or se == 0 or se_seeds == 0
        else se**4 / (se_seeds**4 / df_seed)
    )
    if se > 0:
        t = float(scipy.special.stdtrit(df, 1 - ALPHA / 2))
        ci = (effect - t * se, effect + t * se)
        p = float(2 * scipy.special.stdtr(df, -abs(effect) / se))
    else:
        ci, p = (effect, effect), (1.0 if effect == 0 else None)
    return RowTest(
        row=row,
        against=against,
        metric=metric,
        n_row=len(mine),
        n_against=len(theirs),
        effect=effect,
        se=se,
        se_seeds=se_seeds,
        se_sentences=se_sent,
        df=df,
        ci=ci,
        p=p,
        seed_vars=None if se_seeds is None else (float(noise.row_var or 0.0), float(noise.ref_var or 0.0)),
        notes=tuple(notes),
    )


ROUNDOFF = 1e-6
"""A standard error below this share of the scores' size is round-off (the moderated seed variance of rows whose
seeds all scored the same is about 1e-15, an SE of 1e-8, not 0): the test has no variance (`_beyond_roundoff`)."""


def _beyond_roundoff(se: float, scores: list[float]) -> float:
    """`se`, or 0 where it is round-off: every seed and sentence of both rows scored the same (models that learnt
    nothing all score BLEU 0), so there is no interval and no test, not one of width 1e-8."""
    return 0.0 if se <= ROUNDOFF * max([1.0, *(abs(x) for x in scores)]) else se


def _sentence_se(
    mine: list[SystemScores],
    theirs: list[SystemScores],
    weights: np.ndarray | None,
    cache: dict[int, np.ndarray | None] | None,
) -> float | None:
    """The sentence part of the difference's standard error: the SD of the paired bootstrap's differences of the
    two rows' mean scores; None when any system has no per-sentence statistics."""
    if weights is None:
        return None
    present = [b for s in (*mine, *theirs) if (b := _cached(s, weights, cache)) is not None]
    if len(present) != len(mine) + len(theirs):
        return None
    diff = np.mean(present[: len(mine)], axis=0) - np.mean(present[len(mine) :], axis=0)
    return float(np.std(diff, ddof=1))


def bootstrap_all(systems: Sequence[SystemScores], weights: np.ndarray) -> dict[int, np.ndarray | None]:
    """`bootstrap_scores` of every system, by id: the sums of all of them from one product with the weights.
    Each product reads the whole (1000 x sentences) weights, which costs more than the arithmetic; once for all is one
    read (docs/reference/code-figures.md, "ablations/statistics/significance.py")."""
    unique = list({id(s): s for s in systems}.values())
    out: dict[int, np.ndarray | None] = {}
    for system in unique:  # resampled before with these weights (another look or table of the same report)
        if (seen := system.replicates.get(id(weights))) is not None and seen[0]() is weights:
            out[id(system)] = seen[1]
    fit = [(s, s.stats, s.scorer) for s in unique if id(s) not in out and s.stats is not None
           and s.scorer is not None and s.stats.shape[0] == weights.shape[1]]  # fmt: skip
    # Counts (sacreBLEU's statistics) whose every sum stays below 2^24 are summed exactly in float32, which is faster
    # (docs/reference/code-figures.md, the same section); the rest (perplexity's summed NLL) in float64.
    limit = 2.0**24 / weights.shape[1]
    exact = {id(s) for s, stats, _ in fit if np.array_equal(stats, np.trunc(stats)) and np.abs(stats).max() < limit}
    counts = [item for item in fit if id(item[0]) in exact]
    for group, dtype in ((counts, np.float32), ([item for item in fit if id(item[0]) not in exact], np.float64)):
        if not group:
            continue
        sums = (weights.astype(dtype) @ np.hstack([stats for _, stats, _ in group]).astype(dtype)).astype(np.float64)
        edges = np.cumsum([0, *(stats.shape[1] for _, stats, _ in group)])
        for (system, _, scorer), lo, hi in zip(group, edges, edges[1:], strict=False):
            part = sums[:, lo:hi]
            scored = system.scores_of(part) if system.scores_of is not None else [scorer(r) for r in part]
            out[id(system)] = np.asarray(scored, dtype=np.float64)
            system.replicates[id(weights)] = (weakref.ref(weights), out[id(system)])
    return out


def _cached(system: SystemScores, weights: np.ndarray, cache: dict[int, np.ndarray | None] | None):
    if cache is None:
        return bootstrap_scores(system, weights)
    if id(system) not in cache:
        cache[id(system)] = bootstrap_scores(system, weights)
    return cache[id(system)]


def compare_rows(
    systems: dict[str, list[SystemScores]],
    pairs: Sequence[tuple[str, str]],
    metric: str,
    *,
    n_samples: int = N_SAMPLES,
    screened: Mapping[str, Screen] | None = None,
) -> dict[tuple[str, str, str], RowTest]:
    """Test every (row, reference) pair on one metric; Holm over the pairs that share a reference. `screened`: each
    row's spread over every budget (`ablations.statistics.variance.screen`), which decides the rows that keep their
    own variance; without it, this budget's scores alone decide."""
    names = list(systems)
    scores = [[s.score for s in systems[name]] for name in names]
    moderated, _ = moderate(scores, screened=None if screened is None else [screened.get(n) for n in names])
    noise = dict(zip(names, moderated, strict=True))
    sizes = {s.stats.shape[0] for scores in systems.values() for s in scores if s.stats is not None}
    weights = resample_weights(sizes.pop(), n_samples) if len(sizes) == 1 else None
    cache = bootstrap_all([s for scores in systems.values() for s in scores], weights) if weights is not None else {}
    tests = {
        (row, ref, metric): compare(
            row, ref, metric, systems.get(row, []), systems.get(ref, []), _noise(noise, row, ref), weights, cache
        )
        for row, ref in pairs
    }
    for key, test in tests.items():
        if screened is not None and key[0] in screened:
            tests[key] = test = _with(test, spread=screened[key[0]])
        if key[0] in noise and noise[key[0]].outlier:
            note = "its seeds vary far more than the study's: the row keeps its own seed variance"
            tests[key] = _with(test, notes=(*test.notes, note))
    for ref in {ref for _, ref in pairs}:
        keys = [k for k in tests if k[1] == ref]
        for key, adjusted in zip(keys, holm([tests[k].p for k in keys]), strict=True):
            tests[key] = _with(tests[key], p_holm=adjusted)
    return tests


def screen_budgets(by_budget: Mapping[float, Mapping[str, Mapping[int, float]]]) -> dict[str, Screen]:
    """`ablations.statistics.variance.screen` of every row over the budgets: budget -> row -> seed -> score. A row is
    screened on the seeds it has at every budget (a seed still training at T counts at no budget)."""
    budgets = sorted(by_budget)
    rows = {name for scores in by_budget.values() for name in scores}
    matrices = {}
    for name in sorted(rows):
        per = [by_budget[b].get(name, {}) for b in budgets]
        common = sorted(set.intersection(*(set(p) for p in per)))
        values = np.array([[p[seed] for p in per] for seed in common], dtype=float).reshape(len(common), len(per))
        finite = values[np.isfinite(values).all(axis=1)]
        if len(finite) >= 2:
            matrices[name] = finite
    return screen(matrices)


def half_width_with_one_more_seed(test: RowTest) -> float | None:
    """The half-width of the test's 95% interval were its row to get one more seed at the same spread: the row's own
    variance (`seed_vars`) over one more seed and on one more degree of freedom, the reference's part and the sentence
    noise as they are. None without a seed part."""

    if test.seed_vars is None or not test.se > 0:
        return None
    row_var, ref_var = test.seed_vars
    n = test.n_row + 1
    mine = row_var / n
    se = math.sqrt(mine + ref_var / test.n_against + (test.se_sentences or 0.0) ** 2)
    df = se**4 / (mine**2 / (n - 1)) if mine > 0 else math.inf  # Welch: the row's part is the one estimated from few
    return float(scipy.special.stdtrit(df, 1 - ALPHA / 2)) * se


def seeds_needed(test: RowTest, effect: float, power: float = POWER, sentences: float = 1.0) -> int | None:
    """Seeds a row would need (the base keeping its ratio of seeds to the row's) for this test to find `effect` with
    `power` at ALPHA: the n with (z_{1-ALPHA/2} + z_power) * SE(n) <= |effect|, where
    SE(n)^2 = v (1/n + 1/(n c)) + SE_sentences^2 / sentences, v the per-seed variance behind the test's seed part,
    c the base's seeds over the row's, and `sentences` the dev set's size as a multiple of this one's (the paired
    bootstrap's variance falls as 1 / sentences: measured, docs/method/noise.md). Normal quantiles: with
    the seeds such a study has, the t's df are large. None when more seeds cannot do it: the dev set's sentence noise
    alone hides the effect (more dev sentences would), or the test has no seed part."""

    if test.se_seeds is None or not test.se_seeds > 0 or effect == 0:
        return None
    z = scipy.stats.norm.ppf(1 - ALPHA / 2) + scipy.stats.norm.ppf(power)
    ratio = test.n_against / test.n_row
    v = test.se_seeds**2 / (1 / test.n_row + 1 / test.n_against)
    room = (abs(effect) / z) ** 2 - (test.se_sentences or 0.0) ** 2 / sentences
    if room <= 0:
        return None
    return max(test.n_row, math.ceil(v * (1 + 1 / ratio) / room))


DEV_FACTORS = (1, 2, 4, 8, 16)
"""Dev-set sizes, as multiples of the study's, that the power advice considers."""
MAX_SEEDS = 50
"""More seeds a row than this is not advice anyone takes."""


def design_needed(test: RowTest, effect: float, power: float = POWER) -> tuple[int, int] | None:
    """The cheapest design that finds `effect` with `power`: (dev-set multiple, seeds a row), the smallest dev set in
    `DEV_FACTORS` at which at most `MAX_SEEDS` seeds suffice (decoding more dev sentences costs seconds a trial,
    a seed a whole trial), then the fewest seeds there. None when no such design exists."""
    for factor in DEV_FACTORS:
        seeds = seeds_needed(test, effect, power, sentences=factor)
        if seeds is not None and seeds <= MAX_SEEDS:
            return factor, seeds
    return None


@dataclass(frozen=True, kw_only=True)
class SeedCorrelation:
    """How much one seed moves every row alike: the intra-class correlation of the seed effect in a two-way layout
    (rows x the seeds they share, one score each), and the F test of that effect."""

    rho: float
    """sigma_seed^2 / (sigma_seed^2 + sigma_residual^2), from the mean squares; 0 when the seed's mean square is not
    above the residual's. Pairing rows by seed would remove about this fraction of a row's seed variance."""
    p: float
    """F test of the seed effect (MS_seed / MS_residual on (S - 1, (R - 1)(S - 1)) df)."""
    rows: int
    seeds: int


def seed_correlation(scores: dict[str, dict[int, float]]) -> SeedCorrelation | None:
    """The seed effect shared across rows (see `SeedCorrelation`), over the complete block of rows x seeds with the
    most residual degrees of freedom: the k seeds most rows have (for each k), and the rows that have all k (a study
    still running, or one row short of a seed, still measures it). None with fewer than two such seeds or rows."""

    counts: dict[int, int] = {}
    for by_seed in scores.values():
        for seed in by_seed:
            counts[seed] = counts.get(seed, 0) + 1
    ranked = sorted(counts, key=lambda s: (-counts[s], s))
    best, best_df = None, 0
    for k in range(2, len(ranked) + 1):
        seeds = sorted(ranked[:k])
        rows = [by_seed for by_seed in scores.values() if all(s in by_seed for s in seeds)]
        if len(rows) >= 2 and (len(rows) - 1) * (k - 1) > best_df:
            best, best_df = np.array([[by_seed[s] for s in seeds] for by_seed in rows]), (len(rows) - 1) * (k - 1)
    if best is None:
        return None
    x = best
    r, k = x.shape
    resid = x - x.mean(axis=1, keepdims=True) - x.mean(axis=0, keepdims=True) + x.mean()
    ms_seed = r * float(np.sum((x.mean(axis=0) - x.mean()) ** 2)) / (k - 1)
    ms_err = float(np.sum(resid**2)) / ((r - 1) * (k - 1))
    if ms_err <= 0:
        return None
    var_seed = max(0.0, (ms_seed - ms_err) / r)
    p = float(scipy.stats.f.sf(ms_seed / ms_err, k - 1, (r - 1) * (k - 1)))
    return SeedCorrelation(rho=var_seed / (var_seed + ms_err), p=p, rows=r, seeds=k)


def _noise(noise: dict[str, Moderated], row: str, ref: str) -> SeedNoise:
    """The comparison's seed variances from the rows' moderated ones (none for a row without trials)."""
    mine, theirs = noise.get(row), noise.get(ref)
    if mine is None or theirs is None or not (mine.df > 0 and theirs.df > 0):
        return SeedNoise(None, 0.0, None, 0.0)
    return SeedNoise(mine.var, mine.df, theirs.var, theirs.df)


def _with(test: RowTest, **changes) -> RowTest:
    return replace(test, **changes)


__all__ = [
    "ALPHA",
    "N_SAMPLES",
    "POWER",
    "RowTest",
    "SeedCorrelation",
    "SeedNoise",
    "SystemScores",
    "compare",
    "holm",
    "pooled_seed_variance",
    "resample_weights",
    "bootstrap_all",
    "compare_rows",
    "screen_budgets",
    "seed_correlation",
    "seeds_needed",
    "half_width_with_one_more_seed",
    "design_needed",
    "DEV_FACTORS",
    "MAX_SEEDS",
    "BOOTSTRAP_SEED",
    "bootstrap_scores",
]
