"""Sequential allocation: seeds only where a comparison is still open, with the family-wise error kept under looks.

A fixed design trains every row the same seeds; most of them settle nothing (a 26-BLEU effect is decided at two
seeds, a 0.4-BLEU one not at fifty). The sequential design starts every row at `min_seeds`, looks, and gives one
more seed only to a row with an **open** comparison: one not yet decided at the error rate spent so far, and within
reach of `max_seeds` by the power model of `reports.stats.seeds_needed`. A comparison is **decided** when every
budget gives it a verdict (reproduced or contradicted, the same or not: a budget-sensitive one is settled too), and
**out of reach** when more seeds up to `max_seeds` would not settle it (or the row is at `max_seeds`). Controls (the
base) keep Dunnett's sqrt(k) share of the open rows' seeds.

Error control. A test that looks after every seed and stops when it likes is not a fixed-sample test. Look j, at
which the open rows have n_j seeds, tests at level a_j = A(n_j / max_seeds) - A(n_{j-1} / max_seeds), with A the
Lan-DeMets spending function of O'Brien-Fleming's shape, A(t) = 2 - 2 Phi(z_{1-alpha/2} / sqrt(t)) (Lan and DeMets,
1983). Holm over the rows within a look keeps that look's family-wise error at a_j; the looks' a_j sum to alpha,
so by the union bound the family-wise error over all looks is at most alpha whatever the looks' correlation (no
boundary recursion, which the moderated, Welch-corrected t of `reports.stats` would not fit).

Why spending and not an anytime-valid confidence sequence (Howard et al., 2021; `confseq_level`, the normal-mixture
boundary tuned to max_seeds): measured with `simulate` (1000 replicates, 20 rows against a base, seed SD 1, one
row with tenfold variance; min_seeds 2, max_seeds 6; benchmarks/SCIENCE.md, section 14), both cost the same (52 of
147 trials with no effect, 64 with planted ones), but spending decides 55% of the planted effects and the
confidence sequence 43%: valid at every n at once, it tests at 5e-7 at two seeds. Both
keep the ordinary rows' family-wise error far under 5% (1.3% and 0.2%; the fixed design at 6 seeds 4.4%, at 3
seeds 5.5%) and cover them 96-97%. The price: a row with ten times the study's variance, which two seeds cannot
show (section 9), gets a wrong verdict in 13% of replicates under spending, 4% under the confidence sequence, 14%
under today's fixed design at 3 seeds and 4.5% at 6. On the archived studies (`ablate replay`, min_seeds 2)
spending keeps every verdict of the full design at 69% (Table 3) and 47% (gettext:de) of its core-hours; the
confidence sequence at 77% and 55%, and loses gettext:de's D1.
"""

from __future__ import annotations

import itertools
import math
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Literal

import numpy as np
from ablate.ablations.allocation import Decision, State, policy
from ablate.ablations.record import Layout
from ablate.reports.stats import ALPHA, RowTest, seeds_needed
from ablate.reports.variance import holm, moderate

