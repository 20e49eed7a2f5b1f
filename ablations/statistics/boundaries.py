"""Group-sequential boundaries computed with the looks' correlation.

A comparison looked at K times, at information fractions t_1 < ... < t_K, has z statistics Z_k whose joint law
under the null is the canonical one: multivariate normal with corr(Z_i, Z_j) = sqrt(t_i / t_j) (Jennison and
Turnbull, 2000, "Group Sequential Methods with Applications to Clinical Trials", section 3.1). A two-sided boundary
c_1, ..., c_K rejects at the first look where |Z_k| >= c_k. Splitting alpha over the looks by Bonferroni (each look at
its own increment, as if the looks were independent) wastes what the correlation gives: at two looks at t = (2/3, 1)
the last look's z is 2.12 by Bonferroni and 2.01 with the correlation.

`spending_bounds` solves for each c_k so that the probability of first crossing at look k is exactly the error the
Lan-DeMets function of O'Brien-Fleming's shape spends between t_{k-1} and t_k (Lan and DeMets, 1983, "Discrete
sequential boundaries for clinical trials", Biometrika 70): it needs only the fractions the looks actually reached,
so looks need not be planned or equally spaced. `obrien_fleming_bounds` gives the exact O'Brien-Fleming (1979)
boundaries, c_k = C sqrt(K / k), for K equally spaced looks. Both are checked against Jennison and Turnbull's tables
(tests/ablations/statistics/test_boundaries.py).

The probabilities come from the recursive numerical integration of Armitage, McPherson and Rowe (1969) as Jennison and
Turnbull set it out (chapter 19): the score S_k = Z_k sqrt(t_k) has independent normal increments, so the sub-density
of S_k on the continuation region is carried from look to look on a grid (Simpson's rule) and each look's crossing
probability is one integral against it. Deterministic, unlike a Monte Carlo or quasi-Monte Carlo multivariate normal
CDF, so that every worker reading the same trials takes the same decision. Written here rather than taken from a
library: the R packages that do it (gsDesign, ldbounds, rpact) have no maintained Python counterpart.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence

import numpy as np
import scipy  # its submodules (special, stats, optimize) load on first use, so --help pays none of them

GRID = 101
"""Points of the grid each look's sub-density is carried on (odd, for Simpson's rule): 101 gives the boundaries of
401 to 1e-7 in z, and Jennison and Turnbull's tables to three decimals (tests/ablations/statistics)."""
_LARGEST = 12.0
"""A boundary never needs to be above this z (its one-sided tail is 2e-33)."""


def obf_spending(t: float, alpha: float) -> float:
    """The error spent by information fraction t: Lan-DeMets, O'Brien-Fleming shape, two-sided,
    2 - 2 Phi(z_{1-alpha/2} / sqrt(t)) for 0 < t <= 1 (t above 1 as 1), 0 for t <= 0."""

    if t <= 0:
        return 0.0
    z = float(scipy.special.ndtri(1 - alpha / 2))
    return float(2 - 2 * scipy.special.ndtr(z / math.sqrt(min(t, 1.0))))


def nominal_level(c: float) -> float:
    """The two-sided nominal significance level of a z boundary, 2 (1 - Phi(c)); 0 for an infinite one."""

    return 0.0 if math.isinf(c) else float(2 * scipy.special.ndtr(-c))


def spending_bounds(fractions: Sequence[float], alpha: float) -> tuple[float, ...]:
    """Two-sided z boundaries for looks at information `fractions` (increasing; the last may be below 1), each
    spending what the O'Brien-Fleming-shaped Lan-DeMets function adds since the previous look. A fraction above 1 is
    taken as 1; one not above the previous (no information gained) gets an infinite boundary: it spends nothing.
    The fractions are rounded to 1e-4 (the boundaries move by less than that), so that the few boundaries a design
    meets are computed once."""
    key = tuple(round(min(float(t), 1.0), 4) for t in fractions)  # to 1e-4: boundaries move by less than 1e-4
    return _spending_bounds(key, round(float(alpha), 12))


