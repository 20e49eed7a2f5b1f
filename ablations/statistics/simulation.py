"""The sequential design simulated against the fixed one: rows with planted effects against one control, each look
testing every row as the report does (moderated seed variances, Welch t, Holm over the rows at the look's level).
What it measured, and the command: docs/SCIENCE.md, "The sequential design"."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from ablate.ablations.statistics.sequential import ErrorControl, dunnett, level, policy
from ablate.ablations.statistics.significance import ALPHA
from ablate.ablations.statistics.variance import holm, moderate


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
    error: ErrorControl = "spending",
    seed: int = 0,
) -> SimulationResult:
    """Rows with planted `effects` against one control (seed SD `sd`; the rows in `unstable` with ten times the
    variance), each look testing every row with the report's moderated seed variances and Welch t, Holm over the
    rows at the look's spent level (`error`: alpha spending, or a confidence sequence's level); `sequential=False`
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
            error=error,
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
    error: ErrorControl,
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
        at = level(error, n, previous, max_seeds) if sequential else ALPHA
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
    """(effect, SE, df, p) of every row against the control from the seeds run so far, as
    `ablations.statistics.significance` does."""
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


__all__ = ["SimulationResult", "simulate"]