Design = Literal["spending", "confseq"]
"""How the looks keep the error: alpha spending (`look_level`) or a confidence sequence (`confseq_level`)."""
DESIGNS: dict[str, str] = {
    "spending": "O'Brien-Fleming alpha spending (Lan-DeMets) over the looks, Holm over the rows at each look",
    "confseq": "a normal-mixture confidence sequence (Howard et al., 2021), Holm over the rows at each look",
}


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
    exactly when the original is below `level` (so `reports.claims.comparison_verdict` judges it at `level`)."""
    from scipy import stats

    if test.effect is None or not test.se > 0:
        return test
    t = float(stats.t.ppf(1 - level / 2, test.df))
    p_holm = None if test.p_holm is None else test.p_holm * ALPHA / level
    return replace(test, ci=(test.effect - t * test.se, test.effect + t * test.se), p_holm=p_holm)


def comparison_state(comparison, budgets, level: float, max_seeds: int, seeds: int = 2) -> tuple[State, str, str]:
    """A comparison at one look (`budgets`: its `reports.claims.BudgetVerdict`s): (state, why, verdict). Decided
    when every budget gives a verdict at `level`, out of reach when a budget's undecided test would need more than
    `max_seeds` (`reports.stats.seeds_needed`, at the effect seen; never at one seed of the row, whose effect is
    one draw), else open."""
    from ablate.reports.claims import comparison_verdict

    if any(b.excluded for b in budgets):
        why = "; ".join(w for b in budgets for w in b.excluded)
        return "out_of_reach", f"no verdict whatever its seeds: {why}", "inconclusive"
    verdicts = [comparison_verdict(comparison, at_level(b.test, level)) if b.test else "untested" for b in budgets]
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


def row_states(claims, level: float, seeds: Mapping[str, int], max_seeds: int) -> dict[str, RowLook]:
    """Each row a claim names, from the report's claim verdicts at this look: open if any of its comparisons is
    open (and it is below `max_seeds`), else out of reach if any is, else decided."""
    found: dict[str, list[tuple[str, tuple[State, str, str]]]] = {}
    for claim in claims:
        for cv in claim.comparisons:
            look = comparison_state(cv.comparison, cv.budgets, level, max_seeds, seeds.get(cv.comparison.row, 0))
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


def walk(
    results,
    have: Mapping[str, Sequence[int]],
    controls: Mapping[str, Sequence[str]],
    *,
    min_seeds: int,
    max_seeds: int,
    design: Design = "spending",
    n_samples: int | None = None,
    archive: bool = False,
) -> Walk:
    """Take the design's looks over `results` (`reports.results.StudyResults`): `have` is each row's finished seeds
    in the order the design uses them (seed order, failed seeds left out), `controls` the control rows and the
    rows compared with each. Look after look, the policy (`ablations.allocation.policy`) asks for seeds; while every
    row has them, the look tests each open row on its first seeds at the level the design spends there.

    Live (`archive=False`) the walk stops at the first look whose seeds are not all finished, and `target` says
    which: the trials a sweep queues next. A function of the finished trials alone (the bootstrap's resamples are
    fixed), so every worker that reads the same trials takes the same decisions, and a look lost to a kill is taken
    again, the same, by the next reader. Over an archive (`ablate replay`) a row whose seeds run out stops there."""
    from ablate.reports.stats import N_SAMPLES
    from ablate.reports.table import build_table

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
        level = look_level(n, previous, max_seeds) if design == "spending" else confseq_level(n, max_seeds)
        previous = n
        chosen = tuple(sorted((r, s) for r, n in seeds.items() for s in list(have.get(r, []))[:n]))
        key = (str(getattr(results, "out_dir", "")), chosen, level, max_seeds, n_samples)
        if key not in _LOOKS:  # a finished trial never changes: a worker takes each look's tests once
            table = build_table(_subset(results, have, seeds), n_samples=n_samples or N_SAMPLES)
            _LOOKS[key] = row_states(table.claims, level, seeds, max_seeds)
        found = {r: look for r, look in _LOOKS[key].items() if r in seeds}
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
        looks.append(Look(seeds=dict(seeds), level=level, rows=found))


_LOOKS: dict[tuple, dict[str, RowLook]] = {}
"""The tests of each look taken in this process, by the trials it read: `walk` takes the looks again from the first
after every trial, and only the newest is new."""


def _subset(results, have: Mapping[str, Sequence[int]], seeds: Mapping[str, int]):
    """The study with only each row's first `seeds[row]` finished seeds of `have`."""
    chosen = {(r, s) for r, n in seeds.items() for s in list(have.get(r, []))[:n]}
    return replace(results, status={k: v for k, v in results.status.items() if k in chosen})


def finished_seeds(results, rows: Sequence[str]) -> tuple[dict[str, list[int]], Callable[[str, int], list[int]]]:
    """Each row's seeds as the design uses them: in seed order, failed ones passed over; the finished prefix of
    them (`have`), and `usable(row, n)`, the row's first n seeds that did not fail."""
    finished: dict[str, set[int]] = {r: set() for r in rows}
    failed: dict[str, set[int]] = {r: set() for r in rows}
    for (row, seed), status in results.status.items() if results is not None else ():
        if row in finished and status.record is not None:
            (finished if status.record.state == "complete" else failed)[row].add(seed)

    def usable(row: str, n: int) -> list[int]:
        return list(itertools.islice((s for s in itertools.count() if s not in failed[row]), n))

    have = {r: list(itertools.takewhile(finished[r].__contains__, usable(r, len(finished[r]) + 1))) for r in rows}
    return have, usable


