"""A study's evidence, gathered from its folder: the claims judged on its records (`study_verdicts`), the looks of
the sequential design over its finished trials (`looks`, `decide`), and which trials a look reads (`finished_seeds`,
`failed_rows`).

The statistics (`ablations.statistics`) are functions of numbers; this is where a results directory
(`ablations.results.load.StudyResults`) becomes those numbers: each record's hypotheses scored by sacreBLEU
(`ablations.results.scores`), its curves and source use read, its metrics named by `lightning_modules.metrics`.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

from ablate.ablations.results.scores import system_scores
from ablate.ablations.statistics.claims import Claim
from ablate.ablations.statistics.convergence import SOURCE_RATIO_MIN, row_convergence, source_ratio, trainable_threshold
from ablate.ablations.statistics.sequential import (
    FAILED,
    Decision,
    ErrorControl,
    Judged,
    Sequential,
    State,
    Walk,
    controls_of,
    first_look,
    walk,
    without_failed,
)
from ablate.ablations.statistics.significance import N_SAMPLES, compare_rows, screen_budgets
from ablate.ablations.statistics.verdicts import ClaimVerdict, Tests, budget_label, judge
from ablate.ablations.study.claims import parse_claims
from ablate.lightning_modules.metrics import METRICS


@dataclass(frozen=True, kw_only=True)
class Evidence:
    """A study's claims judged on its results (`study_verdicts`), and what the verdicts rest on."""

    tests: dict[float, Tests]
    """Budget (fraction of T) -> every row against the base on every metric, and each (row, reference) pair a
    claim names with `against`."""
    excluded: dict[float, dict[str, str]]
    """Budget -> row -> why the row gives no verdict there (diverged, or not trainable at this preset)."""
    untrainable: dict[str, dict[float, str]]
    """Row -> budget -> the measured cause, where this preset did not train the row (below `trainable_threshold`
    of the base's source use)."""
    nothing_learned: str | None
    """Set when the base itself did not learn to translate: then no claim gets a verdict."""
    withheld: str | None
    """Why no claim gets a verdict (study.json's pipeline_check, else `nothing_learned`), else None."""
    claims: list[ClaimVerdict]
    """A verdict for each claim."""


def study_verdicts(
    results,
    claims: list[Claim] | None = None,
    *,
    n_samples: int = N_SAMPLES,
    paper: dict[str, dict[str, float | None]] | None = None,
) -> Evidence | None:
    """The claims (`claims`, else those study.json carries) judged on `results` (`ablations.results.load.StudyResults`)
    at every budget, as the report and the sequential design's looks both read them; `paper`: the paper's numbers by
    row, for each comparison's paper difference. None when the study has no base row with a complete trial."""
    base = results.base
    if base is None or not results.records(base.name):
        return None
    names = [spec.name for spec in results.rows]
    ratios = {name: source_ratios(results, name) for name in names}
    withheld = results.meta.get("pipeline_check") or None
    nothing_learned = _nothing_learned(base.name, ratios[base.name])
    untrainable = {} if nothing_learned else _untrainable(base.name, ratios)
    judged = claims if claims is not None else study_claims(results)
    claimed = [(c.row, c.against) for claim in judged for c in claim.compare if c.against]
    at = {f: results.at_budget(f) for f in results.fractions}
    screened = {metric: _screen(at, names, metric) for metric in METRICS}
    tests = {f: _row_tests(at[f], names, base.name, n_samples, claimed, screened) for f in results.fractions}
    excluded = _excluded(results, untrainable)
    withheld = withheld or nothing_learned
    verdicts = judge(judged, tests, base.name, paper, metrics=METRICS, excluded=excluded, withheld=withheld)
    return Evidence(tests=tests, excluded=excluded, untrainable=untrainable, nothing_learned=nothing_learned,
                    withheld=withheld, claims=verdicts)  # fmt: skip


def study_claims(results) -> list[Claim]:
    """The claims study.json carries (checked when the sweep started), as Claim objects."""
    raw = results.meta.get("claims")
    if not raw:
        return []
    return parse_claims(raw, str(results.out_dir / "study.json"))


