"""Hyperparameter search for one row: TPE over the study's search space, pruned per validation step.

The objective is short (build the config from the trial, fit, return dev BLEU, dev PPL or both); storage, pruning
and liveness sit beside it. The search space is written in the paper's units and mapped to the preset
(`search_space`), so a 60-step smoke run never draws a 723-step warmup. Pruning reports at every validation (MT
training is step-based, not epoch-based); under DDP only rank 0 talks to the storage and its decision is broadcast,
so every rank stops at the same step. Optuna prunes single-objective studies only: with both objectives, trials run
to the end.

A diverged trial (the training's blow-up guard, or a dev PPL no better than a uniform guess over the vocabulary)
fails, and failed trials are never picked.
"""

from __future__ import annotations

import functools
import json
import math
import os
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import optuna
import yaml
from ablate.ablations.results.storage.opening import OBJECTIVES, named_study, open_storage, study_metrics
from ablate.ablations.results.storage.queue import Queue, recover_dead
from ablate.ablations.study.definition import SearchDim, Study
from ablate.ablations.study.presets import get_preset
from ablate.ablations.tracking import run_group
from ablate.ablations.training.callbacks import StepPruning
from ablate.ablations.training.train import train
from ablate.data.atomic import write_json_atomic
from ablate.data.errors import AblateError
from optuna.trial import TrialState


@dataclass
class TuneJob:
    study: Study
    row: str
    preset: str
    trials: int
    out: Path
    storage: str
    name: str
    extra: dict[str, dict[str, Any]]
    seed: int = 0
    objective: str = "bleu"
    """'bleu', 'ppl' or 'both' (studies.TUNE_OBJECTIVES)."""

    @property
    def metrics(self) -> tuple[str] | tuple[str, str]:
        return ("bleu", "ppl") if self.objective == "both" else (self.objective,)


def search_space(study: Study, preset: str) -> tuple[SearchDim, ...]:
    """The study's search space at `preset`: in a `scale: paper` study each range is in the paper's units and is
    mapped like the rows (`Preset.search_factor`); int ranges stay whole and at least one apart."""
    if study.scale != "paper":
        return study.search_space
    p = get_preset(preset)
    dims = []
    for dim in study.search_space:
        section, _, name = dim.name.partition(".")
        factor = p.search_factor(section, name)
        if dim.type == "categorical" or factor == 1.0:
            dims.append(dim)
            continue
        lowest, highest = dim.bounds
        low, high = lowest * factor, highest * factor
        if dim.type == "int":
            low = max(round(low), 1 if dim.log or lowest >= 1 else 0)
            high = max(round(high), low + 1)
        dims.append(SearchDim(name=dim.name, low=low, high=high, log=dim.log, type=dim.type))
    return tuple(dims)


def describe_space(dims: tuple[SearchDim, ...]) -> str:
    """'train.lr_factor 0.025..0.4 (log), model.p_drop 0..0.4': for the command's first line and best.yaml."""
    return ", ".join(
        f"{d.name} {list(d.choices)}"
        if d.type == "categorical"
        else f"{d.name} {d.low:g}..{d.high:g}" + " (log)" * d.log
        for d in dims
    )


def suggest(trial, dims: tuple[SearchDim, ...]) -> dict[str, dict[str, Any]]:
    """Section overrides {"train": {"lr_factor": ...}} drawn from the trial."""
    layer: dict[str, dict[str, Any]] = {}
    for dim in dims:
        if dim.type == "categorical":
            value = trial.suggest_categorical(dim.name, list(dim.choices))
        elif dim.type == "int":
            low, high = dim.bounds
            value = trial.suggest_int(dim.name, int(low), int(high), log=dim.log)
        else:
            low, high = dim.bounds
            value = trial.suggest_float(dim.name, float(low), float(high), log=dim.log)
        section, _, key = dim.name.partition(".")
        layer.setdefault(section, {})[key] = value
    return layer


def run_tune(job: TuneJob) -> dict[str, Any]:
    """Run trials until `job.trials` have finished (resumable); write best.yaml. Returns the best trial's summary."""
    sampler = optuna.samplers.TPESampler(seed=job.seed, n_startup_trials=min(5, job.trials))
    first_check = job.study.run_config(job.row, job.preset, job.seed, **job.extra).train.val_every
    if len(job.metrics) == 1:  # also StepPruning's
        pruner = optuna.pruners.MedianPruner(n_startup_trials=3, n_warmup_steps=first_check)
    else:
        pruner = optuna.pruners.NopPruner()
    storage = open_storage(job.storage)
    study = named_study(storage, job.name, job.metrics, sampler=sampler, pruner=pruner)
    have = study_metrics(study)
    if have != job.metrics:  # a search begun with another objective (or by another process with another one)
        said = " and ".join(OBJECTIVES[m][0] if m in OBJECTIVES else m for m in have) or "other objectives"
        again = "both" if len(have) == 2 else (have[0] if have else None)
        raise AblateError(
            f"{job.out}: this search optimises {said}, not {' and '.join(OBJECTIVES[m][0] for m in job.metrics)}; "
            + (f"continue it with --objective {again}, or " if again in ("bleu", "ppl", "both") else "")
            + "start a new one with another --out"
        )
    queue = Queue(storage, study)
    recover_dead(queue)
    finished = (optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED, optuna.trial.TrialState.FAIL)
    done = len(study.get_trials(deepcopy=False, states=finished))
    if job.trials > done:
        objective = functools.partial(_objective, job, queue, pruner)
        study.optimize(objective, n_trials=job.trials - done, catch=(Exception,), gc_after_trial=True)
    return _write_best(job, study)


