"""One training run: data module + model + Lightning Trainer, then its shorter budgets and its test decoding.

Used by `ablate train` and by every sweep trial. `train` reads as the run goes: build the data, the model, the
recorder and the Trainer; fit (resumed from the run's last checkpoint: `ablations.training.trainer`); branch each
shorter budget from the fork the fit saved (`ablations.training.budget_branches`); decode the test split with the final
weights; close (the budgets join the result, the W&B run ends, checkpoints are pruned). Lightning runs the loop; rank 0
records curves, costs and scores as it goes (`ablations.training.recorder`) into the run's result.json
(`ablations.training.result`).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytorch_lightning as pl
from ablate.ablations.runtime import interrupt, stopping
from ablate.ablations.study.config import RunConfig
from ablate.ablations.tracking import make_wandb_logger
from ablate.ablations.training import checkpoints
from ablate.ablations.training.budget_branches import SaveForks, forget_budgets, score_budgets
from ablate.ablations.training.recorder import Recorder
from ablate.ablations.training.result import TrainResult, scored, write_outputs
from ablate.ablations.training.trainer import (
    accumulation,
    build_module,
    decode_test,
    finish_wandb,
    finished_result,
    fit,
    make_trainer,
    quiet_libraries,
    reached_max_steps,
)
from ablate.data.datamodule import TranslationDataModule


def train(
    run: RunConfig,
    out_dir: Path,
    *,
    name: str = "run",
    group: str | None = None,
    tags: list[str] | None = None,
    callbacks: list[pl.Callback] | None = None,
    started_at: float | None = None,
    wandb_id: str | None = None,
    resume: bool = True,
    extra_config: dict[str, Any] | None = None,
    prune: bool = True,
    job_type: str = "train",
) -> TrainResult | None:
    """Train one configuration to max_steps and return its dev metrics, and its test metrics when train.test_eval
    (the final weights decode the test split). Resumes from out_dir/checkpoints/last.ckpt when one exists (an
    interrupted trial continues exactly where it stopped: see ablations.training.checkpoints). With
    `prune`, the finished run's checkpoints are then cut to `train.keep_checkpoints` (a sweep prunes itself, once
    the trial's record is written)."""
    started_at = started_at or time.time()
    quiet_libraries()
    out_dir.mkdir(parents=True, exist_ok=True)
    # A stop is bounded and a hang names itself (runtime.stopping); stacks go to the run's folder from a terminal.
    stopping.configure(bound_s=run.hardware.stop_within_s, stall_s=run.hardware.stall_s, stacks=out_dir / "stacks.txt")
    pl.seed_everything(run.train.seed, workers=True, verbose=False)
    datamodule = TranslationDataModule(run.data)
    datamodule.prepare_data()
    module = build_module(run, datamodule.tokenizer)
    last = out_dir / "checkpoints" / "last.ckpt"
    finished = _earlier_session(out_dir, resume, run.train.max_steps)
    recorder = Recorder(out_dir, run.tracking.log_every, run.tracking.progress, started_at, label=f"[{name}] ")
    if finished is not None:
        recorder.resume_test(run.train.max_steps)
    logger = make_wandb_logger(
        run.tracking,
        save_dir=out_dir,
        name=name,
        group=group,
        tags=tags or [],
        config={**run.to_dict(), **(extra_config or {})},
        run_id=wandb_id,
        job_type=job_type,
    )
    trainer = make_trainer(run, out_dir, logger, recorder, [*(callbacks or []), SaveForks.of(run, last.parent)])
    with interrupt.graceful(), stopping.watching("starting the run"):
        module = fit(trainer, module, datamodule, last, recorder, validated=finished is not None)
        reached = reached_max_steps(last, run.train.max_steps)
        budgets = score_budgets(run, out_dir, datamodule, callbacks or [], name) if reached else []
        tested = finished is not None and "test_bleu" in finished.metrics
        if run.train.test_eval and not tested and reached:
            decode_test(trainer, module, datamodule)
    if budgets and trainer.is_global_zero:
        recorder.add_budgets(budgets, trainer.logger)
    # The W&B run ends here, after the test scores joined its summary, and in this process: under ddp_spawn it
    # belongs to the main process, and the spawned ranks of fit and test only attach to it.
    finish_wandb(exit_code=0)
    if prune and trainer.is_global_zero:
        checkpoints.prune(last.parent, run.train.keep_checkpoints)
    return recorder.final_result()


def _earlier_session(out_dir: Path, resume: bool, max_steps: int) -> TrainResult | None:
    """What an earlier session of this run left that this one builds on: its last.ckpt (kept when `resume`), and
    its result.json once training and the final validation had finished (returned; any other is removed). A run
    that starts from step 0 also forgets an earlier run's budget branches and forks: they are not its own."""
    last = out_dir / "checkpoints" / "last.ckpt"
    if not resume:
        last.unlink(missing_ok=True)
    if not last.exists():
        forget_budgets(out_dir)
    finished = finished_result(out_dir, last, max_steps)
    if finished is None:
        TrainResult.path(out_dir).unlink(missing_ok=True)
    return finished


# Re-exported where they were imported from before the split: `scored` (ablations.sweep.trial), `write_outputs`
# (tests/lightning_modules/test_learning.py), `accumulation` (tests/lightning_modules/test_recipe.py).
__all__ = ["TrainResult", "accumulation", "scored", "train", "write_outputs"]
