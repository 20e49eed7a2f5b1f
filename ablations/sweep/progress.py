"""The live view of a study: rows done, running, pending and failed, the latest dev BLEU of each row, and an ETA
that weighs each remaining trial by its steps and its row's measured cost per step (`Eta`)."""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property, partial
from typing import Any

from ablate.ablations.results import ledger
from ablate.ablations.statistics.sequential import DECIDING_SEEDS, seed_range
from ablate.ablations.study.definition import load_study
from ablate.ablations.study.presets import get_preset
from ablate.lightning_modules.config import budget_steps, fork_step


@dataclass
class RowStatus:
    row: str
    seed: int
    state: str  # pending | running | complete | failed; stopped: an earlier attempt (`resumed_from`)
    bleu: float | None = None
    ppl: float | None = None
    step: int | None = None
    max_steps: int | None = None
    wall_s: float | None = None
    reason: str | None = None
    closed_as: str | None = None
    """Why a failed one was closed by design (`ablations.results.ledger.ClosedAs`), None for a failure of its own."""
    host: str | None = None
    job: str | None = None
    """The scheduler's job that ran (or runs) the trial, with its state when known: '123_0 RUNNING'."""
    scheduler: str | None = None
    """The launcher whose scheduler ran that job ('slurm'), which `ablate status` asks for the job's state."""
    started_at: float | None = None
    """When the trial that speaks for the row x seed started (epoch seconds): tells one attempt from the next."""
    startup_s: float | None = None
    """A finished trial's seconds from its start to its first step (a worker's first trial pays the process's
    imports and W&B's service): left out of its row's cost per step."""
    budget: str | None = None
    """The shorter budget whose branch a running trial is training ('T/2'; its step and max_steps are then the
    branch's), None in its main run."""
    validated_at: float | None = None
    """When a running trial's step (its last validation) landed, epoch seconds on the worker's clock; None from a
    worker of an older ablate, whose step is then timed when a view first sees it."""
    resumed_from: RowStatus | None = None
    """A running (or queued) attempt that takes up an earlier one's training from its checkpoint: the earlier
    attempt where it stopped (its step, and its budget and max_steps where it stopped in a branch). The ETA times
    this attempt's pace over the steps it trained itself, not over the earlier attempt's."""


def collect(trials: list[Any], keys: list[tuple[str, int]]) -> list[RowStatus]:
    """The state of every row x seed of the plan, from its Optuna trials (the ledger says which trial speaks for
    each; a pruned trial shows as failed)."""
    by_key = ledger.resolve(trials)
    stopped = _stopped(trials)
    out = []
    for row, seed in keys:
        trial = by_key.get((row, seed))
        earlier = stopped.get((row, seed))  # an earlier attempt's last step: where its checkpoint resumes
        if trial is None or ledger.trial_state(trial) == "pending":
            step = earlier.step if earlier else None
            out.append(RowStatus(row, seed, "pending", step=step, reason=f"resumes at step {step}" if step else None,
                                 resumed_from=earlier))  # fmt: skip
            continue
        attrs = trial.user_attrs
        record = ledger.stored_record(trial)
        metrics = record.metrics if record is not None else {}
        progress = attrs.get("progress") or {}
        state = {"running": "running", "complete": "complete"}.get(ledger.trial_state(trial), "failed")
        resumed = earlier if state == "running" else None
        wall = metrics.get("wall_time_s")
        if wall is None and trial.datetime_start is not None:  # running: so far; failed: until it failed
            end = trial.datetime_complete.timestamp() if trial.datetime_complete is not None else time.time()
            wall = end - trial.datetime_start.timestamp()
        out.append(
            RowStatus(
                row,
                seed,
                state,
                bleu=metrics.get("bleu", progress.get("bleu")),
                ppl=metrics.get("ppl", progress.get("ppl")),
                step=metrics.get("steps", progress.get("step") or (resumed.step if resumed else None)),
                max_steps=progress.get("max_steps"),
                wall_s=wall,
                reason=attrs.get("reason") if state == "failed" else None,
                closed_as=ledger.closed_as(trial) if state == "failed" else None,
                host=attrs.get("host"),
                job=attrs.get("job") or attrs.get("slurm_job"),  # slurm_job: a study swept by an older ablate
                scheduler=attrs.get("scheduler") or ("slurm" if attrs.get("slurm_job") else None),
                started_at=trial.datetime_start.timestamp() if trial.datetime_start is not None else None,
                startup_s=metrics.get("overhead_s"),
                budget=progress.get("budget") if state == "running" else None,
                validated_at=progress.get("at") if state == "running" else None,
                resumed_from=resumed,
            )
        )
    return out


