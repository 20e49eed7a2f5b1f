"""The sequential design: seeds only where a comparison is still open, with the family-wise error kept under looks.

The sequential design starts every row at `min_seeds`, looks, and gives one more seed only to a row with an **open**
comparison: one not yet decided, and whose conditional power (below) says more seeds up to `max_seeds` could decide
it. A comparison is **decided** when every budget decides it the same way (reproduced or contradicted), and **out of
reach** when its conditional power is below FUTILITY, no budget can give it a verdict, or its row is at `max_seeds`.
Controls (the base) keep Dunnett's sqrt(k) share of the open rows' seeds.

How the looks keep the error (`ErrorControl`): the study's claimed comparisons are one family
(`ablations.statistics.family`), tested by Holm's procedure as a graph (Maurer and Bretz, 2013): at each look, each
comparison still undecided is tested at the nominal level of its own group-sequential boundary, which spends its
Holm share (alpha over the comparisons still undecided) by the Lan-DeMets function of O'Brien-Fleming's shape over
the information fractions its looks actually reached (`ablations.statistics.boundaries`, computed with the looks'
correlation). A decided comparison passes its share on to the rest, at this look and after. A comparison is decided
only when every budget decides it the same way (intersection-union: no split over budgets). `confseq` tests each at
the pointwise level of a normal-mixture confidence sequence for its share instead (Howard et al., 2021).

A comparison stops for futility (out of reach) when its conditional power is below FUTILITY: the chance, given the
seeds seen so far, that the design's last look decides it, were the true difference the smallest the study sets out
to see (the one the full design finds four times in five). The futility stop is non-binding: the error is spent as if
it never stopped a row, so a row given more seeds anyway is tested as before.

Functions of numbers only: `walk` takes the looks over a study's seeds, judging each look with the callable it is
handed (the results store's `ablations.results.evidence.looks` gathers that evidence from a study folder); no file is
read here. The sweep, `ablate status`, the report and `ablate replay` all call these.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

import scipy  # its submodules (special, stats, optimize) load on first use, so --help pays none of them
from ablate.ablations.statistics.boundaries import nominal_level, spending_bounds
from ablate.ablations.statistics.family import Sides, decide
from ablate.ablations.statistics.significance import ALPHA, POWER, RowTest
from ablate.ablations.statistics.verdicts import ClaimVerdict, ComparisonVerdict

State = Literal["decided", "open", "out_of_reach", "no_verdict", "failed"]
"""Where a row stands after a look: every comparison decided, one still open (it gets a seed), none open and one
that more seeds up to max_seeds would not settle, none because the study gives no verdict at all (a pipeline check,
a base that learnt nothing: `ComparisonVerdict.withheld`), or stopped because its trials failed (`failed_rows`)."""
STATES: tuple[State, ...] = ("decided", "open", "out_of_reach", "no_verdict", "failed")
FAILED: State = "failed"
NO_VERDICT: State = "no_verdict"
WITHHELD = "the study gives none"
"""Why a row of a study that gives no verdict at all stopped (`NO_VERDICT`); the report's first line says why."""


ErrorControl = Literal["spending", "confseq"]
"""How the looks keep the error: alpha spending (`look_level`) or a confidence sequence (`confseq_level`). (Whether
a study is sequential at all, or fixed, is its *design*: study.json's `allocation`.)"""


def dunnett(k: int, n: int) -> int:
    """The seeds of a control compared with k rows that have n seeds each: round(sqrt(k) n), the allocation that
    minimises the variance of k comparisons with one control for a fixed number of trials (Dunnett, 1955, "A
    multiple comparison procedure for comparing several treatments with a control", JASA 50); k at least 1."""
    return round(math.sqrt(max(k, 1)) * n)


