"""How noisy is each row across seeds? Its own spread, moderated toward the study's, unless it is an outlier.

With two seeds a row's sample variance has one degree of freedom: alone, its 95% interval is +-12.7 standard
errors. Pooling every row's variance (one recipe, one noise level) gives narrow intervals, but one unstable row
(seeds that disagree, as when a row learns late) then widens every row's interval and gets too narrow a one itself.
Empirical Bayes sits between the two:

- **Moderated variances** (Smyth, 2004, "Linear models and empirical Bayes methods for assessing differential
  expression in microarray experiments", SAGMB 3; limma's `fitFDist` and `squeezeVar`). The rows' variances s_g^2
  (df d_g) are modelled as draws around a prior s0^2 with d0 prior degrees of freedom,
  s_g^2 | sigma_g^2 ~ sigma_g^2 chi2(d_g) / d_g and 1 / sigma_g^2 ~ chi2(d0) / (d0 s0^2). d0 and s0^2 are fitted by
  moments on the log scale (E[log s^2] and Var[log s^2] through digamma and trigamma); each row's posterior variance
  is (d0 s0^2 + d_g s_g^2) / (d0 + d_g) on d0 + d_g degrees of freedom. Rows that agree (no spread beyond the chi2)
  give d0 = inf: every row gets the pooled variance, as before.
- **Robust to outlying rows** (Phipson, Lee, Majewski, Alexander and Smyth, 2016, "Robust hyperparameter estimation
  protects against hypervariable genes and improves power to detect differential expression", Ann. Appl. Stat. 10;
  limma's `fitFDistRobustly`). Taken from there: the probability that a row is not an outlier, min(1, p_g / q_g),
  its upper tail p-value under the prior over its empirical tail rank (G - rank + 0.5) / G, and a prior degrees of
  freedom per row that falls with it, so an outlier keeps its own variance. Simplified here: each row's p-value is
  taken under the prior fitted without it (leave one out), and the prior is refitted without the rows that are
  outliers at the 5% level after Holm's correction, instead of limma's Winsorised moments. With 20 rows of one
  degree of freedom the Winsorised moments of a log chi2(1) are no better determined, and leaving one out keeps a
  single wild row (C4 at the tiny preset, seeds 27.6 and 38.6 BLEU against a pooled SD of 0.9) from hiding itself.

scipy supplies the digamma, trigamma (polygamma) and F distributions; the rest is the papers' formulas.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

OUTLIER_ALPHA = 0.05
"""A row whose variance is above the prior's at this level (Holm-corrected over the rows) is left out of the prior."""


@dataclass(frozen=True)
class Prior:
    """The study's seed variance as a prior: s0^2 on d0 degrees of freedom (d0 = inf: every row shares s0^2)."""

    var: float
    df: float


@dataclass(frozen=True, kw_only=True)
class Moderated:
    """One row's seed variance after moderation."""

    var: float
    """Posterior variance of one seed's score."""
    df: float
    """Its degrees of freedom (d_g + the row's prior df; inf with a pooled prior)."""
    own_var: float | None
    """The row's own sample variance (None with one seed)."""
    own_df: int
    not_outlier: float
    """Probability that the row's seeds vary like the study's (1: an ordinary row; near 0: it keeps its own)."""


def fit_prior(variances: Sequence[float], dfs: Sequence[float]) -> Prior | None:
    """limma's `fitFDist` (Smyth, 2004, section 6.2): d0 and s0^2 by moments of log s^2. None with no row to fit."""
    from scipy.special import digamma, polygamma

    s2, d = np.asarray(variances, dtype=float), np.asarray(dfs, dtype=float)
    keep = (d > 0) & np.isfinite(s2)
    s2, d = np.maximum(s2[keep], 1e-12), d[keep]  # a zero variance (identical seeds) stays finite on the log scale
    if not len(s2):
        return None
    e = np.log(s2) - digamma(d / 2) + np.log(d / 2)
    mean = float(np.mean(e))
    if len(s2) < 3:  # too few rows to see spread between them: share one variance, as pooling did
        return Prior(var=_pooled(s2, d), df=math.inf)
    excess = float(np.var(e, ddof=1) - np.mean(polygamma(1, d / 2)))
    if excess <= 0:
        return Prior(var=_pooled(s2, d), df=math.inf)
    d0 = 2 * _trigamma_inverse(excess)
    return Prior(var=float(math.exp(mean + digamma(d0 / 2) - math.log(d0 / 2))), df=d0)


