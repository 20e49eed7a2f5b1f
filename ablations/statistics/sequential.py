"""The sequential design: seeds only where a comparison is still open, with the family-wise error kept under looks.

The sequential design starts every row at `min_seeds`, looks, and gives one more seed only to a row with an **open**
comparison: one not yet decided at the error spent so far, and within reach of `max_seeds` by the power model of
`ablations.statistics.significance.seeds_needed`. A comparison is **decided** when every budget gives it a verdict
(reproduced or contradicted, the same or not: a budget-sensitive one is settled too), and **out of reach** when more
seeds up to `max_seeds` would not settle it (or the row is at `max_seeds`). Controls (the base) keep Dunnett's
sqrt(k) share of the open rows' seeds.

How the looks keep the error (`ErrorControl`): look j, at which the open rows have n_j seeds, tests at level
a_j = A(n_j / max_seeds) - A(n_{j-1} / max_seeds), with A the Lan-DeMets spending function of O'Brien-Fleming's shape
(Lan and DeMets, 1983); Holm over the rows within a look keeps that look's family-wise error at a_j, and the a_j sum
to alpha (the union bound, whatever the looks' correlation). `confseq` tests at the pointwise level of a normal-mixture
confidence sequence instead (Howard et al., 2021). Why spending is the default, and what each was measured to cost
and keep: docs/SCIENCE.md, "The sequential design".

Functions of numbers only: `walk` takes the looks over a study's seeds, judging each look with the callable it is
handed (the results store's `ablations.results.evidence.looks` gathers that evidence from a study folder); no file is
read here. The sweep, `ablate status`, the report and `ablate replay` all call these.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from ablate.ablations.statistics.significance import ALPHA, RowTest, seeds_needed
from ablate.ablations.statistics.verdicts import ClaimVerdict, ComparisonVerdict, comparison_verdict

State = Literal["decided", "open", "out_of_reach", "failed"]
"""Where a row stands after a look: every comparison decided, one still open (it gets a seed), none open and one
that more seeds up to max_seeds would not settle, or stopped because its trials failed (`failed_rows`)."""
STATES: tuple[State, ...] = ("decided", "open", "out_of_reach", "failed")
FAILED: State = "failed"


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


def spent(t: float, alpha: float = ALPHA) -> float:
    """The error spent by information fraction t (0 < t <= 1): Lan-DeMets, O'Brien-Fleming shape."""
    from scipy import stats

    if t <= 0:
        return 0.0
    z = stats.norm.ppf(1 - alpha / 2)
    return float(2 - 2 * stats.norm.cdf(z / math.sqrt(min(t, 1.0))))


def look_level(seeds: int, previous: int, max_seeds: int, alpha: float = ALPHA) -> float:
    """The level of the look at `seeds` seeds a row, the one before at `previous`: what the spending adds between."""
    return spent(seeds / max_seeds, alpha) - spent(previous / max_seeds, alpha)


def confseq_level(seeds: int, max_seeds: int, alpha: float = ALPHA) -> float:
    """The pointwise level of a two-sided normal-mixture confidence sequence at `seeds` seeds (Howard et al., 2021,
    eq. (14), mixing variance tuned to max_seeds): valid at every n at once, so no spending."""
    from scipy import stats

    rho = float(max_seeds)
    z = math.sqrt((seeds + rho) / seeds * math.log((seeds + rho) / (rho * alpha**2)))
    return float(2 * stats.norm.sf(z))


def level(error: ErrorControl, seeds: int, previous: int, max_seeds: int) -> float:
    """The level a look at `seeds` seeds tests at, the one before at `previous`: what `error` spends there."""
    return look_level(seeds, previous, max_seeds) if error == "spending" else confseq_level(seeds, max_seeds)


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
    """decided, open (gets one more seed) or out of reach (stops undecided)."""
    why: str = ""
    """Why it stopped or goes on, for the report's method note."""
    verdicts: dict[str, str] = field(default_factory=dict)
    """'row/metric/expect/against' -> each comparison's verdict at this look's level ('inconclusive' when a budget
    gives none, or the budgets disagree)."""


