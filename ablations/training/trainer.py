"""The Lightning Trainer of one run, and the fit and the test decoding through it.

`make_trainer` builds it from the `RunConfig`: step-based, validating and checkpointing every train.val_every
updates, stopping at max_steps with a final full-dev validation (`FinalValidation`). `fit` resumes from the run's
last checkpoint (ablations.training.checkpoints), and `finished_result` tells a run whose training had finished from one
that must train. Under ddp every rank runs these; only rank 0 records (`ablations.training.recorder`).
"""

from __future__ import annotations

import logging
import math
import os
import sys
import warnings
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytorch_lightning as pl
import torch
from ablate.ablations.runtime import interrupt, stopping
from ablate.ablations.study.config import RunConfig
from ablate.ablations.training import checkpoints, weights
from ablate.ablations.training.recorder import Recorder
from ablate.ablations.training.result import TrainResult
from ablate.data.cache import cache_root
from ablate.data.errors import ConfigError
from ablate.lightning_modules.config import ModelConfig, Precision, on_cpu
from ablate.lightning_modules.config import resolve_precision as precision_for
from ablate.lightning_modules.module import CheckpointAveraging, TranslationModule
from ablate.lightning_modules.preflight import Preflight
from lightning_fabric.plugins.environments.slurm import SLURMEnvironment
from lightning_fabric.utilities.exceptions import MisconfigurationException
from lightning_fabric.utilities.warnings import PossibleUserWarning


# ------------------------------------------------------------------------------------------------------ building
def quiet_libraries() -> None:
    """Keep trial logs to our progress lines: Lightning's banners and tips ("GPU available", "Tip: ..."), a
    deprecation warning from Lightning's pytree helper, its warning about resuming mid-epoch, its hint to use `srun`
    outside a SLURM job (W&B's notice about Lightning's `anonymous` argument is handled in tracking). Real warnings
    and errors still show."""
    logging.getLogger("pytorch_lightning.utilities.rank_zero").setLevel(logging.WARNING)
    logging.getLogger("lightning_fabric.utilities.rank_zero").setLevel(logging.WARNING)
    warnings.filterwarnings("ignore", message=r".*isinstance\(treespec, LeafSpec\).*")
    warnings.filterwarnings("ignore", message=r".*does not have many workers.*")
    # The batch sampler resumes mid-epoch itself (checkpoints.ResumeState), which Lightning cannot see.
    warnings.filterwarnings("ignore", message=r".*your dataloader is not resumable.*")
    if "SLURM_JOB_ID" not in os.environ:
        # Lightning's own SLURM handling, whichever launcher started this run (`ablate train` in a user's own batch
        # script too). Outside a SLURM job ablate trains here on purpose (--launcher slurm starts its tasks with
        # srun), yet Lightning's SLURMEnvironment.detect() hints at `srun` whenever the command exists on the
        # machine. Inside a job the hint stays: there a missing srun is the real mistake it warns of.

        warnings.filterwarnings("ignore", message=r"The `srun` command is available", category=PossibleUserWarning)
    os.environ.setdefault("WANDB_SILENT", "true")


def fit_to_tokenizer(model: ModelConfig, tokenizer) -> ModelConfig:
    """The model's vocabulary size and padding id as the tokenizer has them: the one place they are reconciled."""
    return replace(model, vocab_size=tokenizer.vocab_size, pad_id=tokenizer.pad_id)


def build_module(run: RunConfig, tokenizer) -> TranslationModule:
    """The run's LightningModule, its model sized to the tokenizer."""
    model = fit_to_tokenizer(run.model, tokenizer)
    if run.hardware.accelerator == "cpu" and not run.train.compile:  # compiled: the reference kernels (for_compile)
        model = on_cpu(model)
    return TranslationModule(model, run.train, bos_id=tokenizer.bos_id, eos_id=tokenizer.eos_id)


def resolve_precision(run: RunConfig) -> Precision:
    """The run's precision (`lightning_modules.config.resolve_precision`), on a GPU when its accelerator allows."""
    on_gpu = run.hardware.accelerator in ("auto", "gpu", "cuda") and torch.cuda.is_available()
    return precision_for(run.train.precision, cuda_bf16=on_gpu and torch.cuda.is_bf16_supported())


def accumulation(run: RunConfig, world_size: int) -> int:
    """Batches per optimizer update so that an update sees about train.tokens_per_update tokens (section 5.1)."""
    if not run.train.tokens_per_update:
        return 1
    return max(1, math.ceil(run.train.tokens_per_update / (run.data.tokens_per_batch * world_size)))