def policy(
    seeds: Mapping[str, int],
    states: Mapping[str, State],
    controls: Mapping[str, Sequence[str]],
    *,
    min_seeds: int,
    max_seeds: int,
) -> dict[str, int]:
    """The seeds each row should have after this look: `min_seeds` for a row not yet there, one more for an open row
    below `max_seeds`, its seeds for the others; a row that no control is compared with (where some are: a row no
    claim tests, `controls_of`) one seed, a cell of the table like the paper's own single runs. A control (the
    base) starts at Dunnett's round(sqrt(k) min_seeds), k the rows compared with it that this sweep runs, and then
    keeps round(sqrt(k_open) n) for the k_open rows still open at n seeds: the comparisons still being tested are the
    ones its extra seeds serve (n from the tested rows: a compared row that is a control itself counts in k only). It
    never loses seeds."""
    tested = {r for compared in controls.values() for r in compared}
    target = {}
    for row, n in seeds.items():
        if row in controls:
            continue
        if tested and row not in tested:  # in the table to be read, as the paper's single runs: no test to feed
            target[row] = max(n, 1)
            continue
        grow = states.get(row) == "open" and min_seeds <= n < max_seeds
        target[row] = max(n, min_seeds) + (1 if grow else 0)
    for control, compared in controls.items():
        ran = [r for r in compared if r in seeds]
        still = [r for r in ran if states.get(r, "open") == "open"]
        # A compared row that is a control itself (modern's base, tested against E1 for the RoPE claim) counts among
        # the k comparisons, but its seeds are its own share, not what a tested row has: they must not set n.
        n = max((target[r] for r in still if r not in controls), default=0)
        if still and not n:  # only other controls still open: the seed an open row would get
            n = min(max(seeds.get(control, 0), min_seeds) + 1, max_seeds)
        share = dunnett(len(still), n)
        start = dunnett(len(ran), min_seeds)
        target[control] = max(seeds.get(control, 0), start, share)
    return target


def controls_of(
    comparisons: Iterable[tuple[str, str | None]], base: str | None, rows: Sequence[str]
) -> dict[str, list[str]]:
    """Control row -> the rows of `rows` tested against it, from the claims' comparisons as (row, against) pairs:
    each names its reference row, the base where `against` is None. Without comparisons, the base with every other
    row. Only controls among `rows`, the base first. What a sweep (`Plan.controls`, kept in study.json) and `ablate
    replay` use: the control's sqrt(k) share serves the k comparisons made against it."""
    pairs = list(comparisons)
    ran_base = base if base in rows else None
    if not pairs:
        return {ran_base: [r for r in rows if r != ran_base]} if ran_base is not None else {}
    tested: dict[str, set[str]] = {ran_base: set()} if ran_base is not None else {}
    for row, against in pairs:
        control = against or base
        if control is not None:
            tested.setdefault(control, set()).add(row)
    return {c: [r for r in rows if r in compared] for c, compared in tested.items() if c in rows}


def first_look(
    rows: Iterable[str], controls: Mapping[str, Sequence[str]], *, min_seeds: int, max_seeds: int
) -> dict[str, int]:
    """The seeds each row has at the first look: what a sequential study asks for before any trial finished (a row
    no claim tests at one seed, each control at its sqrt(k) share)."""
    return policy(dict.fromkeys(rows, 0), {}, controls, min_seeds=min_seeds, max_seeds=max_seeds)


def seed_range(
    rows: Iterable[str], controls: Mapping[str, Sequence[str]], *, min_seeds: int, max_seeds: int
) -> tuple[dict[str, int], dict[str, int]]:
    """The seeds each row has at the two ends of a sequential study: every row settled at the first look, or every
    row open until `max_seeds` (the policy asked again until it asks for nothing more)."""
    rows = list(rows)
    first = first_look(rows, controls, min_seeds=min_seeds, max_seeds=max_seeds)
    every_open: dict[str, State] = dict.fromkeys(rows, "open")
    last = first
    while (after := policy(last, every_open, controls, min_seeds=min_seeds, max_seeds=max_seeds)) != last:
        last = after
    return first, last


def rows_of(controls: Mapping[str, Sequence[str]]) -> list[str]:
    """The rows a sequential study's looks judge: its controls, then the rows tested against them."""
    return list(dict.fromkeys([*controls, *(r for compared in controls.values() for r in compared)]))


