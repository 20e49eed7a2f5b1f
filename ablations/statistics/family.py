"""One error guarantee per study: every claimed comparison, whatever its metric, reference or kind, in one family.

A comparison decides one of two ways, reproduced or contradicted, and is wrong only when its confidence interval at
the level it was decided misses the true difference. So each comparison gets, at each budget, two p-values (`Sides`):
the smallest level at which its two-sided interval decides it each way.

- A difference (`higher`, `lower`): twice the one-sided p of a difference in the expected direction (reproduced) and
  of one in the other (contradicted); their smaller one is the usual two-sided p.
- An equivalence (`same`, margin m): reproduced by the two one-sided tests (TOST, Schuirmann 1987) that the difference
  is above -m and below m, p = 2 max(p_lower, p_upper) (the interval at 1 - p lies inside +-m); contradicted by the
  one-sided test that it lies beyond a margin, p = 2 min(...) (the interval lies wholly outside).
- A non-inferiority (`no_worse`, margin m): reproduced when the interval's worse end is above -m, contradicted when its
  better end is at -m or below (one-sided tests against -m, each doubled).

Doubling keeps every decision on the 95% interval the report prints, and keeps a comparison whose truth sits on a
margin (where both decisions are wrong) within its level.

A comparison that must hold at every budget (T and T/2) is an intersection-union test (Berger, 1982): it is decided a
way only when every budget decides it that way, so its p that way is the largest of the budgets' and the budgets need
no split of the error (`across_budgets`).

The family is every claimed comparison that can be decided (not excluded: a diverged or untrained row, no seed
noise). `decide` runs Holm's step-down (Holm, 1979) as the graphical procedure of Bretz, Maurer, Brannath and Posch
(2009, "A graphical approach to sequentially rejective multiple test procedures", Stat. Med. 28) with equal weights,
truncated (TRUNCATION): each comparison still undecided is tested at TRUNCATION x alpha over the number still
undecided plus the rest of alpha over the family's size, and a decided one passes its share to the rest. The level a
comparison is tested at is handed in as a function of its share, so the same procedure runs a single test (its
share) and a group-sequential look (the nominal level of its boundary at this look, spending its share: Maurer and
Bretz, 2013, "Multiple testing in group sequential trials using graphical approaches", Stat. Biopharm. Res. 5). What
this guarantees: the probability that any claimed comparison gets a wrong verdict, over every budget and every look,
is at most alpha when every test is valid (strong control); with rows whose seeds vary more than the others', as
simulated over the grid of docs/method/verdicts.md with the shipped rule (`ablations.statistics.simulation`).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, TypeVar

import scipy  # its submodules (special, stats, optimize) load on first use, so --help pays none of them
from ablate.ablations.statistics.claims import Comparison
from ablate.ablations.statistics.significance import ALPHA, RowTest

TRUNCATION = 0.25
"""Holm's procedure truncated (Dmitrienko, Tamhane and Wiens, 2008, "General multistage gatekeeping procedures",
Biometrical J. 50; the truncated Holm of their section 4): a comparison still undecided is tested at
TRUNCATION x alpha / (those undecided) + (1 - TRUNCATION) x alpha / (the family's size), so the first comparison
is tested at alpha over the family as in Holm, and the last at about a quarter of alpha, never alone at alpha. 1 is
Holm's own procedure, 0 Bonferroni's. Why a quarter: the last comparisons left are where a noisy row's interval does
most harm, as Holm would spend the whole error on them; a quarter holds the grid with the outlier screen at 1%
(`ablations.statistics.variance.SCREEN_ALPHA`), whose fewer false finds buy a planted effect its power, where half
needed the screen at 2.5% (docs/method/verdicts.md, "What the verdicts guarantee"). The first comparison's level is
Holm's, so the power to find one effect among nulls does not depend on it; a study of many true effects pays for it
in the later ones."""

Way = Literal["reproduced", "contradicted"]
K = TypeVar("K", bound=Hashable)


@dataclass(frozen=True)
class Sides:
    """A comparison's two p-values: the smallest level at which it is decided reproduced, and contradicted."""

    reproduced: float
    contradicted: float

    @property
    def p(self) -> float:
        """The comparison's p: the smaller of the two (the way the data point)."""
        return min(self.reproduced, self.contradicted)

    @property
    def way(self) -> Way:
        """The way the data point."""
        return "reproduced" if self.reproduced <= self.contradicted else "contradicted"

    def at(self, level: float) -> Way | None:
        """The verdict at `level`: the way decided there, None when neither is."""
        if self.reproduced <= level:
            return "reproduced"
        if self.contradicted <= level:
            return "contradicted"
        return None


def sides(comparison: Comparison, test: RowTest | None, higher_is_better: bool) -> Sides | None:
    """The comparison's two p-values at one budget (see the module docstring); None without an estimated effect and
    standard error. Student's t on the test's degrees of freedom, as its interval (scipy's `stdtr` ufunc: the
    distribution objects cost a millisecond a call, and a simulation makes millions)."""

    if test is None or test.effect is None or not test.se > 0:
        return None
    effect, se, margin, df = test.effect, test.se, comparison.margin or 0.0, test.df

    def sf(x: float) -> float:
        return float(scipy.special.stdtr(df, -x))

    if comparison.expect == "same":
        above, below = sf((effect + margin) / se), sf((margin - effect) / se)  # H0: d <= -m, H0: d >= m
        beyond_up, beyond_down = sf((effect - margin) / se), sf((-margin - effect) / se)
        return Sides(_two(max(above, below)), _two(min(beyond_up, beyond_down)))
    if comparison.expect == "no_worse":
        better = effect if higher_is_better else -effect
        return Sides(_two(sf((better + margin) / se)), _two(sf((-margin - better) / se)))
    up = sf(effect / se)
    down = 1.0 - up
    toward, away = (up, down) if comparison.expect == "higher" else (down, up)
    return Sides(_two(toward), _two(away))


def _two(p: float) -> float:
    return min(1.0, 2.0 * float(p))


def across_budgets(per_budget: Sequence[Sides | None]) -> Sides | None:
    """The intersection-union test over the budgets: each way, the largest of the budgets' p (None when a budget has
    no test)."""
    if not per_budget or any(s is None for s in per_budget):
        return None
    present = [s for s in per_budget if s is not None]
    return Sides(max(s.reproduced for s in present), max(s.contradicted for s in present))


@dataclass(frozen=True)
class Tested:
    """One comparison in the family: the level it was last tested at, and the way it was decided (None: undecided)."""

    level: float
    way: Way | None


def decide(
    family: Mapping[K, Sides],
    level: Callable[[K, float], float] | None = None,
    alpha: float = ALPHA,
    decided: Sequence[K] = (),
    size: int | None = None,
) -> dict[K, Tested]:
    """Holm's procedure as a graph with equal weights over `family` (key -> its two p-values at this look): each
    comparison not yet decided is tested at `level(key, share)`, its share being alpha over the comparisons still
    undecided (the single-look default: the share itself); whatever is decided passes its share on, until nothing more
    is. `decided`: comparisons decided before (at an earlier look), whose shares are passed on already; `size`: the
    family's size where it holds comparisons not tested here (stopped for futility: they keep their share). Returns
    each tested comparison's level and verdict."""
    at = level or (lambda _key, share: share)
    total = size if size is not None else len(family) + len(decided)
    done = len(decided)
    out = {key: Tested(level=0.0, way=None) for key in family}
    while True:
        remaining = total - done
        if remaining <= 0:
            return out
        share = TRUNCATION * alpha / remaining + (1 - TRUNCATION) * alpha / total
        new = {}
        for key, p in family.items():
            if out[key].way is not None:
                continue
            local = at(key, share)
            new[key] = Tested(level=local, way=p.at(local))
        out.update(new)
        fresh = [key for key, tested in new.items() if tested.way is not None]
        if not fresh:
            return out
        done += len(fresh)


def adjusted(family: Mapping[K, Sides], alpha: float = ALPHA) -> dict[K, float]:
    """Each comparison's adjusted p: the smallest alpha at which `decide` would decide it (the truncated Holm's step
    levels are alpha times a weight, so the step-down adjustment divides by the weights), for the report."""
    order = sorted(family, key=lambda k: family[k].p)
    out: dict[K, float] = {}
    running, m = 0.0, len(order)
    for rank, key in enumerate(order):
        weight = TRUNCATION / (m - rank) + (1 - TRUNCATION) / m
        running = max(running, min(1.0, family[key].p / weight))
        out[key] = running
    return out


__all__ = ["TRUNCATION", "Sides", "Tested", "Way", "across_budgets", "adjusted", "decide", "sides"]