def report_table(results, *, n_samples: int | None = None, claims=None):
    """`reports.table.build_table`, with a sequential study's verdicts and method note (`apply_design`): what
    `ablate report` and the Python API show."""
    from ablate.reports.metrics import score_ahead
    from ablate.reports.stats import N_SAMPLES
    from ablate.reports.table import build_table

    views = [results.at_budget(f) for f in results.fractions]
    score_ahead(
        (record for view in views for spec in view.rows for record in view.records(spec.name)),
        say=lambda line: print(f"{results.out_dir.name}: {line}", file=sys.stderr, flush=True),
    )
    table = build_table(results, n_samples=n_samples or N_SAMPLES, claims=claims)
    if (results.meta.get("allocation") or {}).get("design") == "sequential" and table.claims:
        if claims is None:
            apply_design(table, results, n_samples)
        else:  # the design's looks tested the study's own claims, not these
            table.notes.append(
                "the study ran at the sequential design for its own claims; these claims are tested as a fixed "
                "design on the seeds it ran (no error control over its looks)"
            )
    return table


def apply_design(table, results, n_samples: int | None = None) -> None:
    """A report of a study run at the sequential design (study.json's `allocation`): each comparison's verdict is
    the one its row stopped with (decided at the level its look spent, or out of reach: inconclusive), not a
    fixed-sample test of the seeds it ended with; the method note gives the looks and why each row stopped."""
    from ablate.reports.claims import claim_verdict

    meta = results.meta.get("allocation") or {}
    controls = {c: list(rows) for c, rows in (meta.get("controls") or {}).items()}
    rows = list(dict.fromkeys([*controls, *(r for compared in controls.values() for r in compared)]))
    have, _ = finished_seeds(results, rows)
    design: Design = meta.get("error", "spending")
    max_seeds = int(meta["max_seeds"])
    walked = walk(results, have, controls, min_seeds=int(meta["min_seeds"]), max_seeds=max_seeds, design=design,
                  n_samples=n_samples)  # fmt: skip
    stopped = walked.stopped()
    for i, claim in enumerate(table.claims):
        comparisons = []
        for cv in claim.comparisons:
            row = stopped.get(cv.comparison.row)
            if cv.verdict == "untested" or cv.comparison.row not in have:
                comparisons.append(cv)
                continue
            if row is None or row.state == "open":
                verdict, reason = "inconclusive", "open: the sequential design asks for more seeds (sweep again)"
            else:
                verdict = row.verdicts.get(comparison_key(cv.comparison), "inconclusive")
                reason = "" if verdict != "inconclusive" else f"sequential design: {row.why}"
            if verdict == "inconclusive":
                reason = reason or cv.reason
            comparisons.append(replace(cv, verdict=verdict, reason=reason))
        verdicts = [c.verdict for c in comparisons]
        table.claims[i] = replace(claim, comparisons=tuple(comparisons), verdict=claim_verdict(verdicts))
    table.notes.append(method_note(walked, meta, max_seeds, design))
    extra = [r for r in rows if len(have.get(r, [])) > walked.seeds.get(r, 0)]
    if extra:
        table.notes.append(
            f"rows with more finished seeds than the design asked for ({', '.join(extra)}): the table's means and "
            "intervals use them all, the verdicts only the seeds the design's looks read"
        )


