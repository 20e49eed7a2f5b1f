"""Shorter budgets scored from the same run (train.budgets): the forks the main run saves, and the branches that
anneal from them.

A budget's branch leaves the main run at its fork step (`fork_step`: where the budget's cooldown begins), so up to
there its schedule is the main run's. `SaveForks` saves the main run's exact state there (`fork-<step>.ckpt`);
once the main run has reached max_steps, `score_budgets` trains each branch from its fork to the budget in
<run>/b<steps>/ and scores it like the whole run (final full-dev validation, test decoding). A branch is resumable
like any run, and one already scored (its result.json) is read, not trained again.
"""

from __future__ import annotations

import shutil
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytorch_lightning as pl
from ablate.ablations.statistics.budgets import budget_label
from ablate.ablations.study.config import RunConfig
from ablate.ablations.training import checkpoints
from ablate.ablations.training.recorder import Recorder
from ablate.ablations.training.result import TrainResult
from ablate.ablations.training.trainer import build_module, decode_test, finished_result, fit, make_trainer
from ablate.data.atomic import write_atomic
from ablate.data.errors import AblateError
from ablate.lightning_modules.config import budget_steps, fork_step
from lightning_fabric.utilities.rank_zero import rank_zero_only


class SaveForks(pl.Callback):
    """Saves the run's exact state (weights, optimizer, schedule, RNG, batch position: `checkpoints.ResumeState`)
    as `fork-<step>.ckpt` at each step where a shorter budget's branch leaves the main run (train.budgets). Up to
    there the branch's schedule is the main run's, so a branch resumed from it equals a separate run trained to its
    budget. Runs after ResumeState, whose batch count then includes this step's batch."""

    def __init__(self, directory: Path, steps: set[int]) -> None:
        self.directory, self.steps = directory, steps
        self._step_before = -1

    @classmethod
    def of(cls, run: RunConfig, directory: Path) -> SaveForks:
        """The forks of the run's budgets (train.budgets), saved in its checkpoint `directory`."""
        return cls(directory, {fork_step(run.train.max_steps, f, run.train.cooldown_frac) for f in run.train.budgets})

    def on_train_start(self, trainer: pl.Trainer, *args: Any) -> None:
        """A run resumed exactly at a fork step (stopped there, before this callback saved it) saves it now: the
        state just restored is the fork's. One resumed past a fork that was never saved cannot branch: it says so
        now rather than after training. Rank 0 decides for all (every rank must call save_checkpoint or none)."""
        step = trainer.global_step
        missing = {s for s in self.steps if s <= step and not fork_path(self.directory, s).exists()}
        missing = trainer.strategy.broadcast(missing, src=0)
        if step in missing:
            trainer.save_checkpoint(fork_path(self.directory, step), weights_only=False)
        elif missing:
            raise AblateError(
                f"{fork_path(self.directory, min(missing))} is missing and this run has passed that step (was "
                f"train.max_steps changed?), so its budget cannot be branched: delete {self.directory.parent} to "
                "train it again, or set train.budgets to [] to score the whole budget alone"
            )

    def on_train_batch_start(self, trainer: pl.Trainer, *args: Any) -> None:
        self._step_before = trainer.global_step

    def on_train_batch_end(self, trainer: pl.Trainer, *args: Any) -> None:
        step = trainer.global_step
        if step in self.steps and step != self._step_before:  # an update ended here, not a batch mid-accumulation
            # Every rank calls it (it ends in a barrier); rank 0 writes.
            trainer.save_checkpoint(fork_path(self.directory, step), weights_only=False)


def fork_path(directory: Path, step: int) -> Path:
    return directory / f"fork-{step}.ckpt"


def forget_budgets(out_dir: Path) -> None:
    """Remove the budget branches (b<steps>/) and fork checkpoints of an earlier run in out_dir."""
    for path in [*out_dir.glob("b[0-9]*"), *(out_dir / "checkpoints").glob("fork-*.ckpt")]:
        shutil.rmtree(path, ignore_errors=True) if path.is_dir() else path.unlink(missing_ok=True)


def score_budgets(
    run: RunConfig, out_dir: Path, datamodule, callbacks: list[pl.Callback], name: str = ""
) -> list[dict[str, Any]]:
    """Every shorter budget of the run (train.budgets), each trained and scored by its branch (`score_budget`);
    `name` (the run's, e.g. 'base-s0') begins each branch's progress lines."""
    return [score_budget(run, out_dir, fraction, datamodule, callbacks, name) for fraction in run.train.budgets]


