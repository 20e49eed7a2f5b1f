"""How noisy is each row across seeds? Its own spread, moderated toward the study's, unless it is an outlier.

With two seeds a row's sample variance has one degree of freedom: alone, its 95% interval is +-12.7 standard
errors. Pooling every row's variance (one recipe, one noise level) gives narrow intervals, but one unstable row
(seeds that disagree, as when a row learns late) then widens every row's interval and gets too narrow a one itself.
Empirical Bayes sits between the two, in three steps:

1. **Outlying rows keep their own variance**, screened over every budget at once (`screen`). Each seed is one trained
   model scored at T/2 and at T; a row's deviations from its own mean at both budgets, whitened by the other rows'
   pooled covariance across budgets, give its spread on (seeds - 1) x budgets degrees of freedom: 4 at three seeds
   where one budget gives 2. A row whose spread is above the others' at SCREEN_ALPHA (one-sided F, each row on its
   own: a screen, not a test, so no correction over the rows) keeps its own variance at each budget on its own
   degrees of freedom. The reference is robust to several noisy rows: found rows leave it and the screen is taken
   again, until it finds the same rows, so that hypervariable rows do not hide each other (the aim of Phipson, Lee,
   Majewski, Alexander and Smyth, 2016, "Robust hyperparameter estimation protects against hypervariable genes and
   improves power to detect differential expression", Ann. Appl. Stat. 10; limma's `fitFDistRobustly`, whose
   winsorised moments and per-gene prior weights need thousands of genes: a study has tens of rows). At three seeds,
   the fewest a row is decided on, a row whose spread is above the others' at UNSETTLED_ALPHA keeps its own variance
   too: a clear effect is still decided on it, a close one waits for the fourth seed. A row the screen finds also
   leaves the prior, so that the other rows stop paying for it. Without every budget's scores (`ablate compare` pools
   two studies' rows at one budget), each row's variance is tested against the pooled variance of the others at
   OUTLIER_ALPHA (s_g^2 / s_pool^2 ~ F(d_g, the others' d), leave one out), and only a clear outlier (below
   PRIOR_ALPHA after Holm's correction over the rows) leaves the prior: leaving out every row screened from one
   budget's two degrees of freedom would leave the prior the variances that happened to be low. Why it matters: a row
   of three or ten times the others' variance that borrows the pooled one is decided on an interval too narrow for
   it, and breaks the study's error guarantee when Holm hands it the whole level; the screen over both budgets, the
   unsettled rows' own variance and the truncated Holm of `ablations.statistics.family` keep it, over the grid that
   docs/method/verdicts.md, "What the verdicts guarantee", states. No row is decided on two seeds
   (`ablations.statistics.sequential.DECIDING_SEEDS`), where its spread cannot show.
2. **Moderated variances** (Smyth, 2004, "Linear models and empirical Bayes methods for assessing differential
   expression in microarray experiments", SAGMB 3; limma's `fitFDist` and `squeezeVar`), when the other rows'
   variances differ by more than chance (Bartlett's test of homogeneity, p < HETEROGENEITY_ALPHA, 1%): they are
   then modelled as s_g^2 | sigma_g^2 ~ sigma_g^2 chi2(d_g) / d_g with 1 / sigma_g^2 ~ chi2(d0) / (d0 s0^2); d0 and s0^2
   are fitted by moments of log s^2 (digamma and trigamma), and each row's variance is the posterior
   (d0 s0^2 + d_g s_g^2) / (d0 + d_g) on d0 + d_g degrees of freedom.
3. **Otherwise the pooled variance** (d0 = inf), on the rows' degrees of freedom together (limma's cap: no row's
   variance is known better than from every row).

Why the gates: limma is made for thousands of genes, where d0 is well determined. From a study's rows of one degree
of freedom each, its moment estimate of d0 is often finite when the truth is d0 = inf, and its intervals then cover
less than they claim; so the pooled variance is kept unless the rows show that they differ. An unstable row with two
seeds still looks ordinary most of the time, and no interval narrow enough for the other rows can cover it then.
Measured by simulation (`tests/ablations/statistics/test_variance.py`): docs/method/noise.md, and
docs/reference/code-figures.md, "ablations/statistics/variance.py".

scipy supplies the digamma and trigamma (polygamma) functions and the F, chi2 and Bartlett tests; the rest is the
papers' formulas.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import scipy  # its submodules (special, stats, optimize) load on first use, so --help pays none of them

OUTLIER_ALPHA = 0.01
"""Without the budgets together (one budget's scores alone, as `ablate compare` pools two studies): a row whose
variance is above the other rows' at this level (one-sided F, each row on its own) keeps its own."""
SCREEN_ALPHA = 0.01
"""With every budget's scores (`screen`): a row whose seeds spread beyond the other rows' at this level keeps its own
variance. It sees each seed at every budget: at four seeds and two budgets (6 df) it finds a row of ten times the
others' variance about 95 times in 100, one of three times about half the time; a row of three times at three seeds
waits for its fourth (`ablations.statistics.sequential.UNSETTLED_ALPHA`). Every ordinary row it finds stands on its
own variance at its last look, which costs power: at 2.5% it cost a planted 2-BLEU effect 1.2 points against 1%
(2,000 replicates on common seeds), and at 5% two points. What 1% lets through, Holm's truncation at a quarter
(`ablations.statistics.family.TRUNCATION`) holds over the grid (docs/method/verdicts.md,
"What the verdicts guarantee")."""
PRIOR_ALPHA = 0.01
"""A row whose variance is above the other rows' at this level, Holm-corrected over the rows, is also left out of the
prior the others share. Only a clear outlier: leaving out every screened row would leave the prior the variances
that happened to be low, and the ordinary rows' intervals too narrow (91% coverage at two seeds, against 95%)."""
HETEROGENEITY_ALPHA = 0.01
"""The rows' variances are moderated toward a fitted prior only when Bartlett's test rejects equal variances at this
level; otherwise they share the pooled variance."""


@dataclass(frozen=True)
class Prior:
    """The study's seed variance as a prior: s0^2 on d0 degrees of freedom (d0 = inf: every row shares s0^2)."""

    var: float
    df: float


@dataclass(frozen=True, kw_only=True)
class Moderated:
    """One row's seed variance after moderation."""

    var: float
    """Variance of one seed's score: the posterior, the pooled one, or the row's own (an outlier)."""
    df: float
    """Its degrees of freedom."""
    own_var: float | None
    """The row's own sample variance (None with one seed)."""
    own_df: int
    outlier: bool = False
    """True when the row's seeds vary far more than the other rows' (step 1): it keeps its own variance."""


def fit_prior(variances: Sequence[float] | np.ndarray, dfs: Sequence[float] | np.ndarray) -> Prior | None:
    """limma's `fitFDist` (Smyth, 2004, section 6.2): d0 and s0^2 by moments of log s^2 (d0 = inf when the log
    variances spread no more than their chi2 alone would). None with no row to fit."""

    s2, d = _valid(variances, dfs)
    if not len(s2):
        return None
    if len(s2) < 3:  # too few rows to see spread between them
        return Prior(var=_pooled(s2, d), df=math.inf)
    e = np.log(s2) - scipy.special.digamma(d / 2) + np.log(d / 2)
    excess = float(np.var(e, ddof=1) - np.mean(scipy.special.polygamma(1, d / 2)))
    if excess <= 0:
        return Prior(var=_pooled(s2, d), df=math.inf)
    d0 = 2 * _trigamma_inverse(excess)
    return Prior(var=float(math.exp(float(np.mean(e)) + scipy.special.digamma(d0 / 2) - math.log(d0 / 2))), df=d0)


def _valid(variances: Sequence[float] | np.ndarray, dfs: Sequence[float] | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    s2, d = np.asarray(variances, dtype=float), np.asarray(dfs, dtype=float)
    keep = (d > 0) & np.isfinite(s2)
    return np.maximum(s2[keep], 1e-12), d[keep]  # a zero variance (identical seeds) stays finite on the log scale


def _pooled(s2: np.ndarray, d: np.ndarray) -> float:
    """The pooled variance: the sum of squares over the degrees of freedom (the limit d0 -> inf)."""
    return float(np.sum(s2 * d) / np.sum(d))


def _trigamma_inverse(y: float) -> float:
    """x with trigamma(x) = y, by Newton's method from limma's starting point (Smyth, 2004, appendix)."""

    x = 0.5 + 1 / y
    for _ in range(50):
        step = scipy.special.polygamma(1, x) * (1 - scipy.special.polygamma(1, x) / y) / scipy.special.polygamma(2, x)
        x += step
        if -step / x < 1e-8:
            break
    return float(x)


@dataclass(frozen=True, kw_only=True)
class Screen:
    """One row's seeds against the study's, over every budget at once (`screen`)."""

    p: float
    """One-sided p of a spread this far above the other rows' (F on df and the others' df)."""
    ratio: float
    """The row's spread over the other rows', in the others' units: about 1 for a row in line."""
    df: int
    """The row's degrees of freedom: (seeds - 1) x the budgets its scores vary over."""


def screen(seeds: Mapping[str, np.ndarray], *, alpha: float | None = None) -> dict[str, Screen]:
    """Each row's seed spread against the other rows', over every budget together: step 1 of the module docstring.

    `seeds`: row -> (seeds, budgets) scores, each seed's score at every budget (T/2 and T: one trained model read
    twice). A row's deviations from its own mean at each budget are whitened by the other rows' pooled covariance
    across budgets, so a seed counts once per budget with the correlation between budgets taken out:
    Q = sum_s e_s' S^-1 e_s, and Q / df ~ F(df, budgets x the others' df) for a row in line (df = budgets x
    (seeds - 1)). With one budget this is the one-sided F of each row's variance against the others' pooled one.
    Three seeds at two budgets give 4 degrees of freedom where one budget gives 2: at SCREEN_ALPHA a row of ten times
    the others' variance is found in about 84% of draws, against 54% from one budget.

    The reference is robust to several noisy rows: rows found at `alpha` leave the others' reference, and the screen
    is taken again, until it finds the same rows (a forward search; Phipson et al.'s aim, that hypervariable rows do
    not hide each other, reached by removal because a study has tens of rows, not thousands). Rows with one seed get
    no screen."""

    alpha = SCREEN_ALPHA if alpha is None else alpha
    arrays = {name: np.asarray(x, dtype=float) for name, x in seeds.items()}
    arrays = {name: x for name, x in arrays.items() if x.ndim == 2 and x.shape[0] >= 2}
    if not arrays:
        return {}
    names = list(arrays)
    # Q = sum_s e_s' S^-1 e_s = the sum of S^-1 * (E'E) elementwise: each row needs only its cross-products.
    scatter = np.stack([(x - x.mean(axis=0)).T @ (x - x.mean(axis=0)) for x in arrays.values()])
    own_df = np.array([x.shape[0] - 1 for x in arrays.values()])
    flagged = np.zeros(len(names), dtype=bool)
    for _ in range(len(names) + 1):  # each pass flags at least one more row, or it has converged
        kept = ~flagged
        mine = kept[:, None, None]  # a row in the reference leaves itself out of it
        df_ref = own_df[kept].sum() - np.where(kept, own_df, 0)
        ref = (scatter[kept].sum(axis=0)[None] - np.where(mine, scatter, 0)) / np.maximum(df_ref, 1)[:, None, None]
        budgets = np.linalg.matrix_rank(ref, hermitian=True)
        ratio = np.sum(np.linalg.pinv(ref, hermitian=True) * scatter, axis=(1, 2)) / np.maximum(budgets * own_df, 1)
        valid = (df_ref >= 2) & (budgets > 0)
        p = np.where(
            valid, scipy.special.fdtrc(np.maximum(budgets * own_df, 1), np.maximum(budgets * df_ref, 1), ratio), 1.0
        )
        now = valid & (p < alpha)
        if np.array_equal(now, flagged):
            break
        flagged = now
    return {
        name: Screen(p=float(p[i]), ratio=float(ratio[i]), df=int(budgets[i] * own_df[i]))
        for i, name in enumerate(names)
        if valid[i]
    }


def moderate(
    rows: Sequence[Sequence[float]], *, robust: bool = True, screened: Sequence[Screen | None] | None = None
) -> tuple[list[Moderated], Prior | None]:
    """Each row's seed variance from its seeds' scores (steps 1-3 of the module docstring), and the prior the
    ordinary rows share (None: no row has two seeds). `screened`: each row's `screen` over every budget (None for a
    row it could not screen); without it, each row is screened on these scores alone at OUTLIER_ALPHA. A row with one
    seed gets the prior's variance; with no prior, none (var NaN, df 0)."""
    values = [[v for v in row if math.isfinite(v)] for row in rows]
    own: list[tuple[float | None, int]] = [
        (float(np.var(v, ddof=1)), len(v) - 1) if len(v) >= 2 else (None, 0) for v in values
    ]
    fitted = {i: (s2, d) for i, (s2, d) in enumerate(own) if s2 is not None and d > 0}  # the rows of two seeds or more
    if screened is not None:
        tails = {i: found.p for i, found in enumerate(screened) if found is not None and i in fitted} if robust else {}
        level = SCREEN_ALPHA
    else:
        tails, level = (_tails(fitted) if robust and len(fitted) >= 4 else {}), OUTLIER_ALPHA
    outliers = {i for i, p in zip(tails, holm(list(tails.values())), strict=True) if p is not None and p < PRIOR_ALPHA}
    own_kept = {i for i, p in tails.items() if p < level} | outliers
    inliers = [i for i in fitted if i not in outliers]
    prior = _prior([values[i] for i in inliers], [fitted[i] for i in inliers])
    total_df = float(sum(own[i][1] for i in inliers))
    out = []
    for i, (s2, d) in enumerate(own):
        if i in own_kept and s2 is not None:
            out.append(Moderated(var=float(s2), df=float(d), own_var=s2, own_df=d, outlier=True))
        elif prior is None:
            out.append(Moderated(var=math.nan, df=0, own_var=s2, own_df=d))
        elif d == 0 or s2 is None or math.isinf(prior.df):
            out.append(Moderated(var=prior.var, df=min(prior.df, total_df), own_var=s2, own_df=d))
        else:
            var = (prior.df * prior.var + d * s2) / (prior.df + d)
            out.append(Moderated(var=float(var), df=min(prior.df + d, total_df), own_var=s2, own_df=d))
    return out, prior


def _prior(values: list[list[float]], own: list[tuple[float, int]]) -> Prior | None:
    """The ordinary rows' prior: fitted by moments when Bartlett's test finds their variances unequal, else pooled."""
    if not own:
        return None
    s2, d = _valid([v for v, _ in own], [n for _, n in own])
    pooled = Prior(var=_pooled(s2, d), df=math.inf)
    if len(own) < 3 or all(v == 0 for v, _ in own):
        return pooled
    with np.errstate(divide="ignore", invalid="ignore"):  # a row of identical seeds (log 0): no test, pooled
        p = _bartlett(values)
    return (fit_prior(s2, d) or pooled) if p < HETEROGENEITY_ALPHA else pooled


def _bartlett(values: list[list[float]]) -> float:
    """Bartlett's test of equal variances (Bartlett, 1937): the p of its chi-squared statistic, as
    `scipy.stats.bartlett` gives it. Written out because scipy's wrapper costs milliseconds a call (its input checks)
    and a simulation of the design calls it millions of times; `tests/ablations/statistics/test_variance.py` checks
    it against scipy's."""

    n = np.array([len(v) for v in values], dtype=float)
    s2 = np.array([np.var(v, ddof=1) for v in values])
    k, total = len(values), float(n.sum())
    pooled = float(np.sum((n - 1) * s2) / (total - k))
    statistic = (total - k) * math.log(pooled) - float(np.sum((n - 1) * np.log(s2)))
    statistic /= 1 + (float(np.sum(1 / (n - 1))) - 1 / (total - k)) / (3 * (k - 1))
    return float(scipy.special.chdtrc(k - 1, statistic))


def _tails(fitted: dict[int, tuple[float, int]]) -> dict[int, float]:
    """Each row's one-sided p of a variance above the other rows' pooled one (step 1)."""

    tails = {}
    for i in fitted:
        others = [j for j in fitted if j != i]
        df_others = sum(fitted[j][1] for j in others)
        pooled = sum(fitted[j][0] * fitted[j][1] for j in others) / df_others
        ratio = fitted[i][0] / pooled if pooled > 0 else (math.inf if fitted[i][0] > 0 else 1.0)
        tails[i] = float(scipy.special.fdtrc(fitted[i][1], df_others, ratio))
    return tails


def holm(p_values: Sequence[float | None]) -> list[float | None]:
    """Holm's step-down adjustment (strong control of the family-wise error rate); None stays None. The outlier gate
    here and the row tests of `ablations.statistics.significance` both use it."""
    order = sorted((p, i) for i, p in enumerate(p_values) if p is not None)
    adjusted: list[float | None] = [None] * len(p_values)
    running, m = 0.0, len(order)
    for rank, (p, i) in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p))
        adjusted[i] = running
    return adjusted


__all__ = [
    "HETEROGENEITY_ALPHA",
    "OUTLIER_ALPHA",
    "PRIOR_ALPHA",
    "SCREEN_ALPHA",
    "Moderated",
    "Prior",
    "Screen",
    "fit_prior",
    "holm",
    "moderate",
    "screen",
]