def method_note(walked: Walk, meta: Mapping, max_seeds: int, design: Design) -> str:
    """The report's account of a sequential study: the design, each look (its level and what it decided), and why
    each row stopped."""
    looks = []
    for i, look in enumerate(walked.looks, start=1):
        by = {k: [r for r, s in look.rows.items() if s.state == k] for k in ("decided", "open", "out_of_reach")}
        said = "; ".join(f"{k.replace('_', ' ')} {', '.join(v)}" for k, v in by.items() if v)
        looks.append(f"look {i} at {sum(look.seeds.values())} trials, level {look.level:.4f}: {said or 'nothing'}")
    rows = [f"{r} {s.seeds} seeds, {s.state.replace('_', ' ')} ({s.why})" for r, s in walked.stopped().items()]
    end = "finished" if walked.finished else "still running: the next look waits on queued trials"
    return (
        f"Sequential design ({meta.get('min_seeds')} to {max_seeds} seeds a row, {DESIGNS[design]}; the controls "
        f"keep Dunnett's sqrt(k) share of the open rows' seeds): every row starts at min_seeds, and a row gets one "
        f"more seed only while a comparison of it is open. A comparison's verdict is its test at the level its look "
        f"spent (the intervals shown are 95%), so the family-wise error stays at 5% over every look. "
        + "; ".join(looks)
        + f". Rows: {'; '.join(rows)}. The design is {end}."
    )


def judge(
    out: Path,
    rows: Sequence[str],
    controls: Mapping[str, Sequence[str]],
    *,
    min_seeds: int,
    max_seeds: int,
    design: Design = "spending",
    n_samples: int | None = None,
) -> Decision:
    """What a sequential sweep runs now (`ablations.allocation.Sequential` calls this by name): the walk over OUT's
    records (`walk`), each row's seeds in seed order with failed ones passed over, and the seeds the policy asks for
    at the look it waits on."""
    from ablate.reports.results import load_results

    results = load_results(out, use_optuna=False) if Layout(out).study_file.is_file() else None
    have, usable = finished_seeds(results, rows)
    walked = walk(results, have, controls, min_seeds=min_seeds, max_seeds=max_seeds, design=design, n_samples=n_samples)
    stopped = walked.stopped()
    return Decision(
        seeds={row: usable(row, n) for row, n in walked.target.items()},
        states={row: look.state for row, look in stopped.items()},
        why={row: look.why for row, look in stopped.items()},
        looks=len(walked.looks),
        finished=walked.finished,
        controls=tuple(c for c in controls if c not in stopped),
    )


# --- simulation -----------------------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class SimulationResult:
    """What `simulate` measured over its replicates."""

    fwer: float
    """Share of replicates with a wrong verdict on an ordinary row (a difference where none is planted, or the wrong
    sign)."""
    wrong_unstable: float
    """Share of replicates with a wrong verdict on a row with tenfold variance."""
    coverage: float
    """Share of the ordinary rows' final 95% intervals that hold the planted effect."""
    coverage_unstable: float
    """The same for the rows with tenfold variance."""
    trials: float
    """Mean trials run (rows and control)."""
    fixed_trials: int
    """Trials of the fixed design at max_seeds (the control at round(sqrt(k) max_seeds))."""
    decided: float
    """Mean share of rows with a planted effect that ended decided."""


