"""Hyperparameter search for one row: TPE over the study's search space, pruned per validation step.

The objective is short (build the config from the trial, fit, return dev BLEU); storage, pruning and liveness sit
beside it. Pruning reports at every validation (MT training is step-based, not epoch-based); under DDP only rank 0
talks to the storage and its decision is broadcast, so every rank stops at the same step.
"""

from __future__ import annotations

import os
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ablations.ledger import write_json_atomic
from ablations.storage import Queue, open_storage, recover_dead
from ablations.studies import SearchDim, Study


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


def suggest(trial, dims: tuple[SearchDim, ...]) -> dict[str, dict[str, Any]]:
    """Section overrides {"train": {"lr_factor": ...}} drawn from the trial."""
    layer: dict[str, dict[str, Any]] = {}
    for dim in dims:
        if dim.type == "categorical":
            value = trial.suggest_categorical(dim.name, list(dim.choices))
        elif dim.type == "int":
            value = trial.suggest_int(dim.name, int(dim.low), int(dim.high), log=dim.log)
        else:
            value = trial.suggest_float(dim.name, float(dim.low), float(dim.high), log=dim.log)
        section, _, key = dim.name.partition(".")
        layer.setdefault(section, {})[key] = value
    return layer


def run_tune(job: TuneJob) -> dict[str, Any]:
    """Run trials until `job.trials` have finished (resumable); write best.yaml. Returns the best trial's summary."""
    import functools

    import optuna

    sampler = optuna.samplers.TPESampler(seed=job.seed, n_startup_trials=min(5, job.trials))
    first_check = job.study.run_config(job.row, job.preset, job.seed, **job.extra).train.val_every
    pruner = optuna.pruners.MedianPruner(n_startup_trials=3, n_warmup_steps=first_check)  # also StepPruning's
    storage = open_storage(job.storage)
    study = optuna.create_study(
        study_name=job.name,
        storage=storage,
        direction="maximize",
        sampler=sampler,
        pruner=pruner,
        load_if_exists=True,
    )
    queue = Queue(storage, study)
    recover_dead(queue)
    finished = (optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED, optuna.trial.TrialState.FAIL)
    done = len(study.get_trials(deepcopy=False, states=finished))
    if job.trials > done:
        objective = functools.partial(_objective, job, queue, pruner)
        study.optimize(objective, n_trials=job.trials - done, catch=(Exception,), gc_after_trial=True)
    return _write_best(job, study)


def _objective(job: TuneJob, queue: Queue, pruner, trial) -> float:
    """Build the config from the trial, train it, return dev BLEU (or raise TrialPruned)."""
    import optuna

    from ablations.callbacks import StepPruning
    from ablations.train import train

    layer = suggest(trial, job.study.search_space)
    extra = {s: {**job.extra.get(s, {}), **layer.get(s, {})} for s in {*job.extra, *layer}}
    run = job.study.run_config(job.row, job.preset, job.seed, **extra)
    trial.set_user_attr("host", socket.gethostname())
    trial.set_user_attr("pid", os.getpid())
    with queue.heartbeat(trial):
        result = train(
            run,
            job.out / "trials" / f"trial{trial.number:04d}",
            name=f"{job.row}-tune{trial.number}",
            group=f"{job.study.name}-tune",
            tags=["tune", job.row, job.preset],
            started_at=time.time(),
            callbacks=[StepPruning(job.storage, job.name, queue.trial_id(trial), pruner)],
            resume=False,
            extra_config={"study": job.study.name, "row": job.row, "preset": job.preset, "tune_trial": trial.number},
        )
    if "pruned_at_step" in queue.user_attrs(trial):
        raise optuna.TrialPruned()
    if result is None or result.metrics.get("bleu") is None:
        raise RuntimeError("training produced no dev BLEU")
    return float(result.metrics["bleu"])


def _write_best(job: TuneJob, study) -> dict[str, Any]:
    """best.yaml (overrides to pass to `ablate sweep --config`) and best.json; returns the summary."""
    import yaml
    from optuna.trial import TrialState

    if not study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)):
        return {"best": None, "trials": len(study.trials)}
    best = study.best_trial
    overrides: dict[str, dict[str, Any]] = {}
    for name, value in best.params.items():
        section, _, key = name.partition(".")
        overrides.setdefault(section, {})[key] = value
    (job.out / "best.yaml").write_text(
        f"# best of {len(study.trials)} trials for row {job.row} of {job.study.name} at preset {job.preset}: "
        f"dev BLEU {best.value:.2f} (trial {best.number})\n" + yaml.safe_dump(overrides, sort_keys=True),
        encoding="utf-8",
    )
    summary = {"best": best.number, "bleu": best.value, "params": best.params, "trials": len(study.trials)}
    write_json_atomic(job.out / "best.json", summary)
    return summary