def confseq_level(seeds: int, max_seeds: int, alpha: float = ALPHA) -> float:
    """The pointwise level of a two-sided normal-mixture confidence sequence at `seeds` seeds (Howard et al., 2021,
    eq. (14), mixing variance tuned to max_seeds): valid at every n at once, so no spending."""

    rho = float(max_seeds)
    z = math.sqrt((seeds + rho) / seeds * math.log((seeds + rho) / (rho * alpha**2)))
    return float(2 * scipy.stats.norm.sf(z))


DECIDING_SEEDS = 3
"""The fewest seeds a row is decided on. Two seeds give its own spread one degree of freedom: a row of ten times the
others' variance then looks ordinary often enough (its mean is independent of its spread), borrows the pooled
variance, and breaks the study's error guarantee (simulated:
docs/method/verdicts.md, "What the verdicts guarantee"). The look at two seeds stops rows for futility only."""

UNSETTLED_ALPHA = 0.25
"""A row whose seeds spread above the other rows' at this level (its screen over every budget,
`ablations.statistics.variance.screen`) is not decided before its last seed: it gets one more first. A row of three
times the others' variance looks ordinary at three seeds about half the time, and would then be decided on an
interval too narrow for it; at its last seed the screen decides (SCREEN_ALPHA), and a row it finds is decided on its
own variance (docs/method/verdicts.md, "What the verdicts guarantee", gives what it costs)."""

FUTILITY = 0.03
"""A comparison is out of reach when its conditional power under the smallest effect the study sets out to see is
below this (`conditional_power`)."""


@dataclass(frozen=True)
class Decision:
    """What a sequential sweep runs now, from the looks over its finished trials (`decide`)."""

    seeds: dict[str, list[int]]
    """Row -> the seeds it should have now: the finished ones the looks read and the ones the next look waits on."""
    states: dict[str, State] = field(default_factory=dict)
    """Row -> where it stood at its last look (rows not looked at yet are missing)."""
    why: dict[str, str] = field(default_factory=dict)
    """Row -> why it stopped or goes on, in words."""
    looks: int = 0
    """Looks taken so far."""
    finished: bool = False
    """No row is open: nothing beyond `seeds` will be asked for."""
    controls: tuple[str, ...] = ()
    """The control rows (the base): they keep their share of the open rows' seeds and are not judged themselves."""


@dataclass(frozen=True)
class Sequential:
    """A study's sequential allocation as a sweep runs it (`Study.allocation`), and as study.json keeps it."""

    min_seeds: int
    max_seeds: int
    error: ErrorControl = "spending"

    def most_seeds(self, compared: int) -> int:
        """The most seeds a control of `compared` rows can be asked for (its sqrt(k) share of max_seeds)."""
        return max(self.max_seeds, dunnett(compared, self.max_seeds))

    def to_json(self, controls: Mapping[str, Sequence[str]]) -> dict[str, Any]:
        """study.json's `allocation`: reports, status and replay take the looks again from it and the records."""
        return {
            "design": "sequential",
            "min_seeds": self.min_seeds,
            "max_seeds": self.max_seeds,
            "error": self.error,
            "controls": dict(controls),
        }

    @classmethod
    def from_json(cls, allocation: Mapping[str, Any] | None) -> tuple[Sequential, dict[str, list[str]]] | None:
        """study.json's `allocation` (`to_json`): the design and its controls; None for a fixed design."""
        if allocation is None or allocation.get("design") != "sequential":
            return None
        controls = {c: list(rows) for c, rows in (allocation.get("controls") or {}).items()}
        made = cls(int(allocation["min_seeds"]), int(allocation["max_seeds"]), allocation.get("error", "spending"))
        return made, controls


@dataclass(frozen=True, kw_only=True)
class RowLook:
    """One row at one look."""

    row: str
    """The row's name."""
    seeds: int
    """Its complete seeds at this look."""
    state: State
    """decided, open (gets one more seed), out of reach (stops undecided) or no verdict (the study gives none)."""
    why: str = ""
    """Why it stopped or goes on, for the report's method note."""
    verdicts: dict[str, str] = field(default_factory=dict)
    """'row/metric/expect/against' -> each comparison's verdict at this look's level ('inconclusive' when a budget
    gives none, or the budgets disagree)."""