def simulate(
    effects: Sequence[float],
    *,
    unstable: Sequence[int] = (),
    min_seeds: int = 2,
    max_seeds: int = 6,
    sd: float = 1.0,
    replicates: int = 400,
    sequential: bool = True,
    design: Design = "spending",
    seed: int = 0,
) -> SimulationResult:
    """Rows with planted `effects` against one control (seed SD `sd`; the rows in `unstable` with ten times the
    variance), each look testing every row with the report's moderated seed variances and Welch t, Holm over the
    rows at the look's spent level (`design`: alpha spending, or a confidence sequence's level); `sequential=False`
    runs every row to max_seeds and tests once at ALPHA."""
    from scipy import stats

    rng = np.random.default_rng(seed)
    k = len(effects)
    sds = np.array([sd * (math.sqrt(10) if i in unstable else 1.0) for i in range(k)])
    truth = np.asarray(effects, dtype=float)
    control_max = round(math.sqrt(k) * max_seeds)
    wrong, wrong_u, covered, covered_u, trials, decided = 0, 0, [], [], [], []
    for _ in range(replicates):
        rows = rng.normal(truth[:, None], sds[:, None], size=(k, max_seeds))
        control = rng.normal(0.0, sd, size=control_max)
        seeds: dict[str, int] = {str(i): 0 for i in range(k)} | {"c": 0}  # row i is "i"
        states: dict = {}
        first = min_seeds if sequential else max_seeds
        previous, bad, verdict = 0, False, dict.fromkeys(range(k), 0)
        while True:
            target = (
                policy(seeds, states, {"c": [str(i) for i in range(k)]}, min_seeds=first, max_seeds=max_seeds)
                if sequential or not states
                else seeds
            )
            if target == seeds:
                break
            seeds = target
            n = max(seeds[str(i)] for i in range(k) if states.get(str(i), "open") == "open")
            if not sequential:
                level = ALPHA
            elif design == "confseq":
                level = confseq_level(n, max_seeds)
            else:
                level = look_level(n, previous, max_seeds)
            previous = n
            tests = _sim_tests(rows, control, seeds, k)
            p_holm = holm([p for _, _, _, p in tests])
            for i, ((effect, se, _df, _), p) in enumerate(zip(tests, p_holm, strict=True)):
                if states.get(str(i)) in ("decided", "out_of_reach"):
                    continue
                if p is not None and p < level:
                    states[str(i)], verdict[i] = "decided", int(np.sign(effect))
                    if i not in unstable:  # the family-wise error over the ordinary rows, as section 9 measures it
                        bad |= truth[i] == 0 or np.sign(truth[i]) != np.sign(effect)
                    wrong_u += i in unstable and (truth[i] == 0 or np.sign(truth[i]) != np.sign(effect))
                elif seeds[str(i)] >= max_seeds or not sequential:
                    states[str(i)] = "out_of_reach"
                else:
                    z = stats.norm.ppf(1 - level / 2) + stats.norm.ppf(0.8)
                    need = (z * se / max(abs(effect), 1e-9)) ** 2 * seeds[str(i)]
                    states[str(i)] = "open" if need <= max_seeds else "out_of_reach"
        tests = _sim_tests(rows, control, seeds, k)
        for i, (effect, se, df, _) in enumerate(tests):
            half = stats.t.ppf(1 - ALPHA / 2, df) * se
            (covered_u if i in unstable else covered).append(abs(effect - truth[i]) <= half)
        wrong += bool(bad)
        trials.append(sum(seeds.values()))
        planted = [i for i in range(k) if truth[i] != 0]
        decided.append(np.mean([states[str(i)] == "decided" for i in planted]) if planted else 0.0)
    return SimulationResult(
        fwer=wrong / replicates,
        wrong_unstable=wrong_u / replicates,
        coverage=float(np.mean(covered)),
        coverage_unstable=float(np.mean(covered_u)) if covered_u else math.nan,
        trials=float(np.mean(trials)),
        fixed_trials=k * max_seeds + control_max,
        decided=float(np.mean(decided)),
    )


def _sim_tests(
    rows: np.ndarray, control: np.ndarray, seeds: Mapping[str, int], k: int
) -> list[tuple[float, float, float, float]]:
    """(effect, SE, df, p) of every row against the control from the seeds run so far, as `reports.stats` does."""
    from scipy import stats

    values = [list(rows[i, : seeds[str(i)]]) for i in range(k)] + [list(control[: seeds["c"]])]
    moderated, _ = moderate(values)
    ref = moderated[-1]
    out = []
    for i in range(k):
        mine, n, m = moderated[i], seeds[str(i)], seeds["c"]
        a, b = mine.var / n, ref.var / m
        se = math.sqrt(a + b)
        df = (a + b) ** 2 / (a**2 / mine.df + b**2 / ref.df) if mine.df > 0 and ref.df > 0 else 1.0
        effect = float(np.mean(values[i]) - np.mean(values[-1]))
        p = float(2 * stats.t.sf(abs(effect) / se, df)) if se > 0 else 1.0
        out.append((effect, se, df, p))
    return out


__all__ = [
    "Look",
    "RowLook",
    "Walk",
    "apply_design",
    "report_table",
    "finished_seeds",
    "judge",
    "method_note",
    "walk",
    "SimulationResult",
    "comparison_key",
    "comparison_state",
    "DESIGNS",
    "Design",
    "confseq_level",
    "look_level",
    "look_seeds",
    "row_states",
    "simulate",
    "spent",
]
