"""StepPruning inside a real Lightning fit against a real journal storage: it reports at every validation during fit
and stops a trial that its pruner (not Optuna's default) rejects."""

from __future__ import annotations

import optuna
import pytorch_lightning as pl
import torch
from ablate.ablations.results.storage.opening import open_storage
from ablate.ablations.training.callbacks import StepPruning


class Scored(pl.LightningModule):
    """A module whose validations publish a fixed dev BLEU in `last_validation`, as TranslationModule does."""

    def __init__(self, bleu: float) -> None:
        super().__init__()
        self.layer = torch.nn.Linear(2, 1)
        self.bleu, self.last_validation = bleu, {}

    def training_step(self, batch, batch_idx):
        return self.layer(batch[0]).square().mean()

    def validation_step(self, batch, batch_idx):
        return None

    def on_validation_epoch_end(self) -> None:
        self.last_validation = {"bleu": self.bleu, "step": self.global_step}

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01)


def _fit(bleu: float, callback: StepPruning) -> pl.Trainer:
    data = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.randn(64, 2)), batch_size=2)
    trainer = pl.Trainer(
        max_steps=20,
        val_check_interval=5,
        limit_val_batches=1,
        num_sanity_val_steps=0,
        callbacks=[callback],
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    trainer.fit(Scored(bleu), train_dataloaders=data, val_dataloaders=data)
    return trainer


def test_step_pruning_reports_every_validation_and_stops_a_worse_trial(tmp_path):
    url = f"journal:{tmp_path / 'optuna.journal'}"
    # Two earlier trials as the pruner's baseline: Optuna's default MedianPruner would still be warming up (5).
    pruner = optuna.pruners.MedianPruner(n_startup_trials=2, n_warmup_steps=0)
    study = optuna.create_study(study_name="tune", storage=open_storage(url), direction="maximize", pruner=pruner)
    for _ in range(2):
        good = study.ask()
        for step in (5, 10, 15, 20):
            good.report(30.0, step)
        study.tell(good, 30.0)

    kept = study.ask()
    trainer = _fit(35.0, StepPruning(url, "tune", kept._trial_id, pruner))
    assert trainer.global_step == 20  # better than the median: runs to the end
    assert study._storage.get_trial(kept._trial_id).intermediate_values == {5: 35.0, 10: 35.0, 15: 35.0, 20: 35.0}

    worse = study.ask()
    trainer = _fit(1.0, StepPruning(url, "tune", worse._trial_id, pruner))
    frozen = study._storage.get_trial(worse._trial_id)
    assert trainer.global_step == 5  # stopped at the first validation
    assert frozen.intermediate_values == {5: 1.0}
    assert frozen.user_attrs["pruned_at_step"] == 5
