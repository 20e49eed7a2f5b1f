"""What a step costs the host on the card's path (`benchmarks/host.py`), counted on the CPU over whole steps through
the Lightning Trainer: no host sync in any step (a sync drains a card's queue of launched kernels), and a counter
that does see one when a step reads a value back."""

from __future__ import annotations

import dataclasses

import pytest
from ablate.ablations.study.definition import load_study
from ablate.benchmarks.host import host_costs
from ablate.lightning_modules.module import TranslationModule


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    study = load_study("table3")
    return study.run_config(study.rows[0], "smoke", 0)


@pytest.mark.parametrize("replayed", [False, True], ids=["defaults", "replayed-step"])
def test_a_step_on_the_cards_paths_reads_nothing_back_through_lightning(run, replayed):
    """The card's defaults and the replayed step (train.replay_step, its graph's body run eagerly here). Before:
    Lightning turned the progress-bar loss into a Python number every step (1 sync a step)."""
    run = dataclasses.replace(run, train=dataclasses.replace(run.train, replay_step=replayed))
    costs = host_costs(run, steps=12)
    assert costs["steps"] == 11
    assert costs["syncs_per_step"] == 0 and costs["most_syncs_in_a_step"] == 0, costs["sync_ops"]
    assert costs["kernels_per_step"] < costs["ops_per_step"] and costs["casts_per_step"] > 0  # bf16 autocast


def test_a_step_that_reads_its_loss_is_counted_as_one_sync_a_step(run, monkeypatch):
    step = TranslationModule.training_step

    def reading(self, batch, batch_idx):
        loss = step(self, batch, batch_idx)
        float(loss)  # what a per-step log line or a loss check on the host would do
        return loss

    monkeypatch.setattr(TranslationModule, "training_step", reading)
    costs = host_costs(run, steps=6)
    assert costs["syncs_per_step"] == 1 and costs["sync_ops"] == {"_local_scalar_dense": 5}, costs
