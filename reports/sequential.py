"""A sequential study's report: each comparison's verdict as the design's looks left it, and the method note that
tells the looks (`report_table`, `apply_design`); `simulate`, which measured the design against the fixed one.

The design itself (the policy, the looks, the error each spends, which rows a control is tested against) is
`ablations.statistics.sequential`'s: the sweep runs it, and this module reads it back from study.json and the records.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np
from ablate.ablations.statistics.sequential import (
    Design,
    Sequential,
    Walk,
    comparison_key,
    dunnett,
    finished_seeds,
    level,
    policy,
    rows_of,
    walk,
)
from ablate.ablations.statistics.significance import ALPHA
from ablate.ablations.statistics.variance import holm, moderate

DESIGNS: dict[str, str] = {
    "spending": "O'Brien-Fleming alpha spending (Lan-DeMets) over the looks, Holm over the rows at each look",
    "confseq": "a normal-mixture confidence sequence (Howard et al., 2021), Holm over the rows at each look",
}


def report_table(results, *, n_samples: int | None = None, claims=None):
    """`reports.table.build_table`, with a sequential study's verdicts and method note (`apply_design`): what
    `ablate report` and the Python API show."""
    from ablate.ablations.results.scores import score_ahead
    from ablate.ablations.statistics.significance import N_SAMPLES
    from ablate.reports.table import build_table

    score_ahead(
        results.every_budget(), say=lambda line: print(f"{results.out_dir.name}: {line}", file=sys.stderr, flush=True)
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
    stored = Sequential.from_json(meta)
    assert stored is not None, "a study run at the sequential design"
    allocation, controls = stored
    rows = rows_of(controls)
    have, _ = finished_seeds(results, rows)
    design, max_seeds = allocation.design, allocation.max_seeds
    walked = walk(results, have, controls, min_seeds=allocation.min_seeds, max_seeds=max_seeds, design=design,
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
    # Asked for: the seeds of the look the design waits on (`target`; the last look's where it is finished).
    extra = [r for r in rows if len(have.get(r, [])) > walked.target.get(r, 0)]
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
    waiting = "the next look" if looks else "its first look"
    end = "finished" if walked.finished else f"still running: {waiting} waits on queued trials"
    return (
        f"Sequential design ({meta.get('min_seeds')} to {max_seeds} seeds a row, {DESIGNS[design]}; the controls "
        f"keep Dunnett's sqrt(k) share of the open rows' seeds): every row starts at min_seeds, and a row gets one "
        f"more seed only while a comparison of it is open. A comparison's verdict is its test at the level its look "
        f"spent (the intervals shown are 95%), so the family-wise error stays at 5% over every look. "
        + ("; ".join(looks) + ". " if looks else "No look taken yet. ")
        + (f"Rows: {'; '.join(rows)}. " if rows else "")
        + f"The design is {end}."
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
    control_max = dunnett(k, max_seeds)
    wrong, wrong_u, covered, covered_u, trials, decided = 0, 0, [], [], [], []
    for _ in range(replicates):
        rows = rng.normal(truth[:, None], sds[:, None], size=(k, max_seeds))
        control = rng.normal(0.0, sd, size=control_max)
        seeds, states, bad, wrong_here = _sim_looks(
            rows, control, truth, unstable, min_seeds=min_seeds, max_seeds=max_seeds, sequential=sequential,
            design=design,
        )  # fmt: skip
        wrong_u += wrong_here
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


def _sim_looks(
    rows: np.ndarray,
    control: np.ndarray,
    truth: np.ndarray,
    unstable: Sequence[int],
    *,
    min_seeds: int,
    max_seeds: int,
    sequential: bool,
    design: Design,
):
    """One replicate's looks, as `simulate` describes them: (each row's seeds at the end, row i as "i" and the
    control as "c"; each row's state; whether an ordinary row got a wrong verdict; how many rows with tenfold
    variance did)."""
    k = len(truth)
    seeds: dict[str, int] = {str(i): 0 for i in range(k)} | {"c": 0}
    states: dict = {}
    first = min_seeds if sequential else max_seeds
    previous, bad, wrong_u = 0, False, 0
    while True:
        target = (
            policy(seeds, states, {"c": [str(i) for i in range(k)]}, min_seeds=first, max_seeds=max_seeds)
            if sequential or not states
            else seeds
        )
        if target == seeds:
            return seeds, states, bad, wrong_u
        seeds = target
        n = max(seeds[str(i)] for i in range(k) if states.get(str(i), "open") == "open")
        at = level(design, n, previous, max_seeds) if sequential else ALPHA
        previous = n
        tests = _sim_tests(rows, control, seeds, k)
        p_holm = holm([p for _, _, _, p in tests])
        for i, ((effect, se, _df, _), p) in enumerate(zip(tests, p_holm, strict=True)):
            if states.get(str(i)) in ("decided", "out_of_reach"):
                continue
            if p is not None and p < at:
                states[str(i)] = "decided"
                wrong = truth[i] == 0 or np.sign(truth[i]) != np.sign(effect)
                if i not in unstable:  # the family-wise error over the ordinary rows, as section 9 measures it
                    bad |= wrong
                wrong_u += i in unstable and wrong
            else:
                states[str(i)] = _sim_undecided(effect, se, seeds[str(i)], at, max_seeds, sequential)


def _sim_undecided(effect: float, se: float, n: int, at: float, max_seeds: int, sequential: bool) -> str:
    """An undecided row after a look: open while the power model says max_seeds could decide it, else out of reach."""
    from scipy import stats

    if n >= max_seeds or not sequential:
        return "out_of_reach"
    z = stats.norm.ppf(1 - at / 2) + stats.norm.ppf(0.8)
    need = (z * se / max(abs(effect), 1e-9)) ** 2 * n
    return "open" if need <= max_seeds else "out_of_reach"


def _sim_tests(
    rows: np.ndarray, control: np.ndarray, seeds: Mapping[str, int], k: int
) -> list[tuple[float, float, float, float]]:
    """(effect, SE, df, p) of every row against the control from the seeds run so far, as `ablations.statistics.significance` does."""
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
    "DESIGNS",
    "SimulationResult",
    "apply_design",
    "method_note",
    "report_table",
    "simulate",
]