def comparison_key(comparison) -> str:
    """'row/metric/expect/against': one comparison of a claim."""
    return f"{comparison.row}/{comparison.metric}/{comparison.expect}/{comparison.against or ''}"


# --- the looks over a study's records ------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class Look:
    """One look of the sequential design."""

    seeds: dict[str, int]
    """Row -> its seeds at this look."""
    levels: dict[str, float]
    """'row/metric/expect/against' -> the nominal level the comparison was tested at, at this look: its boundary for
    its share of the error (`boundary_level`)."""
    rows: dict[str, RowLook]
    """Row -> where it stands after this look (rows no claim names are settled at min_seeds)."""

    @property
    def level(self) -> float:
        """The largest nominal level a comparison was tested at in this look (0 when none was)."""
        return max(self.levels.values(), default=0.0)


@dataclass(frozen=True, kw_only=True)
class Walk:
    """The looks the design has taken over a study's finished trials, and what it asks for next."""

    looks: tuple[Look, ...]
    seeds: dict[str, int]
    """Row -> the seeds its last look read."""
    target: dict[str, int]
    """Row -> the seeds the policy asks for now: `seeds` where the design is finished, more where a look waits for
    trials not yet run."""
    finished: bool
    """True when no row is open: the policy asks for nothing more."""

    def stopped(self) -> dict[str, RowLook]:
        """Each row as it stood at the look where it stopped (decided or out of reach), or at the last look."""
        out: dict[str, RowLook] = {}
        for look in self.looks:
            for row, state in look.rows.items():
                if out.get(row) is None or out[row].state == "open":
                    out[row] = state
        return out


def information(test: RowTest, n_row: int, n_against: int) -> float | None:
    """The test's information (1 / SE^2) were its row and reference at these seeds: the seed part from the seed
    variances the test used, the sentence part as it is (more seeds do not shrink it). None without seed variances."""
    if test.seed_vars is None:
        return None
    row_var, ref_var = test.seed_vars
    var = row_var / max(n_row, 1) + ref_var / max(n_against, 1) + (test.se_sentences or 0.0) ** 2
    return 1.0 / var if var > 0 else None


def fractions(test: RowTest, history: Sequence[tuple[int, int]], most: tuple[int, int]) -> tuple[float, ...] | None:
    """The information fractions of a comparison's looks: at each look's seeds (`history`, the row's and the
    reference's) over the information at the most seeds the design can give them (`most`), all from this look's
    variances (Jennison and Turnbull, 2000, section 7.2: the spending recomputed as the information is learnt)."""
    full = information(test, *most)
    if full is None:
        return None
    return tuple(min(1.0, (information(test, r, c) or 0.0) / full) for r, c in history)


def boundary_level(error: ErrorControl, at: Sequence[float], share: float, seeds: int, max_seeds: int) -> float:
    """The nominal two-sided level a comparison is tested at, at the last of its looks (information fractions
    `at`), for its share of the error: its group-sequential boundary (`spending`), or a confidence sequence's
    pointwise level at its seeds (`confseq`)."""
    if error == "confseq":
        return confseq_level(max(seeds, 1), max_seeds, share)
    return nominal_level(spending_bounds(tuple(at), share)[-1])


def conditional_power(cv: ComparisonVerdict, at: Sequence[float], share: float, most: tuple[int, int]) -> float:
    """The chance that the design's last look decides the comparison (either way), given its seeds so far, were the
    true difference the smallest the study sets out to see: for a difference, the one the full design finds four
    times in five at the comparison's level (each way); for `same` and `no_worse`, none (reproduced) or twice the
    margin the wrong way (contradicted). Every budget must decide the same way: each way, the least likely budget."""

    final = spending_bounds((*at, 1.0), share)[-1]
    ways = []
    for budget in cv.budgets:
        test = budget.test
        full = information(test, *most) if test is not None else None
        if test is None or test.effect is None or not test.se > 0 or full is None:
            return 0.0
        now = 1.0 / test.se**2
        if full <= now:  # no information left to gain: the last look is this one
            return 0.0
        ways.append(_ways(cv.comparison, cv.higher_is_better, test.effect, now, full, final))
    if not ways:
        return 0.0
    return max(min(w[0] for w in ways), min(w[1] for w in ways))