def world_size(run: RunConfig) -> int:
    """The processes the run trains on: devices per node (hardware.devices: a count, a list, or every GPU here)
    times nodes."""
    devices = run.hardware.devices
    if isinstance(devices, int):
        per_node = devices
    elif isinstance(devices, str) and devices.isdigit():
        per_node = int(devices)
    elif isinstance(devices, str) and "," in devices:
        per_node = len([d for d in devices.split(",") if d.strip()])
    else:
        per_node = max(torch.cuda.device_count(), 1)
    return max(per_node, 1) * run.hardware.num_nodes


def make_trainer(run: RunConfig, out_dir: Path, logger, recorder: Recorder, callbacks: list[pl.Callback]) -> pl.Trainer:
    """The Lightning Trainer of one run: step-based, validating every train.val_every updates, checkpointing there."""
    # ResumeState writes last.ckpt after every validation (atomically: AtomicCheckpointIO), after the Recorder.
    directory = out_dir / "checkpoints"
    cbs: list[pl.Callback] = [
        Heartbeat(compiled=run.train.compile),  # first: it names the phase before the others' hooks run
        Preflight(),
        FinalValidation(),
        recorder,
        checkpoints.ResumeState(directory / "last.ckpt"),
    ]
    cbs.append(StopTestOnSignal(directory / "last.ckpt"))
    cbs.append(weights.FinalWeights(out_dir / weights.FILE))  # what `ablate translate` decodes with
    if run.train.keep_checkpoints == "best":
        cbs.append(checkpoints.best_checkpoint(directory))
    cbs += callbacks
    if run.train.average_last > 1:
        cbs.append(CheckpointAveraging(run.train.average_last))
    accum = accumulation(run, world_size(run))
    if run.train.replay_step and (accum > 1 or world_size(run) > 1):
        raise ConfigError(
            f"train.replay_step replays one device's whole step: this run has {world_size(run)} device(s) and "
            f"accumulates {accum} batches a step; set train.replay_step false, or raise data.tokens_per_batch"
        )
    if run.train.compile:  # compiled graphs persist beside the data cache: the next trial of this model starts warm
        os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", str(cache_root(run.data.cache_dir) / "inductor"))
    try:
        return _trainer(run, out_dir, logger, cbs, accum)
    except MisconfigurationException as err:  # Lightning's words for a machine that cannot run these settings
        raise _hardware_error(run, err) from None


def check_hardware(run: RunConfig) -> None:
    """Whether this machine can run `run`'s hardware settings, as Lightning's Trainer judges them (no callbacks, no
    logger, nothing written): ConfigError as `make_trainer` raises, else nothing. What a sweep of local workers asks
    before any trial starts: every trial would fail the same way."""
    # Quiet: Lightning's lines about the accelerators found ("GPU available: False", the srun hint) are the trials'
    # to print, in their logs.
    loggers = [logging.getLogger(name) for name in ("pytorch_lightning", "lightning_fabric", "lightning")]
    levels = [logger.level for logger in loggers]
    try:
        for logger in loggers:
            logger.setLevel(logging.ERROR)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            pl.Trainer(accelerator=run.hardware.accelerator, devices=run.hardware.devices,
                       num_nodes=run.hardware.num_nodes, strategy=run.hardware.strategy, logger=False,
                       enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False)  # fmt: skip
    except MisconfigurationException as err:
        raise _hardware_error(run, err) from None
    finally:
        for logger, level in zip(loggers, levels, strict=True):
            logger.setLevel(level)


def _hardware_error(run: RunConfig, err: Exception) -> ConfigError:
    hw = run.hardware
    return ConfigError(
        f"hardware.accelerator {hw.accelerator!r}, hardware.devices {hw.devices!r}, hardware.strategy "
        f"{hw.strategy!r}: {' '.join(str(err).split())} Set --hardware.accelerator cpu (or auto), or devices this "
        "machine has"
    )