def score_budget(
    run: RunConfig, out_dir: Path, fraction: float, datamodule, callbacks: list[pl.Callback], name: str = ""
) -> dict[str, Any]:
    """Train and score one shorter budget: its cooldown, as a branch from the main run's fork checkpoint (or from
    the branch's own last checkpoint, when a branch was interrupted), then the final full-dev validation and the test
    decoding, as for the whole run. W&B stays with the main run, whose summary gets the branch's scores. A branch
    already scored (its result.json) is read, not trained again. Returns TrainResult.budgets' entry."""
    steps = budget_steps(run.train.max_steps, fraction)
    fork = fork_step(run.train.max_steps, fraction, run.train.cooldown_frac)
    branch_dir = out_dir / f"b{steps}"
    last = branch_dir / "checkpoints" / "last.ckpt"
    # A branch scored without its test (train.test_eval was off) whose weights are gone stays as it was scored.
    done = _branch_result(branch_dir, steps, run.train.test_eval and last.exists())
    if done is None:
        branch = replace(run, train=replace(run.train, max_steps=steps, budgets=(), keep_checkpoints="none"))
        resumable = checkpoints.usable(last) if rank_zero_only.rank == 0 else last.exists()  # as in trainer.fit
        if not resumable:
            source = fork_path(out_dir / "checkpoints", fork)
            if not source.is_file():
                raise AblateError(
                    f"{source} is missing, so budget {fraction:g} (step {steps}) cannot be branched from this run: "
                    f"delete {out_dir} to train the trial again"
                )
            # The branch's own copy (its checkpoints move on, the fork stays), atomic: DDP ranks may copy at once.
            write_atomic(last, lambda fh: fh.write(source.read_bytes()))
        done = _train_branch(branch, branch_dir, datamodule, callbacks, budget_label(fraction), fork, name)
    return {
        "fraction": fraction,
        "steps": steps,
        "metrics": done.metrics,
        "hypotheses": done.hypotheses,
        "sentences": done.sentences,
        "test_hypotheses": done.test_hypotheses,
    }


def _branch_result(branch_dir: Path, steps: int, test_eval: bool) -> TrainResult | None:
    """A branch's result.json once it is whole: trained to its budget, validated, and test-decoded if asked."""
    try:
        result = TrainResult.read(branch_dir)
    except Exception:  # noqa: BLE001 - no file or a damaged one: the branch runs (again)
        return None
    whole = result.metrics.get("steps", 0) >= steps and (not test_eval or "test_bleu" in result.metrics)
    return result if whole else None


def _train_branch(
    run: RunConfig, out_dir: Path, datamodule, callbacks: list[pl.Callback], label: str, fork: int, name: str
) -> TrainResult:
    """The branch's fit (resumed from out_dir/checkpoints/last.ckpt) and test, without a logger of its own."""
    module = build_module(run, datamodule.tokenizer)
    module.budget = label  # the caller's callbacks (the live view's progress) name the phase from it
    last = out_dir / "checkpoints" / "last.ckpt"
    prefix = f"[{name} {label}] " if name else f"[{label}] "  # '[base-s0 T/2] ': the trial, then the budget
    recorder = Recorder(out_dir, run.tracking.log_every, run.tracking.progress, time.time(), prefix, fork)
    trainer = make_trainer(run, out_dir, False, recorder, callbacks)
    validated = finished_result(out_dir, last, run.train.max_steps) is not None  # stopped in its test
    if validated:
        recorder.resume_test(run.train.max_steps)
    module = fit(trainer, module, datamodule, last, recorder, validated=validated)
    if run.train.test_eval:
        decode_test(trainer, module, datamodule)
    if not trainer.is_global_zero:  # only rank 0 writes and reads results; train() keeps rank 0's
        return TrainResult(metrics={}, curves={}, hypotheses=[], references=[])
    checkpoints.prune(last.parent, "none")  # the branch is scored: its result.json is all a resume needs
    return recorder.result or TrainResult.read(out_dir)  # a spawned rank 0 (ddp_spawn) left it on disk


__all__ = ["SaveForks", "fork_path", "forget_budgets", "score_budget", "score_budgets"]
