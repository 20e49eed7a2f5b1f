"""Fail in seconds, not at the first validation: before step 1, a run decodes one dev batch with its configured
decoder and runs one training step (forward and backward) of its largest batch, under the run's precision.

A configuration that cannot run on this device (a decoder, a kernel or a precision that breaks here, a batch that
does not fit in memory) then stops before any training with one line naming the setting to change, instead of at
step 5000 after minutes of a card. The check leaves no trace in the run: no optimizer step, gradients cleared, and
the random number generators restored, so a run trains to the same digits with it as without it.
"""

from __future__ import annotations

from typing import Any

import pytorch_lightning as pl
import torch
from ablate.data.errors import ConfigError
from torch import Tensor

DEV_ROWS = 8
"""Sentences of the dev batch decoded before step 1: those with the longest sources (the longest outputs)."""


class ConfigurationCannotRun(ConfigError):
    """A run's configuration failed its check before step 1 (`Preflight`): one line naming the setting to change."""


class Preflight(pl.Callback):
    """Runs the check of this module at the start of a fresh fit (step 0), on every rank."""

    def on_train_start(self, trainer: pl.Trainer, pl_module: Any) -> None:
        if trainer.global_step > 0:  # a resumed run or a budget branch: its configuration has trained already
            return
        datamodule = getattr(trainer, "datamodule", None)
        if datamodule is None:
            return
        device = pl_module.device
        rng = _rng_states(device)
        try:
            _decode_one_batch(trainer, pl_module, datamodule, device)
            _train_largest_batch(trainer, pl_module, device)
        finally:
            _restore_rng(rng, device)


def _decode_one_batch(trainer: pl.Trainer, module: Any, datamodule: Any, device: torch.device) -> None:
    """Decode the dev set's longest sources with the configured decoder, in eval mode, under the run's precision."""
    loader = datamodule.val_dataloader()
    batches = list(loader.batch_sampler)
    if not batches:
        return
    split = datamodule.corpus.split("valid")
    longest = max(batches, key=lambda b: max(int(split.src_len[i]) for i in b))
    rows = sorted(longest, key=lambda i: -int(split.src_len[i]))[:DEV_ROWS]
    src = loader.collate_fn(rows)["src"].to(device)
    was_training = module.training
    module.eval()
    try:
        with torch.no_grad(), trainer.precision_plugin.val_step_context():
            module.translate(src)
    except Exception as err:  # noqa: BLE001 - any failure of the decoder is this configuration's to report
        raise ConfigurationCannotRun(_said("decode", module, trainer, device, err)) from err
    finally:
        module.train(was_training)


def _train_largest_batch(trainer: pl.Trainer, module: Any, device: torch.device) -> None:
    """Forward and backward of this rank's largest training batch of the first epoch; the gradients are cleared."""
    loader: Any = trainer.train_dataloader
    sampler = getattr(loader, "batch_sampler", None)
    if sampler is None or not hasattr(sampler, "largest"):
        return
    batch = {k: v.to(device) if isinstance(v, Tensor) else v for k, v in loader.collate_fn(sampler.largest()).items()}
    try:
        with trainer.precision_plugin.train_step_context():
            total, _, _ = module._losses(batch)
        total.backward()
    except Exception as err:  # noqa: BLE001 - out of memory, a kernel or a precision that fails on this device
        raise ConfigurationCannotRun(_said("train", module, trainer, device, err, batch)) from err
    finally:
        for p in module.parameters():
            p.grad = None


def _said(stage: str, module: Any, trainer: pl.Trainer, device: torch.device, err: Exception, batch: Any = None) -> str:
    """One line: what failed, with what, and the setting to change."""
    cfg, cuda = module.train_config, device.type == "cuda"
    reason = f"{type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}".strip().rstrip(":")
    precision = str(trainer.precision)
    if stage == "decode":
        decoding = module.decoding(cuda)
        what = f"decoding one dev batch ({decoding} beam search, beam {cfg.beam_size}, precision {precision})"
        if decoding == "static":
            fix = "set --train.decoding dynamic"
        elif precision != "32-true":
            fix = "set --train.precision 32-true"
        else:
            fix = f"change model.kernels (now {module.model.kernels.name}) or train.beam_size"
    else:
        shape = "x".join(map(str, batch["src"].shape)) + " + " + "x".join(map(str, batch["tgt_in"].shape))
        what = f"one training step of the largest batch ({shape} tokens, precision {precision})"
        if isinstance(err, torch.OutOfMemoryError) or "out of memory" in str(err).lower():
            fix = "lower --data.tokens_per_batch (train.tokens_per_update keeps the tokens an update sees)"
        elif cfg.compile:
            fix = "set --train.compile false"
        elif precision != "32-true":
            fix = "set --train.precision 32-true"
        else:
            fix = f"change model.kernels (now {module.model.kernels.name})"
    return f"{what} failed before step 1 on {device.type} ({reason}): {fix}"


def _rng_states(device: torch.device) -> dict[str, Any]:
    return {
        "cpu": torch.get_rng_state(),
        "cuda": torch.cuda.get_rng_state(device) if device.type == "cuda" else None,
    }


def _restore_rng(states: dict[str, Any], device: torch.device) -> None:
    torch.set_rng_state(states["cpu"])
    if states["cuda"] is not None:
        torch.cuda.set_rng_state(states["cuda"], device)


__all__ = ["DEV_ROWS", "ConfigurationCannotRun", "Preflight"]