def _ways(comparison, higher_is_better: bool, effect: float, now: float, full: float, c: float):
    """(reproduced, contradicted): the chance of each at the last look (information `full`, boundary `c`), the
    difference seen at information `now` being `effect` and the rest drawn at each way's alternative."""

    se = 1 / math.sqrt(full)
    w, sd = now / full, math.sqrt(full - now) / full
    margin = comparison.margin or 0.0

    def above(x: float, delta: float, seen: float) -> float:  # P(final difference >= x) at true difference delta
        return float(scipy.special.ndtr(((w * seen + (1 - w) * delta) - x) / sd))

    def between(lo: float, hi: float, delta: float, seen: float) -> float:
        return max(0.0, above(lo, delta, seen) - above(hi, delta, seen)) if hi > lo else 0.0

    if comparison.expect == "same":
        away = math.copysign(2 * margin, effect)
        outside = above(margin + c * se, away, effect) + 1 - above(-margin - c * se, away, effect)
        return between(-margin + c * se, margin - c * se, 0.0, effect), outside
    if comparison.expect == "no_worse":
        better = effect if higher_is_better else -effect
        return above(-margin + c * se, 0.0, better), 1 - above(-margin - c * se, -2 * margin, better)
    sign = 1.0 if comparison.expect == "higher" else -1.0
    smallest = (c + float(scipy.special.ndtri(POWER))) * se
    toward = sign * effect
    return above(c * se, smallest, toward), 1 - above(-c * se, -smallest, toward)


Judged = Callable[[Mapping[str, tuple[int, ...]]], Sequence[ClaimVerdict]]
"""The evidence a look judges: row -> the seeds it reads (each row's first n) -> the claims' verdicts on those trials
(empty where the study has nothing to judge yet); each comparison's `sides` are what a look tests. The results store
gathers it from a study folder (`ablations.results.evidence.looks`); a simulation hands in its own."""


def walk(
    judged: Judged,
    have: Mapping[str, Sequence[int]],
    controls: Mapping[str, Sequence[str]],
    *,
    min_seeds: int,
    max_seeds: int,
    error: ErrorControl = "spending",
    archive: bool = False,
) -> Walk:
    """Take the design's looks over a study's finished seeds: `have` is each row's finished seeds in the order the
    design uses them (seed order, failed seeds left out), `controls` the control rows and the rows compared with
    each, `judged` the claims' verdicts on any choice of those seeds. Look after look, the policy (`policy`) asks for
    seeds; while every row has them, the look tests each comparison still undecided whose row is open, as the module
    docstring says.

    Live (`archive=False`) the walk stops at the first look whose seeds are not all finished, and `target` says
    which: the trials a sweep queues next. A function of the finished trials alone (when `judged` is: the
    bootstrap's resamples are fixed), so every worker that reads the same trials takes the same decisions, and a look
    lost to a kill is taken again, the same, by the next reader. Over an archive (`ablate replay`) a row whose seeds
    run out stops there."""
    rows = list(have)
    most = seed_range(rows, controls, min_seeds=min_seeds, max_seeds=max_seeds)[1]
    seeds: dict[str, int] = dict.fromkeys(rows, 0)
    states: dict[str, State] = {}
    looks: list[Look] = []
    history: dict[str, list[tuple[int, int]]] = {}
    decided: dict[str, str] = {}
    levels: dict[str, float] = {}
    while True:
        target = policy(seeds, states, controls, min_seeds=min_seeds, max_seeds=max_seeds)
        if archive:
            target = {r: min(n, len(have[r])) for r, n in target.items()}
        if target == seeds:
            return Walk(looks=tuple(looks), seeds=seeds, target=target, finished=True)
        if any(n > len(have[r]) for r, n in target.items()):
            return Walk(looks=tuple(looks), seeds=seeds, target=target, finished=False)
        seeds = target
        chosen = {r: tuple(list(have.get(r, []))[:n]) for r, n in seeds.items()}
        verdicts = {comparison_key(cv.comparison): cv for claim in judged(chosen) for cv in claim.comparisons}
        withheld = any(cv.withheld for cv in verdicts.values())  # the study gives no verdict: no row decides
        looked = {k: cv for k, cv in verdicts.items() if states.get(cv.comparison.row, "open") == "open"
                  and cv.comparison.row in seeds}  # fmt: skip
        family, at, reach = _tested_now(looked, decided, history, most, controls, max_seeds)
        size = len({k for k, cv in verdicts.items() if cv.sides is not None} | set(decided) | set(history))
        rows_of_key = {k: seeds.get(verdicts[k].comparison.row, 0) for k in family}
        level = functools.partial(_level_of, error, at, rows_of_key, max_seeds)
        tested = decide(family, level, decided=list(decided), size=size)
        decided.update({k: t.way for k, t in tested.items() if t.way is not None})
        levels.update({k: t.level for k, t in tested.items() if t.way is not None})
        share = ALPHA / max(size - len(decided), 1)
        found = _row_looks(looked, decided, levels, at, reach, share, seeds, max_seeds)
        for r in rows:
            if r in controls and r not in found or states.get(r, "open") != "open":
                if looks and r in looks[-1].rows:  # stopped at an earlier look: as it stood then
                    found[r] = looks[-1].rows[r]
                continue
            found[r] = _row_now(found.get(r), r, seeds[r], archive and seeds[r] >= len(have[r]), withheld)
            states[r] = found[r].state
        looks.append(Look(seeds=dict(seeds), levels={k: t.level for k, t in tested.items()}, rows=found))