def at_level(test: RowTest, level: float) -> RowTest:
    """The test read at `level` instead of ALPHA: its interval at 1 - level, its Holm p scaled so that p < ALPHA
    exactly when the original is below `level` (so `ablations.statistics.verdicts.comparison_verdict` judges it at
    `level`)."""
    from scipy import stats

    if test.effect is None or not test.se > 0:
        return test
    t = float(stats.t.ppf(1 - level / 2, test.df))
    p_holm = None if test.p_holm is None else test.p_holm * ALPHA / level
    return replace(test, ci=(test.effect - t * test.se, test.effect + t * test.se), p_holm=p_holm)


def comparison_state(cv: ComparisonVerdict, level: float, max_seeds: int, seeds: int = 2) -> tuple[State, str, str]:
    """A comparison at one look (its verdict at each budget, `cv.budgets`): (state, why, verdict). Decided when every
    budget gives a verdict at `level`, out of reach when a budget's undecided test would need more than `max_seeds`
    (`ablations.statistics.significance.seeds_needed`, at the effect seen; never at one seed of the row, whose effect
    is one draw), else open."""
    comparison, budgets = cv.comparison, cv.budgets
    if any(b.excluded for b in budgets):
        why = "; ".join(w for b in budgets for w in b.excluded)
        return "out_of_reach", f"no verdict whatever its seeds: {why}", "inconclusive"
    verdicts = [
        comparison_verdict(comparison, at_level(b.test, level), cv.higher_is_better) if b.test else "untested"
        for b in budgets
    ]
    if all(v in ("reproduced", "contradicted") for v in verdicts):
        verdict = verdicts[0] if len(set(verdicts)) == 1 else "inconclusive"
        return "decided", "/".join(verdicts) + f" at level {level:.4f}", verdict
    for b, v in zip(budgets, verdicts, strict=True):
        if v in ("reproduced", "contradicted") or b.test is None or b.test.effect is None:
            continue
        target = _distance(comparison, b.test)
        needed = seeds_needed(b.test, target) if target > 0 else None
        if (needed is None or needed > max_seeds) and seeds >= 2:
            return "out_of_reach", f"needs {needed or 'over 50'} seeds (max_seeds {max_seeds})", "inconclusive"
    return "open", "undecided, within reach of max_seeds", "inconclusive"


def comparison_key(comparison) -> str:
    """'row/metric/expect/against': one comparison of a claim."""
    return f"{comparison.row}/{comparison.metric}/{comparison.expect}/{comparison.against or ''}"


def _distance(comparison, test: RowTest) -> float:
    """How far the effect is from where the verdict changes: 0 for a difference, the margin for an equivalence."""
    effect = test.effect or 0.0
    if comparison.expect == "same":
        return abs((comparison.margin or 0.0) - abs(effect))
    if comparison.expect == "no_worse":
        return abs(effect + (comparison.margin or 0.0))
    return abs(effect)


def row_states(
    claims: Sequence[ClaimVerdict], level: float, seeds: Mapping[str, int], max_seeds: int
) -> dict[str, RowLook]:
    """Each row a claim names, from the report's claim verdicts at this look: open if any of its comparisons is
    open (and it is below `max_seeds`), else out of reach if any is, else decided."""
    found: dict[str, list[tuple[str, tuple[State, str, str]]]] = {}
    for claim in claims:
        for cv in claim.comparisons:
            look = comparison_state(cv, level, max_seeds, seeds.get(cv.comparison.row, 0))
            found.setdefault(cv.comparison.row, []).append((comparison_key(cv.comparison), look))
    out = {}
    for row, comps in found.items():
        n = seeds.get(row, 0)
        kinds = [s for _, (s, _, _) in comps]
        state: State = "open" if "open" in kinds else "out_of_reach" if "out_of_reach" in kinds else "decided"
        why = next(w for _, (s, w, _) in comps if s == state)
        if state == "open" and n >= max_seeds:
            state, why = "out_of_reach", f"still open at max_seeds ({max_seeds})"
        verdicts = {key: v for key, (_, _, v) in comps}
        out[row] = RowLook(row=row, seeds=n, state=state, why=why, verdicts=verdicts)
    return out