def _screen(at: dict, names: list[str], metric: str) -> dict:
    """Each row's seed spread over every budget on `metric` (`ablations.statistics.significance.screen_budgets`)."""
    scores = {
        f: {name: {rec.seed: s.score for rec in results.records(name) if (s := system_scores(rec, metric)) is not None}
            for name in names}
        for f, results in at.items()
    }  # fmt: skip
    return screen_budgets(scores)


def _row_tests(
    results, names: list[str], base: str, n_samples: int, claimed: list[tuple[str, str]], screened: dict
) -> Tests:
    """Every row against the base on every metric, and each (row, reference) pair a claim names with `against`
    (the modern study's components against the `paper` row), counting seed and sentence noise; Holm-corrected per
    metric over the pairs that share a reference (`ablations.statistics.significance.compare_rows`), with the rows'
    spread screened over every budget (`screened`: metric -> row -> its screen)."""
    pairs = [(name, base) for name in names if name != base]
    known = set(names)
    pairs += [p for p in dict.fromkeys(claimed) if p not in pairs and p[0] != p[1] and set(p) <= known]
    tests: Tests = {}
    for metric in METRICS:
        systems = {
            name: [s for s in (system_scores(rec, metric) for rec in results.records(name)) if s is not None]
            for name in names
        }
        tests.update(compare_rows(systems, pairs, metric, n_samples=n_samples, screened=screened[metric]))
    return tests


def source_ratios(results, name: str) -> dict[float, float]:
    """Budget -> the row's lowest source_ppl_ratio over its complete seeds, where the records give one."""
    ratios = {f: source_ratio(results.at_budget(f).records(name)) for f in results.fractions}
    return {f: ratio for f, ratio in ratios.items() if ratio is not None}


def _nothing_learned(base: str, ratios: dict[float, float]) -> str | None:
    """Why no verdict at all when the base is below SOURCE_RATIO_MIN at some budget: the study learnt nothing."""
    bad = {f: ratio for f, ratio in ratios.items() if ratio < SOURCE_RATIO_MIN}
    if not bad:
        return None
    where = ", ".join(f"×{ratio:.1f} at {budget_label(f)}" for f, ratio in sorted(bad.items()))
    return (
        f"nothing here learnt to translate: the base '{base}' predicts its targets about as well from "
        f"another sentence's source (dev PPL {where} with swapped sources; a translator is far above "
        f"{SOURCE_RATIO_MIN:g}), so no claim gets a verdict. Try more steps (train.max_steps), more data, or a "
        "longer warmup (train.warmup_steps), calibrated on the base row alone"
    )


def _untrainable(base: str, ratios: dict[str, dict[float, float]]) -> dict[str, dict[float, str]]:
    """Row -> budget -> why this preset did not train the row there: its source use below `trainable_threshold` of
    the base's (it never left the language-model plateau), with the measured cause."""
    out: dict[str, dict[float, str]] = {}
    for name, by_budget in ratios.items():
        if name == base:
            continue
        for fraction, ratio in sorted(by_budget.items()):
            base_ratio = ratios[base].get(fraction)
            if base_ratio is None or ratio >= (threshold := trainable_threshold(base_ratio)):
                continue
            out.setdefault(name, {})[fraction] = (
                f"stayed on the language-model plateau at {budget_label(fraction)}: dev PPL ×{ratio:.1f} with "
                f"swapped sources against the base's ×{base_ratio:.1f} (trained: ×{threshold:.1f} or more)"
            )
    return out


def _excluded(results, untrainable: dict[str, dict[float, str]]) -> dict[float, dict[str, str]]:
    """Budget -> row -> why the row gives no verdict there: it diverged (every budget), or this preset did not train
    it at that budget (`untrainable`)."""
    out: dict[float, dict[str, str]] = {f: {} for f in results.fractions}
    for spec in results.rows:
        convergence = row_convergence(results.records(spec.name, state=None))
        if convergence is not None and convergence.state == "diverged":
            for fraction in results.fractions:
                out[fraction][spec.name] = "diverged"
        for fraction, cause in untrainable.get(spec.name, {}).items():
            out.setdefault(fraction, {}).setdefault(spec.name, f"not trainable at this preset ({cause})")
    return out


