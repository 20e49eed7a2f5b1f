"""Lightning callbacks that talk to the Optuna storage. Module-level and built from (storage URL, study, trial id)
so that they pickle into spawned DDP workers; only global rank 0 opens the storage."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import optuna
import pytorch_lightning as pl
from ablate.ablations.results.storage.opening import open_storage
from pytorch_lightning.trainer.states import TrainerFn

if TYPE_CHECKING:
    from ablate.lightning_modules.module import TranslationModule


class _StorageCallback(pl.Callback):
    def __init__(self, storage_url: str, study_name: str, trial_id: int) -> None:
        self.storage_url, self.study_name, self.trial_id = storage_url, study_name, trial_id
        self._study = None

    def _open_storage(self):
        if self._study is None:
            self._study = open_storage(self.storage_url)
        return self._study

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_study": None}  # storages hold locks and connections: reopen after pickling


class ProgressToStorage(_StorageCallback):
    """Publishes each validation's step, PPL and BLEU as the trial's 'progress' user attribute (the live view), and
    the main run's dev BLEU as an intermediate value at that step (optuna-dashboard's learning curves).

    The module's `budget` names the phase being trained: None in the main run, a shorter budget's label ("T/2")
    while its branch trains (the trainer's max_steps is then the branch's end)."""

    def on_validation_end(self, trainer: pl.Trainer, pl_module: TranslationModule) -> None:
        if not trainer.is_global_zero or trainer.sanity_checking:
            return
        val, budget = pl_module.last_validation, getattr(pl_module, "budget", None)
        progress = {
            "step": val.get("step"),
            "max_steps": trainer.max_steps,
            "ppl": val.get("ppl"),
            "bleu": val.get("bleu"),
            "budget": budget,
            "at": time.time(),  # when it landed: a view that starts later times the pace from it, not from its look
        }
        try:
            storage = self._open_storage()
            storage.set_trial_user_attr(self.trial_id, "progress", progress)
            # A branch's steps are the main run's too: its BLEU there would overwrite the main run's curve.
            if val.get("bleu") is not None and val.get("step") is not None and budget is None:
                storage.set_trial_intermediate_value(self.trial_id, int(val["step"]), float(val["bleu"]))
        except Exception:  # progress is a courtesy: a storage hiccup must not fail the trial
            pass


class StepPruning(_StorageCallback):
    """Reports dev BLEU (or the tuned `metric`) at every validation (MT training is step-based) and stops the run
    when `pruner` says so.
    Under DDP, rank 0 decides and broadcasts, so every rank stops at the same step.

    Optuna does not store a study's pruner, so the one the tuner built travels with the callback (it pickles)."""

    def __init__(self, storage_url: str, study_name: str, trial_id: int, pruner, metric: str = "bleu") -> None:
        super().__init__(storage_url, study_name, trial_id)
        self.pruner, self.metric = pruner, metric

    def _optuna_study(self):
        if self._study is None:
            self._study = optuna.load_study(
                study_name=self.study_name, storage=open_storage(self.storage_url), pruner=self.pruner
            )
        return self._study

    def on_validation_end(self, trainer: pl.Trainer, pl_module: TranslationModule) -> None:
        # During fit, validation runs with trainer.training False: check the entry point instead. Validations
        # outside fit (the final full-dev one) are not reported.
        if trainer.sanity_checking or trainer.state.fn != TrainerFn.FITTING:
            return
        prune = False
        if trainer.is_global_zero:
            val = pl_module.last_validation
            trial = optuna.Trial(self._optuna_study(), self.trial_id)
            if val.get(self.metric) is not None:
                trial.report(float(val[self.metric]), step=trainer.global_step)
            prune = trial.should_prune()
            if prune:
                trial.set_user_attr("pruned_at_step", trainer.global_step)
        if trainer.strategy.broadcast(prune, src=0):
            trainer.should_stop = True