def _trainer(run: RunConfig, out_dir: Path, logger, cbs: list[pl.Callback], accum: int) -> pl.Trainer:
    return pl.Trainer(
        accelerator=run.hardware.accelerator,
        devices=run.hardware.devices,
        num_nodes=run.hardware.num_nodes,
        strategy=run.hardware.strategy,
        precision=resolve_precision(run),
        max_steps=run.train.max_steps,
        max_epochs=-1,
        val_check_interval=run.train.val_every * accum,
        check_val_every_n_epoch=None,
        accumulate_grad_batches=accum,
        gradient_clip_val=run.train.grad_clip,
        log_every_n_steps=run.tracking.log_every,
        num_sanity_val_steps=0,
        use_distributed_sampler=False,  # the token-budget batch sampler shards by rank itself
        enable_progress_bar=False,  # Recorder prints one line with steps, loss, tokens/s and ETA
        enable_model_summary=False,
        enable_checkpointing=run.train.keep_checkpoints == "best",  # else no ModelCheckpoint: ResumeState saves
        logger=logger,
        callbacks=cbs,
        plugins=[checkpoints.AtomicCheckpointIO(), *_cluster_plugins()],
        default_root_dir=str(out_dir),
    )


def _cluster_plugins() -> list[Any]:
    """Under SLURM, Lightning's SLURM environment (which Lightning detects itself) without its own requeue: a job
    is requeued by its launcher (ablations.launchers.slurm: submitit, on the USR2 it asks for) after the trial saved
    itself; two requeues would race."""
    return [SLURMEnvironment(auto_requeue=False)] if SLURMEnvironment.detect() else []


class Heartbeat(pl.Callback):
    """What the run is doing, for a stop's bound and the watchdog (`runtime.stopping`), and its progress: each
    training step, validation batch and test batch is a beat. The check before step 1 (Preflight, next in the list)
    runs in `on_train_start`, the compile inside it: a hang there names `--train.compile false`."""

    def __init__(self, compiled: bool = False) -> None:
        self.compiled = compiled

    def setup(self, trainer: pl.Trainer, pl_module: pl.LightningModule, stage: str) -> None:
        self.on_train_start(trainer)  # the model is built (and compiled) next, in configure_model

    def on_train_start(self, trainer: pl.Trainer, *args: Any) -> None:
        if self.compiled:
            stopping.doing("compiling the model and checking it before step 1", hint="set --train.compile false")
        else:
            stopping.doing("checking the run before step 1")

    def on_train_batch_start(self, trainer: pl.Trainer, *args: Any) -> None:
        if self.compiled and trainer.global_step == 0:  # torch.compile compiles on the model's first call
            stopping.doing("training step 1, compiling the model", hint="set --train.compile false")
        else:
            stopping.doing(f"training step {trainer.global_step + 1}")

    def on_train_batch_end(self, trainer: pl.Trainer, *args: Any) -> None:
        stopping.beat()

    def on_validation_start(self, trainer: pl.Trainer, *args: Any) -> None:
        stopping.doing(f"validating at step {trainer.global_step} (decoding the dev set)")

    def on_validation_batch_end(self, trainer: pl.Trainer, *args: Any) -> None:
        stopping.beat()

    def on_test_start(self, trainer: pl.Trainer, *args: Any) -> None:
        stopping.doing("decoding the test split")

    def on_test_batch_end(self, trainer: pl.Trainer, *args: Any) -> None:
        stopping.beat()


class FinalValidation(pl.Callback):
    """Ends training at max_steps through `should_stop`, which makes Lightning validate at that step, and lifts the
    BLEU sentence limit for that last validation so the reported BLEU covers the whole dev set."""

    def on_train_batch_end(self, trainer: pl.Trainer, pl_module: TranslationModule, *args: Any) -> None:
        if trainer.global_step >= trainer.max_steps:
            trainer.should_stop = True
            pl_module.final_validation = True
            if pl_module.train_config.final_full_validation:
                pl_module.bleu_limit = None


class StopTestOnSignal(pl.Callback):
    """Ctrl-C, SLURM's warning or SIGTERM during the test decoding stops it after the running batch, on every rank
    together. Training has finished, so nothing needs saving: last.ckpt holds the final weights and result.json the
    dev result, and the resumed run only decodes the test split again (`finished_result`)."""

    def __init__(self, last: Path) -> None:
        self.last = last

    def on_test_batch_end(self, trainer: pl.Trainer, *args: Any) -> None:
        if checkpoints.stop_requested(trainer):
            raise interrupt.Interrupted(
                saved=f"training had finished (final weights in {self.last}); the test decoding runs again on resume"
            )