def _stopped(trials: list[Any]) -> dict[tuple[str, int], RowStatus]:
    """Row x seed -> the last earlier attempt that stopped (Ctrl-C, a preemption, a worker killed) and went back to
    the queue, at the step it saved (else its last validated one): a resumed trial starts there, not at 0. A running
    attempt is no earlier one: its own progress is not where it resumed."""
    out: dict[tuple[str, int], RowStatus] = {}
    for trial in sorted(trials, key=lambda t: t.number):
        key, progress = ledger.trial_key(trial), trial.user_attrs.get("progress") or {}
        if key is None or ledger.trial_state(trial) == "running":
            continue
        budget = progress.get("budget")
        step = trial.user_attrs.get(ledger.STOPPED_AT) or (progress.get("step") if not budget else None)
        if step:
            out[key] = RowStatus(*key, "stopped", step=int(step), budget=budget, max_steps=progress.get("max_steps"))
    return out


@dataclass(frozen=True)
class Work:
    """How much training one trial of a row is: what the ETA weighs the row's remaining trials by."""

    steps: int
    """The row's train.max_steps, T (the big row of Table 3 has 3x the base's)."""
    size: int | Callable[[], int]
    """The row's parameter count, or how to count it (`params`): the size model for a row not measured yet."""
    branches: tuple[tuple[int, int], ...] = ()
    """(fork step, end step) of each shorter budget (train.budgets, in that order): after the main run, each is
    trained from its fork to its end."""

    @classmethod
    def of(cls, run: Any) -> Work:
        """The work of a row from its RunConfig; its parameters are counted when first asked for."""
        t, cooldown = run.train.max_steps, run.train.cooldown_frac
        branches = tuple((fork_step(t, f, cooldown), budget_steps(t, f)) for f in run.train.budgets)
        return cls(steps=t, size=partial(_count_params, run.model), branches=branches)

    @cached_property
    def params(self) -> int:
        """The row's parameter count. Counted on first use: the model built on the meta device costs seconds (torch's
        import, and the meta kernels import torch._dynamo), which `ablate status` spends only on a row it has not
        measured yet."""
        return self.size if isinstance(self.size, int) else self.size()

    @property
    def total(self) -> int:
        """The steps one trial trains: T and its branches' (1.1 T for a branch at T/2 with a cooldown of 0.2)."""
        return self.steps + sum(end - fork for fork, end in self.branches)

    def trained(self, r: RowStatus) -> int:
        """The steps a trial has trained by its last validated step: in a branch, the main run, the branches
        before it and this one's part (the branch is the one ending at the trial's max_steps)."""
        if r.state == "complete":
            return self.total
        behind = self.steps
        for fork, end in self.branches if r.budget else ():
            if end == r.max_steps:
                return behind + max((r.step or fork) - fork, 0)
            behind += end - fork
        return r.step or 0


def _count_params(model: Any) -> int:
    from ablate.lightning_modules.transformer import Transformer  # imports torch: only when a count is asked for

    return Transformer.count(model)