def looks(results, n_samples: int | None = None) -> Judged:
    """The evidence the sequential design's looks judge (`ablations.statistics.sequential.Judged`): for each choice
    of seeds, the claims judged on the study with only those trials. A finished trial never changes, so each choice
    is judged once a process (`_JUDGED`, by the study folder and the trials read): `walk` takes the looks again from
    the first after every trial, and only the newest is new."""
    n = n_samples or N_SAMPLES

    def judged(chosen: Mapping[str, tuple[int, ...]]) -> Sequence[ClaimVerdict]:
        trials = tuple(sorted((row, seed) for row, seeds in chosen.items() for seed in seeds))
        key = (str(getattr(results, "out_dir", "")), trials, n)
        if key not in _JUDGED:
            subset = replace(results, status={k: v for k, v in results.status.items() if k in set(trials)})
            evidence = study_verdicts(subset, n_samples=n)
            _JUDGED[key] = evidence.claims if evidence else []
        return _JUDGED[key]

    return judged


_JUDGED: dict[tuple, list[ClaimVerdict]] = {}
"""The claims judged on each choice of a study's trials in this process (`looks`)."""


def finished_seeds(results, rows: Sequence[str]) -> tuple[dict[str, list[int]], Callable[[str, int], list[int]]]:
    """Each row's seeds as the design uses them, in seed order: the prefix of them that ended (`have`), and
    `usable(row, n)`, the row's first n seeds. A failed seed keeps its place: it ended, a look reads the row's
    complete seeds among those it has, and it is never replaced by the next seed, so that failures use up the row's
    max_seeds instead of queueing seeds without end."""
    ended: dict[str, set[int]] = {r: set() for r in rows}
    for (row, seed), status in results.status.items() if results is not None else ():
        if row in ended and status.record is not None:
            ended[row].add(seed)

    def usable(row: str, n: int) -> list[int]:
        return list(range(n))

    have = {r: list(itertools.takewhile(ended[r].__contains__, itertools.count())) for r in rows}
    return have, usable


def failed_rows(results, rows: Sequence[str], first: Mapping[str, int]) -> dict[str, str]:
    """Rows whose trials all failed, each with why: at least its first look's seeds (`first`, at most two) ended and
    none completed. Its first failure's one-line cause is the row's; a row tested only against failed controls
    stops with them."""
    ended: dict[str, list[tuple[int, str]]] = {r: [] for r in rows}
    complete = set()
    for (row, seed), status in sorted(results.status.items()) if results is not None else ():
        if row in ended and status.record is not None:
            if status.record.state == "complete":
                complete.add(row)
            else:
                ended[row].append((seed, status.record.reason or status.record.state))
    dead = {}
    for row, failures in ended.items():
        if row not in complete and failures and len(failures) >= min(first.get(row, 1), 2):
            seed, reason = failures[0]
            dead[row] = f"its {len(failures)} trial(s) failed (seed {seed}: {reason})"
    return dead


@dataclass(frozen=True)
class DesignWalk:
    """The design's looks over a study's finished trials, as the sweep takes them and its report reads them
    (`design_walk`)."""

    walked: Walk
    have: dict[str, list[int]]
    """Each row's finished seeds in seed order (a failed one keeps its place)."""
    usable: Callable[[str, int], list[int]]
    """(row, n) -> the seeds the design's first n of that row are (`finished_seeds`)."""
    controls: dict[str, list[str]]
    """The controls the walk judged, and the rows compared with each, failed rows out."""
    dead: dict[str, str]
    """Rows out of the walk because their trials all failed (or their every control's did), each with why."""
    rows: list[str]
    """The rows the walk judged, in the study's order."""
    max_seeds: int
    """The design's max_seeds the walk ran at (a replay's: the most seeds a row that is no control ran, unless
    given)."""