def _objective(job: TuneJob, queue: Queue, pruner, trial) -> float | tuple[float, ...]:
    """Build the config from the trial, train it, return its objective value(s) (or raise TrialPruned)."""
    layer = suggest(trial, search_space(job.study, job.preset))
    # A search chooses on the dev set at the full budget: its trials leave the test split and the shorter budgets'
    # branches alone unless the user asks for them.
    base = {"train": {"test_eval": False, "budgets": []}}
    extra = {s: {**base.get(s, {}), **job.extra.get(s, {}), **layer.get(s, {})} for s in {*base, *job.extra, *layer}}
    run = job.study.run_config(job.row, job.preset, job.seed, **extra)
    trial.set_user_attr("host", socket.gethostname())
    trial.set_user_attr("pid", os.getpid())
    with queue.heartbeat(trial):
        result = train(
            run,
            job.out / "trials" / f"trial{trial.number:04d}",
            name=f"{job.row}-tune{trial.number}",
            group=run_group(job.study.name, job.preset, "-".join(filter(None, ["tune", job.row, run.tracking.label]))),
            tags=["tune", job.row, job.preset],
            started_at=time.time(),
            callbacks=[StepPruning(job.storage, job.name, queue.trial_id(trial), pruner, metric=job.metrics[0])]
            if len(job.metrics) == 1
            else [],
            resume=False,
            job_type="tune",
            extra_config={"study": job.study.name, "row": job.row, "preset": job.preset, "tune_trial": trial.number},
        )
    if "pruned_at_step" in queue.user_attrs(trial):
        raise optuna.TrialPruned()
    metrics = result.metrics if result is not None else {}
    for name in ("bleu", "ppl"):
        if metrics.get(name) is not None:
            trial.set_user_attr(name, float(metrics[name]))
    _check_converging(metrics, run.data.vocab_size)
    return tuple(float(metrics[m]) for m in job.metrics) if len(job.metrics) > 1 else float(metrics[job.metrics[0]])


def _check_converging(metrics: dict[str, Any], vocab_size: int) -> None:
    """Fail a trial that has no usable score: no dev BLEU or PPL, a non-finite one, or a dev PPL no better than a
    uniform guess over the vocabulary (a run that diverged without tripping the training guard)."""
    if metrics.get("bleu") is None or metrics.get("ppl") is None:
        raise RuntimeError("training produced no dev BLEU or PPL")
    if not all(math.isfinite(float(metrics[m])) for m in ("bleu", "ppl")):
        raise RuntimeError(f"diverged: dev BLEU {metrics['bleu']}, dev PPL {metrics['ppl']}")
    if float(metrics["ppl"]) >= vocab_size:
        raise RuntimeError(
            f"diverged: dev PPL {float(metrics['ppl']):.4g} is no better than a uniform guess over the "
            f"{vocab_size} subwords"
        )


PPL_SLACK = 1.1
"""With both objectives, the trials that compete on BLEU: dev PPL within this factor of the best one (about 0.1 nats
per token of cross-entropy)."""


def pick_best(trials: list[Any], metrics: tuple[str, ...]) -> Any | None:
    """The trial whose settings best.yaml gives, among complete trials (failed and diverged ones never count): the
    best value of the one objective; with both, the best dev BLEU among the trials whose dev PPL is within
    `PPL_SLACK` of the best PPL (ties: the lower PPL). PPL is the smooth signal the model trains on, BLEU the noisy
    one the paper reports: a BLEU won by a hair with twice the perplexity is luck, not a better recipe. The pick is
    on the Pareto front optuna-dashboard shows."""
    done = [t for t in trials if t.state == TrialState.COMPLETE and t.values is not None]
    if not done:
        return None
    if len(metrics) == 1:
        sign = -1.0 if OBJECTIVES[metrics[0]][1] == "maximize" else 1.0
        return min(done, key=lambda t: (sign * t.values[0], t.number))
    bleu, ppl = metrics.index("bleu"), metrics.index("ppl")
    best_ppl = min(t.values[ppl] for t in done)
    close = [t for t in done if t.values[ppl] <= PPL_SLACK * best_ppl]
    return min(close, key=lambda t: (-t.values[bleu], t.values[ppl], t.number))


def _write_best(job: TuneJob, study) -> dict[str, Any]:
    """best.yaml (overrides to pass to `ablate sweep --config`) and best.json; returns the summary."""
    trials = study.get_trials(deepcopy=False)
    best = pick_best(trials, job.metrics)
    if best is None:
        return {"best": None, "trials": len(trials)}
    overrides: dict[str, dict[str, Any]] = {}
    for name, value in best.params.items():
        section, _, key = name.partition(".")
        overrides.setdefault(section, {})[key] = value
    scores = {m: float(best.user_attrs[m]) for m in ("bleu", "ppl") if m in best.user_attrs}
    said = ", ".join(f"dev {m.upper()} {v:.2f}" for m, v in scores.items())
    (job.out / "best.yaml").write_text(
        f"# best of {len(trials)} trials for row {job.row} of {job.study.name} at preset {job.preset} "
        f"(objective: {job.objective}): {said} (trial {best.number})\n"
        f"# values at preset {job.preset}; searched: {describe_space(search_space(job.study, job.preset))}\n"
        f"# as the recipe of this row's base in a study of two bases (README, 'recipes'), in the study file:\n"
        f"#   recipes: {{NAME: {{{job.preset}: {json.dumps(overrides, sort_keys=True)}}}}}\n"
        + yaml.safe_dump(overrides, sort_keys=True),
        encoding="utf-8",
    )
    summary = {
        "best": best.number,
        "objective": job.objective,
        **scores,
        "params": best.params,
        "trials": len(trials),
        "failed": sum(t.state.name == "FAIL" for t in trials),
    }
    write_json_atomic(job.out / "best.json", summary)
    return summary