class Eta:
    """Time left in a sweep: each unfinished trial's steps (its main run and its budgets' branches, `Work.total`)
    times its row's seconds per step, spread over the workers (and never less than the longest single trial left).

    A row's seconds per step (whole trial: periodic and final validations, test decoding, all but the start-up) are
    learnt as the sweep runs, best source first:
    1. the row's finished trials: (wall time - start-up) / steps trained;
    2. its running trials' pace: the time between two validations (a trial's 'progress' attribute moves at each
       validation, with the time it landed), else from the trial's start to its last validated step, over the
       steps this attempt trained (not those of an earlier attempt whose checkpoint it resumed); times the
       ratio of whole trial to pace (the final full-dev validations and the test sets are no training steps),
       learnt from the trials this view watched run and finish (1 until one has);
    3. a row not measured yet: the size model s(row) = c * params(row) ** alpha, fitted by least squares on
       log(seconds per step) against log(parameter count) of the measured rows. Until these span 1.5x in
       parameters alpha is 1 (cost in proportion to parameters, as FLOPs per token are about 6 x parameters); the
       fit is clipped to 0 <= alpha <= 1 (a bigger model is never cheaper, nor dearer than in proportion). It is a
       fit because small models on a CPU do not follow FLOPs (the smoke preset's rows:
       docs/reference/code-figures.md, "ablations/sweep/progress.py").
    A running trial is left its row's whole time less the time it has run, and at least its own pace over its steps
    left. Without `work` (the rows' steps and sizes) a trial that nothing is known of counts the median wall time
    of the finished trials.

    A live view calls `observe` at each poll; `estimate` and `total` observe the rows they are given too."""

    SPAN = 1.5
    """Parameter counts of the measured rows must span this factor before alpha is fitted instead of taken as 1."""

    def __init__(self, work: dict[str, Work] | None = None) -> None:
        self.work = dict(work or {})
        self._seen: dict[tuple[str, int, float | None], list[tuple[float, int, bool]]] = {}
        """Per trial attempt (row, seed, started_at): (time, steps trained by its last validation, whether this view
        saw it land)."""
        self._whole: dict[tuple[str, int, float | None], float] = {}
        """Per attempt watched running, then finished: its seconds per step over its last pace while running."""
        self._from: dict[tuple[str, int, float | None], int] = {}
        """Per attempt that resumed an earlier one: the steps trained before it started (`RowStatus.resumed_from`)."""

    @classmethod
    def for_plan(cls, plan: Any) -> Eta:
        """An Eta that knows every row's steps and size, from a sweep's `Plan`."""
        return cls({row.name: Work.of(plan.run_config(row, plan.seeds[0])) for row in plan.rows()})

    def observe(self, rows: list[RowStatus], now: float | None = None) -> None:
        """Note when each running trial's validated step changed (when it landed, as its worker wrote; from an older
        worker, a step this view saw arrive, as the previous look had another, is timed to within one poll), and how
        each watched trial's whole time compared to its pace."""
        now = time.time() if now is None else now
        for r in rows:
            attempt = (r.row, r.seed, r.started_at)
            if r.state == "running" and r.started_at is not None:
                self._from[attempt] = self._trained(r.resumed_from) if r.resumed_from else 0
                seen = self._seen.setdefault(attempt, [])
                step = self._trained(r)
                if not seen or seen[-1][1] != step:
                    # Timed when it landed where the worker said so, else when this view first saw it.
                    at = r.validated_at
                    seen.append((at, step, True) if at is not None else (now, step, bool(seen)))
            elif r.state == "complete" and attempt in self._seen and attempt not in self._whole:
                pace, whole = self._pace(attempt), _per_step(r, self._trained(r))
                if pace and whole:
                    self._whole[attempt] = whole / pace

    def _trained(self, r: RowStatus) -> int:
        """Steps a trial has trained (`Work.trained`; its validated step when its row's work is not known)."""
        return self.work[r.row].trained(r) if r.row in self.work else r.step or 0

    def _pace(self, attempt: tuple[str, int, float | None]) -> float | None:
        """Seconds per step of one attempt as this view saw it run (None before its first validation)."""
        seen = self._seen.get(attempt) or []
        landed = [(t, step) for t, step, timed in seen if timed and step]
        if len(landed) >= 2 and landed[-1][1] > landed[0][1]:
            return (landed[-1][0] - landed[0][0]) / (landed[-1][1] - landed[0][1])
        started, before = attempt[2], self._from.get(attempt, 0)
        if not seen or seen[-1][1] <= before or started is None or seen[-1][0] <= started:
            return None
        return (seen[-1][0] - started) / (seen[-1][1] - before)

    def rates(self, rows: list[RowStatus]) -> dict[str, float]:
        """Whole-trial seconds per step of every row that something is known of (sources 1-3 above)."""
        tail = max(statistics.median(self._whole.values()), 1.0) if self._whole else 1.0
        measured = {}
        for row in dict.fromkeys(r.row for r in rows):
            done = [x for r in rows if r.row == row and r.state == "complete" and (x := _per_step(r, self._trained(r)))]
            paces = [x * tail for r in rows if r.row == row and r.state == "running" and (x := self._pace(_key(r)))]
            if done or paces:
                measured[row] = statistics.median(done or paces)
        sized = {row: rate for row, rate in measured.items() if row in self.work}
        unmeasured = [row for row in self.work if row not in measured]
        if not sized or not unmeasured:
            return measured
        alpha = self._alpha(sized)
        c = math.exp(statistics.fmean(math.log(rate) - alpha * math.log(self.work[row].params)
                                      for row, rate in sized.items()))  # fmt: skip
        return {**{row: c * self.work[row].params ** alpha for row in unmeasured}, **measured}

    def _alpha(self, sized: dict[str, float]) -> float:
        xs = [math.log(self.work[row].params) for row in sized]
        ys = [math.log(rate) for rate in sized.values()]
        if max(xs) - min(xs) < math.log(self.SPAN):
            return 1.0
        return min(max(statistics.linear_regression(xs, ys).slope, 0.0), 1.0)

    def estimate(self, rows: list[RowStatus], now: float | None = None) -> dict[tuple[str, int], float | None]:
        """Seconds left of each pending or running trial (None where nothing is known yet)."""
        now = time.time() if now is None else now
        self.observe(rows, now)
        rates = self.rates(rows)
        walls = [r.wall_s for r in rows if r.state == "complete" and r.wall_s]
        out: dict[tuple[str, int], float | None] = {}
        for r in (r for r in rows if r.state in ("pending", "running")):
            steps = self.work[r.row].total if r.row in self.work else r.max_steps
            rate = rates.get(r.row)
            if rate is None or not steps:
                left = statistics.median(walls) if walls else None
                if left is not None and r.state == "running":
                    left = max(left - (r.wall_s or 0.0), 0.0)
            elif r.state == "pending":  # one queued again after a stop resumes from its checkpoint
                left = rate * (steps - (self._trained(r.resumed_from) if r.resumed_from else 0))
            else:
                before = self._from.get(_key(r), 0)  # steps an earlier attempt trained: this one's checkpoint
                t, step, _ = (self._seen.get(_key(r)) or [(now, before, False)])[-1]
                elapsed = now - r.started_at if r.started_at is not None else 0.0
                if step <= before:  # before its first validation: it has run since it started
                    t = now - elapsed
                pace = self._pace(_key(r)) or rate
                left = max(rate * (steps - before) - elapsed, pace * (steps - step) - (now - t), 0.0)
            out[(r.row, r.seed)] = left
        return out

    def total(self, rows: list[RowStatus], workers: int, now: float | None = None) -> float | None:
        """Seconds until the sweep ends: the trials' time left over the workers, at least the longest one. None while
        some trial's cost is unknown (before any trial was measured)."""
        return seconds_left(self.estimate(rows, now), workers)