# --- the looks over a study's records ------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class Look:
    """One look of the sequential design."""

    seeds: dict[str, int]
    """Row -> its seeds at this look."""
    level: float
    """The error this look spends (`look_level`)."""
    rows: dict[str, RowLook]
    """Row -> where it stands after this look (rows no claim names are settled at min_seeds)."""


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


def look_seeds(
    seeds: Mapping[str, int], states: Mapping[str, State], controls: Mapping[str, Sequence[str]], previous: int
) -> int:
    """The seeds a look is at, for the error it spends (`look_level`): the most that a tested row still open has
    (every row where the study has no control); `previous` where none is open. A control that is also tested (the
    modern study's base, against E1 for the RoPE claim) is left out: its Dunnett share is over max_seeds, and would
    spend the whole error at the first look."""
    controlled = {r for compared in controls.values() for r in compared} or set(seeds)
    tested = [r for r in controlled if r not in controls] or list(controlled)
    return max((seeds[r] for r in tested if states.get(r, "open") == "open"), default=previous)


Judged = Callable[[Mapping[str, tuple[int, ...]]], Sequence[ClaimVerdict]]
"""The evidence a look judges: row -> the seeds it reads (each row's first n) -> the claims' verdicts on those trials
at ALPHA (empty where the study has nothing to judge yet). The results store gathers it from a study folder
(`ablations.results.evidence.looks`); a simulation hands in its own."""


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
    seeds; while every row has them, the look tests each open row on its first seeds at the level `error` spends
    there.

    Live (`archive=False`) the walk stops at the first look whose seeds are not all finished, and `target` says
    which: the trials a sweep queues next. A function of the finished trials alone (when `judged` is: the
    bootstrap's resamples are fixed), so every worker that reads the same trials takes the same decisions, and a look
    lost to a kill is taken again, the same, by the next reader. Over an archive (`ablate replay`) a row whose seeds
    run out stops there."""
    rows = list(have)
    seeds: dict[str, int] = dict.fromkeys(rows, 0)
    states: dict[str, State] = {}
    looks: list[Look] = []
    previous = 0
    while True:
        target = policy(seeds, states, controls, min_seeds=min_seeds, max_seeds=max_seeds)
        if archive:
            target = {r: min(n, len(have[r])) for r, n in target.items()}
        if target == seeds:
            return Walk(looks=tuple(looks), seeds=seeds, target=target, finished=True)
        if any(n > len(have[r]) for r, n in target.items()):
            return Walk(looks=tuple(looks), seeds=seeds, target=target, finished=False)
        seeds = target
        controlled = {r for compared in controls.values() for r in compared} or set(rows)
        n = look_seeds(seeds, states, controls, previous)
        at = level(error, n, previous, max_seeds)
        previous = n
        chosen = {r: tuple(list(have.get(r, []))[:n]) for r, n in seeds.items()}
        found = {r: look for r, look in row_states(judged(chosen), at, seeds, max_seeds).items() if r in seeds}
        for r in rows:
            if r in controls and r not in controlled or states.get(r, "open") != "open":
                if looks and r in looks[-1].rows:  # stopped at an earlier look: as it stood then
                    found[r] = looks[-1].rows[r]
                continue
            look = found.get(r, RowLook(row=r, seeds=seeds[r], state="decided", why="no claim names it"))
            if archive and look.state == "open" and seeds[r] >= len(have[r]):
                look = replace(look, state="out_of_reach", why="the archive has no more seeds of it")
            states[r] = look.state
            found[r] = look
        looks.append(Look(seeds=dict(seeds), level=at, rows=found))


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
    "FAILED",
    "STATES",
    "Decision",
    "ErrorControl",
    "Judged",
    "Look",
    "RowLook",
    "Sequential",
    "State",
    "Walk",
    "at_level",
    "comparison_key",
    "comparison_state",
    "confseq_level",
    "controls_of",
    "dunnett",
    "first_look",
    "level",
    "look_level",
    "look_seeds",
    "policy",
    "row_states",
    "rows_of",
    "seed_range",
    "spent",
    "walk",
    "without_failed",
]