def design_walk(
    allocation: Sequential,
    results,
    rows: Sequence[str],
    controls: Mapping[str, Sequence[str]],
    *,
    n_samples: int | None = None,
) -> DesignWalk:
    """The walk over the finished trials of `results`, each row's seeds in seed order: the one function the sweep's
    looks (`decide`) and the report (`reports.sequential.apply_design`) both take it from, so that they judge the
    same rows. A row whose trials all failed (`failed_rows`), or whose every control failed, is out of it."""
    have, usable = finished_seeds(results, rows)
    first = first_look(rows, controls, min_seeds=allocation.min_seeds, max_seeds=allocation.max_seeds)
    live, live_controls, dead = without_failed(rows, controls, failed_rows(results, rows, first))
    judged = looks(results, n_samples)  # never called before study.json: no row has a finished seed to look at
    walked = walk(judged, {r: have[r] for r in live}, live_controls, min_seeds=allocation.min_seeds,
                  max_seeds=allocation.max_seeds, error=allocation.error)  # fmt: skip
    return DesignWalk(walked=walked, have=have, usable=usable, controls=live_controls, dead=dead, rows=live,
                      max_seeds=allocation.max_seeds)  # fmt: skip


def decide(
    allocation: Sequential,
    results,
    rows: Sequence[str],
    controls: Mapping[str, Sequence[str]],
    *,
    n_samples: int | None = None,
) -> Decision:
    """What a sequential sweep runs now: the design's walk (`design_walk`) and the seeds the policy asks for at the
    look it waits on. A row whose trials all failed keeps the seeds it ran, and its state is 'failed'."""
    found = design_walk(allocation, results, rows, controls, n_samples=n_samples)
    walked, have, dead = found.walked, found.have, found.dead
    stopped = walked.stopped()
    states: dict[str, State] = {row: look.state for row, look in stopped.items()}
    states.update(dict.fromkeys(dead, FAILED))
    return Decision(
        seeds={row: found.usable(row, n) for row, n in walked.target.items()} | {r: have[r] for r in dead},
        states=states,
        why={row: look.why for row, look in stopped.items()} | dead,
        looks=len(walked.looks),
        finished=walked.finished,
        controls=tuple(c for c in found.controls if c not in stopped),
    )


def replay_walk(
    results,
    *,
    min_seeds: int = 2,
    max_seeds: int | None = None,
    error: ErrorControl = "spending",
    n_samples: int | None = None,
) -> DesignWalk:
    """A finished study's trials fed to the design as an archive (`walk(..., archive=True)`: a row whose seeds run
    out stops there), each row's complete seeds in seed order, the controls from its claims: what `ablate replay`
    reads. `max_seeds` defaults to the most seeds a row that is no control ran."""
    have: dict[str, list[int]] = {}
    for row, seed in sorted(
        k for k, s in results.status.items() if s.record is not None and s.record.state == "complete"
    ):
        have.setdefault(row, []).append(seed)
    base = results.base.name if results.base else None
    rows = [r.name for r in results.rows if have.get(r.name)]  # the rows this study ran (a --rows subset: those)
    pairs = [
        (c.get("row"), c.get("against"))
        for claim in results.meta.get("claims") or []
        for c in claim.get("compare") or []
    ]
    controls = controls_of(pairs, base, rows)
    max_seeds = max_seeds or max(len(have.get(r, [])) for r in rows if r not in controls)
    walked = walk(looks(results, n_samples), {r: have[r] for r in rows}, controls, min_seeds=min_seeds,
                  max_seeds=max_seeds, error=error, archive=True)  # fmt: skip
    return DesignWalk(walked=walked, have=have, usable=lambda row, n: have.get(row, [])[:n], controls=controls,
                      dead={}, rows=rows, max_seeds=max_seeds)  # fmt: skip


Decide = Callable[..., Decision]
"""`decide`'s signature: what a sweep's plan calls at each look (`ablations.sweep.plan.Plan.decide`)."""


__all__ = [
    "Decide",
    "DesignWalk",
    "Evidence",
    "decide",
    "design_walk",
    "replay_walk",
    "failed_rows",
    "finished_seeds",
    "looks",
    "source_ratios",
    "study_claims",
    "study_verdicts",
]