def _pooled(s2: np.ndarray, d: np.ndarray) -> float:
    """The pooled variance: the sum of squares over the degrees of freedom (the limit d0 -> inf)."""
    return float(np.sum(s2 * d) / np.sum(d))


def _trigamma_inverse(y: float) -> float:
    """x with trigamma(x) = y, by Newton's method from limma's starting point (Smyth, 2004, appendix)."""
    from scipy.special import polygamma

    x = 0.5 + 1 / y
    for _ in range(50):
        step = polygamma(1, x) * (1 - polygamma(1, x) / y) / polygamma(2, x)
        x += step
        if -step / x < 1e-8:
            break
    return float(x)


def _upper_tail(s2: float, d: float, prior: Prior) -> float:
    """P(a row with this prior shows a variance at least s2 on d df): s2 / s0^2 ~ F(d, d0)."""
    from scipy import stats

    ratio = s2 / prior.var if prior.var > 0 else math.inf
    if math.isinf(prior.df):
        return float(stats.chi2.sf(ratio * d, d))
    return float(stats.f.sf(ratio, d, prior.df))


def moderate(rows: Sequence[Sequence[float]], *, robust: bool = True) -> tuple[list[Moderated], Prior | None]:
    """Each row's moderated seed variance from its seeds' scores, and the prior they share (None: no row has two
    seeds). Rows with one seed get the prior's variance; with no prior they get none (var NaN, df 0)."""
    values = [[v for v in row if math.isfinite(v)] for row in rows]
    own = [(float(np.var(v, ddof=1)), len(v) - 1) if len(v) >= 2 else (None, 0) for v in values]
    fitted = [i for i, (s2, d) in enumerate(own) if d > 0]
    not_outlier = {i: 1.0 for i in fitted}
    prior = fit_prior([own[i][0] for i in fitted], [own[i][1] for i in fitted])
    if robust and prior is not None and len(fitted) >= 4:
        not_outlier, prior = _robust(own, fitted, prior)
    out = []
    for i, (s2, d) in enumerate(own):
        if prior is None:
            out.append(Moderated(var=math.nan, df=0, own_var=s2, own_df=d, not_outlier=1.0))
            continue
        w = not_outlier.get(i, 1.0)
        d0 = prior.df * w if w > 0 else 0.0  # an outlier's prior counts for less, down to none
        if d == 0:
            var, df = prior.var, prior.df
        elif math.isinf(d0):
            var, df = prior.var, math.inf
        else:
            var, df = (d0 * prior.var + d * s2) / (d0 + d), d0 + d
        out.append(Moderated(var=float(var), df=float(df), own_var=s2, own_df=d, not_outlier=w))
    return out, prior


def _robust(own, fitted: list[int], prior: Prior) -> tuple[dict[int, float], Prior]:
    """Phipson et al. (2016), simplified (see the module docstring): each row's upper tail p-value under the prior
    fitted without it, its probability of not being an outlier, and the prior refitted without the outliers."""
    from reports.stats import holm

    tails = {}
    for i in fitted:
        others = [j for j in fitted if j != i]
        loo = fit_prior([own[j][0] for j in others], [own[j][1] for j in others]) or prior
        tails[i] = _upper_tail(own[i][0], own[i][1], loo)
    g = len(fitted)
    ranks = {i: r for r, i in enumerate(sorted(fitted, key=lambda i: own[i][0] / _unit(own[i][1])), start=1)}
    not_outlier = {i: min(1.0, tails[i] / ((g - ranks[i] + 0.5) / g)) for i in fitted}
    adjusted = dict(zip(fitted, holm([tails[i] for i in fitted]), strict=True))
    inliers = [i for i in fitted if (adjusted[i] or 1.0) >= OUTLIER_ALPHA]
    for i in fitted:
        if i not in inliers:
            not_outlier[i] = 0.0
    refit = fit_prior([own[i][0] for i in inliers], [own[i][1] for i in inliers]) if inliers else None
    return not_outlier, refit or prior


def _unit(d: int) -> float:
    """Scale so rows with different df rank by how extreme their variance is (the chi2 median over df)."""
    from scipy import stats

    return float(stats.chi2.median(d) / d)


__all__ = ["OUTLIER_ALPHA", "Moderated", "Prior", "fit_prior", "moderate"]
