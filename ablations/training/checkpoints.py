"""Checkpoints a crash cannot tear, a resume that continues the very same run, and a bounded disk.

- `AtomicCheckpointIO`: Lightning's checkpoint plugin writing through the ledger's atomic writer (temp file in the
  same directory, fsync, rename). Lightning's own writes the file in place, so a full disk or a kill mid-save left
  a truncated `last.ckpt` that every later resume failed on.
- `usable`: a checkpoint is opened before a run resumes from it. One that cannot be read is set aside
  (`<name>.corrupt`) with a one-line warning, and the run starts over rather than failing forever.
- `ResumeState`: what Lightning does not keep but an exact resume needs. Lightning restores weights, optimizer,
  schedule and step counters; it does not restore the RNG (dropout masks) nor the position in the epoch's batch
  order (it restarts a plain loader's epoch from its first batch). Both go into every checkpoint and are restored
  before the first resumed step, so an interrupted and an uninterrupted run of one seed end with the same numbers.
  It also stops the run on Ctrl-C at a step boundary, with a checkpoint (`ablations.runtime.interrupt`).
- `prune`: the `train.keep_checkpoints` policy, applied to a finished run once its result is safely written.
"""

from __future__ import annotations

import os
import pickle
import random
import shutil
import sys
from pathlib import Path
from typing import Any

import ablate.lightning_modules.module  # noqa: F401 - registers the config classes stored in checkpoints as weights-only safe
import numpy as np
import pytorch_lightning as pl
import torch
from ablate.ablations.runtime import interrupt, stopping
from ablate.data.atomic import write_atomic
from lightning_fabric.plugins.io.torch_io import TorchCheckpointIO
from pytorch_lightning.callbacks import ModelCheckpoint
from pytorch_lightning.trainer.states import TrainerFn

STATE_KEY = "ablate_resume"
"""Where ResumeState keeps its part of a checkpoint."""


class AtomicCheckpointIO(TorchCheckpointIO):
    """torch.save into a temp file beside the target, fsync, rename: readers (and a resume) see the previous
    checkpoint or the new one, never a part of one."""

    def save_checkpoint(self, checkpoint: dict[str, Any], path, storage_options: Any | None = None) -> None:
        if storage_options is not None:
            raise TypeError(f"{type(self).__name__} takes no storage_options, got {storage_options!r}")
        write_atomic(Path(path), lambda fh: torch.save(checkpoint, fh))


def usable(path: Path) -> bool:
    """True if `path` is a checkpoint a run can resume from. An unreadable one (truncated by a crash before writes
    were atomic, or damaged since) is renamed to `<name>.corrupt` with one warning line, and False is returned."""
    if not path.is_file():
        return False
    try:
        checkpoint = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
        if not isinstance(checkpoint, dict) or "state_dict" not in checkpoint or "global_step" not in checkpoint:
            raise ValueError("not a Lightning checkpoint")
        return True
    except pickle.UnpicklingError as err:
        if "Unsupported global" in str(err):  # readable, but a class not allowed in a weights-only load: our bug
            raise
        return _set_aside(path, err)
    except Exception as err:  # noqa: BLE001 - any other failure to read it means: do not resume from it
        return _set_aside(path, err)


def _set_aside(path: Path, err: BaseException) -> bool:
    aside = path.with_name(path.name + ".corrupt")
    os.replace(path, aside)
    reason = " ".join(str(err).split())[:120] or type(err).__name__
    print(f"warning: checkpoint {path} cannot be read ({reason}); kept as {aside.name}, the run starts over",
          file=sys.stderr, flush=True)  # fmt: skip
    return False


def checkpoint_step(path: Path) -> int:
    """The global step a checkpoint was saved at (memory-mapped: the weights are not read)."""
    return int(torch.load(path, map_location="cpu", weights_only=True, mmap=True).get("global_step", 0))


def stop_requested(trainer: pl.Trainer) -> bool:
    """Whether any rank was asked to stop: a Ctrl-C, SLURM's warning signal or a SIGTERM (scancel; Lightning only
    notes that one, on a single process). Every rank gets the same answer, so all stop at the same batch."""
    if getattr(trainer, "received_sigterm", False):
        interrupt.request("SIGTERM (scancel, or the machine shutting down)")
    return trainer.strategy.reduce_boolean_decision(interrupt.requested(), all=False)