# ------------------------------------------------------------------------------------------------ fit and test
def fit(
    trainer: pl.Trainer, module, datamodule, last: Path, recorder: Recorder, *, validated: bool = False
) -> TranslationModule:
    """Fit from the last checkpoint if there is one. A run whose training finished but whose final validation did
    not (the process died) only validates the saved weights; one whose final validation finished too (`validated`:
    its result.json stands) only loads them, for the test decoding that follows in `train`. Returns the module
    holding the final weights."""
    resumable = checkpoints.usable(last) if trainer.is_global_zero else last.exists()
    step = checkpoints.checkpoint_step(last) if resumable else 0
    if resumable and step >= trainer.max_steps:
        module = _final_module(module, last)
        _keep_weights(trainer, module, datamodule)  # a run that stopped after its training keeps them too
        if validated:
            return module
        module.bleu_limit, module.final_validation = None, True
        checkpoint = torch.load(last, map_location="cpu", weights_only=True, mmap=True)
        # The fit loop's progress as saved (Lightning restores it for fit only): the validation's point on the
        # curve and the record's steps are then the checkpoint's step, not 0.
        trainer.fit_loop.load_state_dict(checkpoint["loops"]["fit_loop"])
        saved = checkpoint.get("callbacks", {})
        if recorder.state_key in saved:  # the run's curves and times, as for any resume
            recorder.load_state_dict(saved[recorder.state_key])
            recorder.resumes.append(trainer.max_steps)
        trainer.validate(module, datamodule=datamodule, ckpt_path=None, verbose=False)
        recorder.on_fit_end(trainer, module)
        return module
    if resumable and trainer.is_global_zero:
        recorder.say(f"resuming at step {step} of {trainer.max_steps} from {last}")
    try:
        trainer.fit(module, datamodule=datamodule, ckpt_path=str(last) if resumable else None, weights_only=True)
    except BaseException:
        finish_wandb(exit_code=1)  # else the next trial in this process would log into this run
        raise
    return module


def _keep_weights(trainer: pl.Trainer, module: TranslationModule, datamodule) -> None:
    """The final weights' file (`weights.FinalWeights`), where the fit that reached max_steps ended before it."""
    for callback in trainer.callbacks:  # pyright: ignore[reportAttributeAccessIssue]  # set in Trainer.__init__
        if isinstance(callback, weights.FinalWeights) and not callback.path.exists() and trainer.is_global_zero:
            datamodule.prepare_data()
            weights.save(callback.path, module, datamodule.tokenizer, trainer.max_steps or 0)


def _final_module(module: TranslationModule, last: Path) -> TranslationModule:
    """The module of a finished run, loaded from its last checkpoint, in the phase `module` was (its budget)."""
    loaded = TranslationModule.load_from_checkpoint(last, map_location="cpu", weights_only=True)
    loaded.budget = module.budget
    return loaded


def finished_result(run_dir: Path, last: Path, max_steps: int) -> TrainResult | None:
    """The result.json of an earlier session of this run whose training and final validation had finished (it and
    last.ckpt are at max_steps), or None. A process that died in the test decoding, or before its sweep wrote the
    record, resumes from it: the dev result stands, only the test split is decoded again. Every rank reads the same
    files (the result is deleted only where this says None), so all ranks take the same path."""
    try:
        result = TrainResult.read(run_dir)
        done = result.metrics.get("steps", 0) >= max_steps and checkpoints.checkpoint_step(last) >= max_steps
    except Exception:  # noqa: BLE001 - no file, a damaged one, no checkpoint: nothing to resume from but training
        return None
    return result if done else None


def reached_max_steps(last: Path, max_steps: int) -> bool:
    """Whether training reached max_steps (a pruned tuning trial stops before), read from the final checkpoint that
    every validation writes: each rank, and the main process of ddp_spawn (whose trainer never counted the steps),
    reads the same answer, so all of them call `trainer.test` or none."""
    return last.is_file() and checkpoints.checkpoint_step(last) >= max_steps


def decode_test(trainer: pl.Trainer, module: TranslationModule, datamodule) -> None:
    """Decode the test split with the final (or averaged: CheckpointAveraging loaded them before the final
    validation) weights, through Lightning's test loop on every rank; `Recorder.on_test_end` records the scores."""
    try:
        trainer.test(module, datamodule=datamodule, verbose=False)
    except BaseException:
        finish_wandb(exit_code=1)
        raise


def finish_wandb(exit_code: int) -> None:
    """End this process's W&B run, if one is open."""
    wandb = sys.modules.get("wandb")
    if wandb is not None and wandb.run is not None:
        wandb.run.finish(exit_code=exit_code)


__all__ = [
    "accumulation",
    "build_module",
    "decode_test",
    "finished_result",
    "fit",
    "fit_to_tokenizer",
    "make_trainer",
    "quiet_libraries",
    "reached_max_steps",
    "resolve_precision",
    "world_size",
]