def seconds_left(left: dict[tuple[str, int], float | None], workers: int) -> float | None:
    """The sweep's time left from each trial's (`Eta.estimate`): their sum over the workers, at least the longest
    one; None while some trial's cost is unknown."""
    times = [x for x in left.values() if x is not None]
    if not times or len(times) < len(left):
        return None
    return max(sum(times) / max(workers, 1), max(times))


def _key(r: RowStatus) -> tuple[str, int, float | None]:
    return (r.row, r.seed, r.started_at)


def _per_step(r: RowStatus, steps: int) -> float | None:
    """A finished trial's seconds per step of the `steps` it trained, its start-up left out."""
    if not steps or not r.wall_s:
        return None
    return max(r.wall_s - (r.startup_s or 0.0), 0.0) / steps or None


def eta_seconds(rows: list[RowStatus], workers: int, eta: Eta | None = None) -> float | None:
    """Seconds until the sweep ends (`Eta.total`; a fresh `Eta` without rows' work when none is given)."""
    return (eta or Eta()).total(rows, workers)


CPU_SIZE_ALPHA = 0.69
"""How a row's time per step grows with its parameter count on one CPU core: time ~ params ** CPU_SIZE_ALPHA, fitted
by least squares on the 21 Table 3 rows' step times relative to the base at the tiny preset (docs/method/budgets.md).
The rows' ratios: docs/reference/code-figures.md, "ablations/sweep/progress.py"."""


