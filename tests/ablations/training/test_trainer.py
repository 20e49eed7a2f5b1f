"""How a run's config becomes its LightningModule on the hardware it names."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch
from ablate.ablations.study.config import build_run_config
from ablate.ablations.training.trainer import build_module

TOKENIZER = SimpleNamespace(vocab_size=100, pad_id=0, bos_id=2, eos_id=3)
SMALL = {"n_layers": 1, "d_model": 16, "d_ff": 32, "n_heads": 2}


@pytest.mark.parametrize(("accelerator", "kernels"), [("cpu", "cpu"), ("auto", "reference")])
def test_a_run_told_to_train_on_the_cpu_takes_the_cpu_kernels_where_a_gpu_is_visible(monkeypatch, accelerator, kernels):
    """'auto' kernels are CUDA's wherever a GPU is visible; `--hardware.accelerator cpu` on a GPU machine trains on
    the CPU, so it must get the routes measured faster there."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    run = build_run_config({"model": SMALL, "hardware": {"accelerator": accelerator}})
    assert build_module(run, TOKENIZER).model.kernels.name == kernels


def test_kernels_asked_for_by_name_are_kept_on_the_cpu():
    run = build_run_config({"model": {**SMALL, "kernels": "reference"}, "hardware": {"accelerator": "cpu"}})
    assert build_module(run, TOKENIZER).model.kernels.name == "reference"