def _tested_now(
    looked: Mapping[str, ComparisonVerdict],
    decided: Mapping[str, str],
    history: dict[str, list[tuple[int, int]]],
    most: Mapping[str, int],
    controls: Mapping[str, Sequence[str]],
    max_seeds: int,
) -> tuple[dict[str, Sides], dict[str, tuple[float, ...]], dict[str, tuple[int, int]]]:
    """What a look tests: each undecided comparison's information fractions (`at`) and the most seeds its row and
    reference can reach (`reach`); once its row has DECIDING_SEEDS and is settled or at its last seed
    (`UNSETTLED_ALPHA`), its two p-values (`family`), and its `history`
    gains the look (a look it is not tested at spends nothing)."""
    family, at, reach = {}, {}, {}
    for key, cv in looked.items():
        test = cv.test
        if key in decided or cv.sides is None or test is None:
            continue
        reach[key] = (most.get(test.row, max_seeds), most.get(test.against, max_seeds))
        looks_of = [*history.get(key, []), (test.n_row, test.n_against)]
        if (found := fractions(test, looks_of, reach[key])) is None:
            continue
        last = test.n_row >= (most.get(test.row, max_seeds) if test.row in controls else max_seeds)
        if last:
            found = (*found[:-1], 1.0)  # its last look, whatever it reached: the rest of its share is spent
        at[key] = found
        # A control (the base) is read on more seeds than any row, and gets them as its rows do: it never waits.
        unsettled = test.row not in controls and test.spread is not None and test.spread.p < UNSETTLED_ALPHA
        if test.n_row >= min(DECIDING_SEEDS, max_seeds) and (last or not unsettled):
            history[key], family[key] = looks_of, cv.sides
    return family, at, reach


def _row_now(look: RowLook | None, row: str, seeds: int, run_out: bool, withheld: bool) -> RowLook:
    """A row still open before this look, after it: a row no claim names is decided (in a study that gives no
    verdict at all, `withheld`, it has none, as every row), and over an archive a row whose seeds `run_out` cannot
    stay open."""
    if look is None:
        state, why = (NO_VERDICT, WITHHELD) if withheld else ("decided", "no claim names it")
        look = RowLook(row=row, seeds=seeds, state=state, why=why)
    if run_out and look.state == "open":
        return replace(look, state="out_of_reach", why="the archive has no more seeds of it")
    return look