def threads_per_worker(cores: int, workers: int) -> int:
    """Each local worker's equal share of the CPU cores, as its threads (`launchers.local` starts them so)."""
    return max(1, cores // max(workers, 1))


def cost_line(plan: Any, work: dict[str, Work], workers: int, cores: int | None, done: int = 0) -> str:
    """What the plan's trials (rows x seeds) cost, in one line, before any has run: from the preset's measured base
    trial on one core (`Preset.base_trial_s`; else `base_step_s` per step, training alone), the base being Table 3's
    base row at the preset as `make study` runs it. A row's trial is the base's times the ratio of its steps (main
    run and budget branches, `Work.total`) and its parameter count's ratio to the power CPU_SIZE_ALPHA (the size
    model of `Eta`, fitted once on measured step times instead of learnt as a sweep runs). The wall time spreads
    the trials over min(workers, cores), each at one core's speed, and is never below the longest trial; where each
    worker gets several cores as threads, the line gives the range from their full speed-up to none. `cores` None:
    the trials run on GPUs, which the measurement on a core does not time. `work`: the rows' (`Eta.for_plan`).
    `done`: trials already recorded (a resumed sweep), whose cost is left out."""
    preset, trials = get_preset(plan.preset), len(plan.keys())
    if preset.base_trial_s is None and preset.base_step_s is None:
        return f"cost: {trials} trials; preset {preset.name} has no measured step time, so no estimate of their cost"
    base = Work.of(load_study("table3").run_config("base", preset))
    if preset.base_trial_s is not None:
        per_step = preset.base_trial_s / base.total
        measured = f"base trial {_fmt(preset.base_trial_s)} on one core, measured"
    else:
        assert preset.base_step_s is not None  # one of the two is measured (returned above otherwise)
        per_step = preset.base_step_s
        measured = f"base step {preset.base_step_s * 1e3:.0f} ms on one core, measured; training steps alone"
    size = {name: (w.params / base.params) ** CPU_SIZE_ALPHA for name, w in work.items()}
    todo = [
        (row, seed, per_step * work[row.name].total * size[row.name])
        for row, seed in plan.keys()
        if not done or not ledger.record_path(plan.out, row.name, seed).exists()
    ]
    times = [t for _, _, t in todo]
    left = f"{trials} trials" if not done else f"{trials} trials, {done} done: the {len(times)} left"
    line = f"cost: {left}, about {sum(times) / 3600:.1f} core-hours ({measured})"
    extra = [t for _, seed, t in todo if seed not in plan.seeds]
    if extra:
        line += f", of which the controls' {len(extra)} extra seeds {sum(extra) / 3600:.1f}"
    scenarios: list[tuple[str, float]] = []
    if plan.allocation is not None:
        text, scenarios = _sequential_cost(
            plan, {name: per_step * work[name].total * size[name] for name in plan.judged()}
        )
        line += text
    if cores is None:
        return f"{line}; this machine's GPUs will differ"
    return line + _wall(times, scenarios, workers, cores)


def _wall(times: list[float], scenarios: list[tuple[str, float]], workers: int, cores: int) -> str:
    """The cost line's wall time on this machine: the trials queued now, and under the sequential design each of its
    scenarios (`_sequential_cost`), spread over min(workers, cores), never below the longest trial."""
    wall = max(sum(times) / max(min(workers, cores), 1), max(times, default=0.0))
    machine = f"{cores} core{'s' if cores != 1 else ''}"
    about = _fmt(wall)
    threads = threads_per_worker(cores, workers)
    if threads > 1:
        # How far a worker's threads speed its trial depends on the model's size, so the line gives the range from
        # their full speed-up to none (docs/findings/table3-gettext.md;
        # docs/reference/code-figures.md, "ablations/sweep/progress.py").
        fast = max(sum(times) / (workers * threads), max(times, default=0.0) / threads)
        about = f"{_fmt(fast)} to {about} (each on {threads} threads, as far as they speed it)"
    said = f"; on this machine's {machine} with {workers} worker(s) about {about}"
    if len(scenarios) > 1:  # the design's range, in the same words as its core-hours
        longest, spread = max(times, default=0.0), max(min(workers, cores), 1)
        walls = ", ".join(f"{_fmt(max(core_s / spread, longest))} with {what}" for what, core_s in scenarios)
        said += f" for the trials queued now; {walls}"
    return said


def _sequential_cost(plan: Any, trial_s: dict[str, float]) -> tuple[str, list[tuple[str, float]]]:
    """The cost line's sequential part: the study's core-hours with every row stopped at min_seeds, decided at its
    deciding seed count, and open to max_seeds, and those three (what, core-seconds) for the wall-time part.
    `trial_s`: the seconds of one trial of each of the study's rows."""
    low_n, high_n = plan.allocation.min_seeds, plan.allocation.max_seeds
    low, high = sequential_range(plan.controls(), low_n, high_n, trial_s)
    ours = {row.name for row, _ in plan.keys()}
    whose = f" (the study's {len(trial_s)} rows)" if set(trial_s) - ours else ""  # a sweep over some of them
    deciding = min(DECIDING_SEEDS, high_n)  # no row is decided on fewer: a clear effect costs this many
    middle = sequential_range(plan.controls(), deciding, deciding, trial_s)[0]
    scenarios = [(f"every row stopped at {low_n} seeds", low)]
    decided = ""
    if low_n < deciding < high_n:
        decided = f", {middle / 3600:.1f} (every row decided at {deciding} seeds)"
        scenarios.append((f"every row decided at {deciding}", middle))
    scenarios.append((f"every row open to {high_n}", high))
    text = (
        f"; sequential{whose}: from {low / 3600:.1f} (every row stopped at min_seeds {low_n}){decided} to "
        f"{high / 3600:.1f} core-hours (every row open to max_seeds {high_n})"
    )
    return text, scenarios


def sequential_range(
    controls: dict[str, list[str]], min_seeds: int, max_seeds: int, trial_s: dict[str, float]
) -> tuple[float, float]:
    """The seconds a sequential study costs at the two ends: every row settled at its first look (`min_seeds`, each
    control at its sqrt(k) share, a row no claim tests at one seed), or every row open until `max_seeds`. Both from
    the policy the sweep runs (`design.seed_range`), so the cost line cannot drift from it. `trial_s`: one trial's
    seconds by row, for the rows the study's looks judge (`Plan.judged`: a sweep over some of them included)."""
    first, last = seed_range(trial_s, controls, min_seeds=min_seeds, max_seeds=max_seeds)
    return _cost(first, trial_s), _cost(last, trial_s)


def _cost(seeds: dict[str, int], trial_s: dict[str, float]) -> float:
    return sum(t * seeds[row] for row, t in trial_s.items())


def counts(rows: list[RowStatus]) -> dict[str, int]:
    out = {"complete": 0, "running": 0, "pending": 0, "failed": 0}
    for r in rows:
        out[r.state] += 1
    return out


def summary_line(
    rows: list[RowStatus], workers: int, eta: Eta | None = None, left: dict[tuple[str, int], float | None] | None = None
) -> str:
    """'3/42 done, 2 running, ...' with the ETA (from `left`, each trial's time left, when the caller has it)."""
    c = counts(rows)
    if not (c["pending"] or c["running"]):
        seconds = None
    else:
        seconds = seconds_left(left, workers) if left is not None else eta_seconds(rows, workers, eta)
    eta_text = f", ETA {_fmt(seconds)}" if seconds is not None else ""
    line = f"{c['complete']}/{len(rows)} done, {c['running']} running, {c['pending']} pending, {c['failed']} failed"
    return line + eta_text + latest_failure(rows)


def latest_failure(rows: list[RowStatus], width: int = 100) -> str:
    """'; last failure A2 seed 3: <cause>' for the trial that failed last (trials closed unrun or as duplicates
    are not failures), '' when none failed."""
    failed = [r for r in rows if r.state == "failed" and r.reason and r.closed_as not in ledger.CLOSED_UNRUN]
    if not failed:
        return ""
    last = max(failed, key=lambda r: ((r.started_at or 0) + (r.wall_s or 0), r.row, r.seed))
    reason = last.reason or ""
    cut = reason if len(reason) <= width else reason[: width - 3] + "..."
    return f"; last failure {last.row} seed {last.seed}: {cut}"


def render(rows: list[RowStatus], workers: int, title: str, eta: Eta | None = None):
    """A rich Table of the study: per trial its state, validated step, dev BLEU and PPL, time so far and time left
    (`Eta`), and the sweep's ETA in the title."""
    from rich.table import Table  # lazy: rich's console, only for a terminal view

    eta = eta or Eta()
    left = eta.estimate(rows)
    table = Table(title=f"{title}: {summary_line(rows, workers, left=left)}", title_justify="left")
    jobs, ahead = any(r.job for r in rows), bool(left)  # "left" only while trials are left
    numeric = ("seed", "step", "dev BLEU", "dev PPL", "time", "left")
    for col in ("row", "seed", "state", "step", "dev BLEU", "dev PPL", "time", *(["left"] if ahead else []),
                *(["job"] if jobs else []), "note"):  # fmt: skip
        table.add_column(col, justify="right" if col in numeric else "left")
    style = {"complete": "green", "running": "yellow", "pending": "dim", "failed": "red"}
    for r in rows:
        steps = eta.work[r.row].steps if r.row in eta.work and not r.budget else r.max_steps
        validated = "-" if r.step is None else r.step  # a running trial before its first validation: "-/60"
        step = f"{validated}/{steps}" if r.state == "running" and steps else str(r.step or "")
        step = f"{r.budget} {step}" if r.budget else step  # in a branch: "T/2 1550/1600"
        table.add_row(
            r.row,
            str(r.seed),
            f"[{style[r.state]}]{r.state}[/]",
            step,
            f"{r.bleu:.2f}" if r.bleu is not None else "",
            f"{r.ppl:.2f}" if r.ppl is not None else "",
            _fmt(r.wall_s) if r.wall_s else "",
            *([_fmt(left[(r.row, r.seed)]) if left.get((r.row, r.seed)) is not None else ""] if ahead else []),
            *([r.job or ""] if jobs else []),
            (r.reason or "")[:60]
            if r.state in ("failed", "pending")
            else (r.host or "" if r.state == "running" else ""),
        )
    return table


def _fmt(seconds: float | None) -> str:
    if seconds is None:
        return "?"
    seconds = int(seconds)
    hours, rest = divmod(seconds, 3600)
    minutes, sec = divmod(rest, 60)
    return f"{hours}h{minutes:02d}m" if hours else (f"{minutes}m{sec:02d}s" if minutes else f"{sec}s")