class ResumeState(pl.Callback):
    """Saves and restores the RNG states and the epoch position of the training batches; stops on Ctrl-C.

    Lightning calls callbacks in list order and model-checkpoint callbacks last, so the Recorder's state (curves,
    times) is current when a checkpoint is written."""

    def __init__(self, last: Path) -> None:
        self.last = last
        self.batches = 0
        """Training batches this rank has consumed in the current epoch (`epoch`)."""
        self.epoch = 0
        self._rng: dict[str, Any] | None = None
        self._step_before = -1
        self._stop_after_validation = False

    def on_train_epoch_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        # Lightning does not call this for the epoch a run resumes into (its count came from the checkpoint).
        self._start_epoch(trainer.current_epoch)

    def on_train_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._start_epoch(trainer.current_epoch)  # a checkpoint from an epoch's end resumes into the next one
        if self._rng is not None:  # as late as possible: nothing between here and the first step draws numbers
            set_rng_states(self._rng)
            self._rng = None

    def _start_epoch(self, epoch: int) -> None:
        if epoch != self.epoch:
            self.epoch, self.batches = epoch, 0

    def on_train_batch_start(self, trainer: pl.Trainer, *args: Any) -> None:
        self._step_before = trainer.global_step

    def on_train_batch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule, *args: Any) -> None:
        self.batches += 1
        if trainer.global_step == self._step_before:  # inside a gradient accumulation: not a step boundary
            return
        if not stop_requested(trainer):
            return
        if _validates_now(trainer, pl_module):  # stop after it: a resume would skip it, and its point on the curve
            self._stop_after_validation = True
            return
        trainer.save_checkpoint(self.last, weights_only=False)
        raise interrupt.Interrupted(trainer.global_step, self.last)

    def on_validation_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        """last.ckpt after every validation of the fit, the final one included. Written here, not by a
        ModelCheckpoint: Lightning's writes `last` only when it also keeps a top-k file, and one saved before the
        validation (at the step's end) would resume past it, losing its point on the curve."""
        if trainer.sanity_checking or trainer.state.fn != TrainerFn.FITTING:
            return
        last_batch = trainer.fit_loop.epoch_loop.batch_progress.is_last_batch
        if self.batches % trainer.accumulate_grad_batches and not last_batch and not self._stop_after_validation:
            return  # mid-accumulation (epochs not a multiple of it): the gradient so far is not in a checkpoint
        trainer.save_checkpoint(self.last, weights_only=False)
        stopping.saved(f"step {trainer.global_step} saved in {self.last}")  # what a stop's bound says is safe
        if self._stop_after_validation:
            raise interrupt.Interrupted(trainer.global_step, self.last)

    def on_save_checkpoint(self, trainer: pl.Trainer, pl_module: pl.LightningModule, checkpoint: dict) -> None:
        checkpoint[STATE_KEY] = {
            "rng": rng_states(),
            "epoch": trainer.current_epoch,
            "batches": self.batches,
        }

    def on_load_checkpoint(self, trainer: pl.Trainer, pl_module: pl.LightningModule, checkpoint: dict) -> None:
        state = checkpoint.get(STATE_KEY)
        if not state:  # a checkpoint from before exact resume: Lightning's own restore only
            return
        self._rng, self.batches, self.epoch = state["rng"], int(state["batches"]), int(state["epoch"])
        datamodule = getattr(trainer, "datamodule", None)
        if datamodule is not None and hasattr(datamodule, "resume_at"):
            datamodule.resume_at = (int(state["epoch"]), self.batches)


def _validates_now(trainer: pl.Trainer, pl_module: pl.LightningModule) -> bool:
    """Whether Lightning validates after this step: every train.val_every steps, and at max_steps."""
    every = getattr(getattr(pl_module, "train_config", None), "val_every", None)
    step = trainer.global_step
    return step >= trainer.max_steps or bool(every and step % every == 0)


def rng_states() -> dict[str, Any]:
    """torch (CPU and CUDA), numpy and Python RNG states, as types `torch.load(weights_only=True)` accepts (Lightning
    has `_collect_rng_states`, private and with a numpy array that a weights-only load refuses)."""
    state = np.random.get_state()
    assert isinstance(state, tuple)  # the legacy form: numpy's global generator is an MT19937
    kind, keys, pos, has_gauss, gauss = state
    return {
        "torch": torch.get_rng_state(),
        "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
        "numpy": [kind, torch.from_numpy(keys.astype(np.int64)), int(pos), int(has_gauss), float(gauss)],
        "python": random.getstate(),
    }


def set_rng_states(states: dict[str, Any]) -> None:
    torch.set_rng_state(states["torch"])
    # Only where the same devices are visible (a coordinator's checkpoint resumed in a one-GPU worker is not).
    if states["cuda"] and torch.cuda.is_available() and len(states["cuda"]) == torch.cuda.device_count():
        torch.cuda.set_rng_state_all(states["cuda"])
    kind, keys, pos, has_gauss, gauss = states["numpy"]
    np.random.set_state((kind, keys.numpy().astype(np.uint32), pos, has_gauss, gauss))
    version, state, gauss = states["python"]
    random.setstate((version, tuple(state), gauss))


def best_checkpoint(dirpath: Path) -> ModelCheckpoint:
    """Keeps the checkpoint of the best dev BLEU as best.ckpt (for `train.keep_checkpoints: best`)."""
    return ModelCheckpoint(
        dirpath=dirpath, filename="best", monitor="val/bleu", mode="max", save_top_k=1, auto_insert_metric_name=False
    )


def prune(checkpoints: Path, keep: str) -> None:
    """Apply the keep policy to a finished run's checkpoint directory: 'last' keeps last.ckpt, 'best' best.ckpt,
    'none' nothing (a CPU preset's trial is cheap to rerun; the paper preset's final weights are worth keeping)."""
    if not checkpoints.is_dir():
        return
    if keep == "none":
        shutil.rmtree(checkpoints, ignore_errors=True)
        return
    wanted = f"{keep}.ckpt"
    for path in checkpoints.iterdir():
        if path.name != wanted:
            path.unlink(missing_ok=True) if path.is_file() else shutil.rmtree(path, ignore_errors=True)


__all__ = ["AtomicCheckpointIO", "usable", "checkpoint_step", "ResumeState", "best_checkpoint", "prune"]