def _level_of(
    error: ErrorControl, at: Mapping[str, tuple[float, ...]], seeds: Mapping[str, int], max_seeds: int, key: str,
    share: float,
) -> float:  # fmt: skip
    """The level `decide` tests a comparison at, at this look, for its share (`boundary_level`)."""
    return boundary_level(error, at[key], share, seeds[key], max_seeds)


def _row_looks(
    looked: Mapping[str, ComparisonVerdict],
    decided: Mapping[str, str],
    levels: Mapping[str, float],
    at: Mapping[str, tuple[float, ...]],
    reach: Mapping[str, tuple[int, int]],
    share: float,
    seeds: Mapping[str, int],
    max_seeds: int,
) -> dict[str, RowLook]:
    """Each row a looked-at comparison names, after the look: open if any of its comparisons is (and it is below
    `max_seeds`), else out of reach if any is, else decided."""
    found: dict[str, list[tuple[str, State, str, str]]] = {}
    for key, cv in looked.items():
        row, n = cv.comparison.row, seeds.get(cv.comparison.row, 0)
        excluded = [w for b in cv.budgets for w in b.excluded]
        if key in decided:
            state, why, verdict = "decided", f"{decided[key]} at level {levels[key]:.4f}", decided[key]
        elif cv.withheld:  # a study that judges nothing (a smoke run, a base that learnt nothing)
            state, why, verdict = NO_VERDICT, WITHHELD, "inconclusive"
        elif cv.sides is None and excluded:  # a diverged or untrainable row
            state, why, verdict = (
                "out_of_reach",
                f"no verdict whatever its seeds: {'; '.join(excluded)}",
                "inconclusive",
            )
        elif key not in at or n < 2:
            state, why, verdict = "open", "undecided", "inconclusive"
        else:
            power = conditional_power(cv, at[key], share, reach[key])
            if power < FUTILITY:
                why = f"conditional power {power:.0%} under the smallest effect the study sets out to see"
                state, verdict = "out_of_reach", "inconclusive"
            else:
                state, why, verdict = "open", f"undecided, conditional power {power:.0%}", "inconclusive"
        found.setdefault(row, []).append((key, state, why, verdict))
    out = {}
    for row, comps in found.items():
        n = seeds.get(row, 0)
        kinds = [s for _, s, _, _ in comps]
        state: State = (
            "open" if "open" in kinds else "out_of_reach" if "out_of_reach" in kinds
            else NO_VERDICT if NO_VERDICT in kinds else "decided"
        )  # fmt: skip
        why = next(w for _, s, w, _ in comps if s == state)
        if state == "open" and n >= max_seeds:
            state, why = "out_of_reach", f"still open at max_seeds ({max_seeds})"
        out[row] = RowLook(row=row, seeds=n, state=state, why=why, verdicts={k: v for k, _, _, v in comps})
    return out


def without_failed(
    rows: Sequence[str], controls: Mapping[str, Sequence[str]], dead: Mapping[str, str]
) -> tuple[list[str], dict[str, list[str]], dict[str, str]]:
    """The rows and controls a walk judges once the failed rows (`dead`: row -> why) are out; a row whose every
    control failed is out too (the returned `dead` gains it, with why)."""
    dead = dict(dead)
    for row in rows:
        against = [c for c, compared in controls.items() if row in compared]
        if row not in dead and against and all(c in dead for c in against):
            dead[row] = f"its control {against[0]} failed"
    live = {c: [r for r in compared if r not in dead] for c, compared in controls.items() if c not in dead}
    return [r for r in rows if r not in dead], live, dead


__all__ = [
    "DECIDING_SEEDS",
    "UNSETTLED_ALPHA",
    "FAILED",
    "FUTILITY",
    "NO_VERDICT",
    "STATES",
    "Decision",
    "ErrorControl",
    "Judged",
    "Look",
    "RowLook",
    "Sequential",
    "State",
    "Walk",
    "boundary_level",
    "comparison_key",
    "conditional_power",
    "fractions",
    "information",
    "confseq_level",
    "controls_of",
    "dunnett",
    "first_look",
    "policy",
    "rows_of",
    "seed_range",
    "walk",
    "without_failed",
]