@functools.lru_cache(maxsize=65536)
def _spending_bounds(fractions: tuple[float, ...], alpha: float) -> tuple[float, ...]:
    state: _State | None = None
    previous, spent = 0.0, 0.0
    out = []
    for t in fractions:
        if t <= previous:
            out.append(math.inf)
            continue
        target = obf_spending(t, alpha) - spent
        c = _solve(lambda c, s=state, p=previous, t=t: _crossing(s, p, t, c, 0.0), target)
        out.append(c)
        state, previous, spent = _carry(state, previous, t, c, 0.0), t, obf_spending(t, alpha)
    return tuple(out)


def obrien_fleming_bounds(k: int, alpha: float) -> tuple[float, ...]:
    """The exact O'Brien-Fleming boundaries for `k` equally spaced looks: c_j = C sqrt(k / j), C such that the
    two-sided error over all k looks is `alpha`."""
    fractions = [j / k for j in range(1, k + 1)]

    def shape(constant: float) -> list[float]:
        return [constant * math.sqrt(k / j) for j in range(1, k + 1)]

    constant = _solve(lambda c: crossing_probability(fractions, shape(c)), alpha)
    return tuple(shape(constant))


def crossing_probability(fractions: Sequence[float], bounds: Sequence[float], drift: float = 0.0) -> float:
    """The probability of crossing any of the two-sided `bounds` at the looks at `fractions`, with standardized drift
    `drift` (E[Z_k] = drift sqrt(t_k); 0: under the null)."""
    state: _State | None = None
    previous, total = 0.0, 0.0
    for t, c in zip(fractions, bounds, strict=True):
        t = min(float(t), 1.0)
        if t <= previous or math.isinf(c):
            continue
        total += _crossing(state, previous, t, c, drift)
        state, previous = _carry(state, previous, t, c, drift), t
    return total


_State = tuple[np.ndarray, np.ndarray]
"""A look's continuation region as a grid of score values and the sub-density there, times Simpson's weights."""


def _simpson(n: int) -> np.ndarray:
    weights = np.ones(n)
    weights[1:-1:2], weights[2:-1:2] = 4.0, 2.0
    return weights / 3.0


def _phi(x: np.ndarray) -> np.ndarray:
    return np.exp(-0.5 * x * x) / math.sqrt(2 * math.pi)


def _crossing(state: _State | None, previous: float, t: float, c: float, drift: float) -> float:
    """The probability of not crossing before and crossing at the look at t with boundary c (two-sided)."""

    b = c * math.sqrt(t)
    if state is None:
        sd, mean = math.sqrt(t), drift * t
        return float(scipy.special.ndtr((mean - b) / sd) + scipy.special.ndtr((-b - mean) / sd))
    grid, weighted = state
    step = t - previous
    sd, shift = math.sqrt(step), drift * step
    beyond = scipy.special.ndtr((grid + shift - b) / sd) + scipy.special.ndtr((-b - grid - shift) / sd)
    return float(weighted @ beyond)


def _carry(state: _State | None, previous: float, t: float, c: float, drift: float) -> _State:
    """The sub-density of the score at the look at t on its continuation region (-c sqrt t, c sqrt t)."""
    b = min(c, _LARGEST) * math.sqrt(t)
    grid = np.linspace(-b, b, GRID)
    h = 2 * b / (GRID - 1)
    if state is None:
        sd = math.sqrt(t)
        density = _phi((grid - drift * t) / sd) / sd
    else:
        before, weighted = state
        step = t - previous
        sd = math.sqrt(step)
        density = (_phi((grid[:, None] - before[None, :] - drift * step) / sd) / sd) @ weighted
    return grid, density * _simpson(GRID) * h


def _solve(probability: Callable[[float], float], target: float) -> float:
    """The boundary c whose crossing probability is `target` (the probability falls as c rises)."""

    if target <= 0:
        return math.inf
    low, high = 1e-6, _LARGEST
    if probability(low) <= target:
        return low
    root = scipy.optimize.brentq(lambda c: probability(c) - target, low, high, xtol=1e-10, full_output=False)
    return float(root)  # pyright: ignore[reportArgumentType]


__all__ = [
    "GRID",
    "crossing_probability",
    "nominal_level",
    "obf_spending",
    "obrien_fleming_bounds",
    "spending_bounds",
]
