"""One training run: data module + model + Lightning Trainer, with checkpoint resume, progress and a result file.

Used by `ablate train` and by every sweep trial. Lightning runs the loop; the callbacks here only stop at max_steps
with a final full-dev validation, print progress, and collect curves and costs on rank 0. Then (train.test_eval)
Lightning's test loop decodes the test split with the final weights and the record gets its test scores.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import shutil
import socket
import sys
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pytorch_lightning as pl
import torch
from ablate.ablations import checkpoints, environment, interrupt
from ablate.ablations.config import RunConfig
from ablate.ablations.ledger import write_atomic, write_json_atomic, write_text_atomic
from ablate.ablations.record import Budget, Layout, Record, budget_label, key_of
from ablate.ablations.tracking import make_wandb_logger
from ablate.data.datamodule import TranslationDataModule
from ablate.data.errors import AblateError
from ablate.lightning_modules.config import ModelConfig, budget_steps, fork_step
from ablate.lightning_modules.module import CheckpointAveraging, TranslationModule
from lightning_fabric.utilities.rank_zero import rank_zero_only


@dataclass
class TrainResult:
    """What one finished run produced (rank 0's view)."""

    metrics: dict[str, Any]
    curves: dict[str, list[dict[str, Any]]]
    hypotheses: list[str]
    references: list[str]
    wandb: dict[str, Any] = field(default_factory=dict)
    sentences: dict[str, list[float]] = field(default_factory=dict)
    """Per dev sentence, in dev order: 'nll' (summed over its target tokens) and 'ntok'."""
    test_hypotheses: list[str] = field(default_factory=list)
    """The test split decoded by the final (or averaged) weights, in test order; empty when not decoded
    (train.test_eval off, or a run stopped before max_steps)."""
    test_references: list[str] = field(default_factory=list)
    """The raw test references, same order; empty when the test split was not decoded."""
    budgets: list[dict[str, Any]] = field(default_factory=list)
    """The shorter budgets of train.budgets, each scored by its own annealed branch of the run: {'fraction',
    'steps', 'metrics', 'hypotheses', 'sentences', 'test_hypotheses'}, the fields above at that budget."""


def resolve_precision(run: RunConfig) -> str:
    """'auto' -> bf16 mixed precision on a bf16-capable GPU, fp32 elsewhere (bf16 is ~3x slower on most CPUs)."""
    if run.train.precision != "auto":
        return run.train.precision
    on_gpu = run.hardware.accelerator in ("auto", "gpu", "cuda") and torch.cuda.is_available()
    return "bf16-mixed" if on_gpu and torch.cuda.is_bf16_supported() else "32-true"


def device_name(trainer: pl.Trainer) -> str:
    if trainer.strategy.root_device.type == "cuda":
        name = torch.cuda.get_device_name(trainer.strategy.root_device)
        return f"{trainer.world_size}x {name}" if trainer.world_size > 1 else name
    return f"cpu ({torch.get_num_threads()} threads)" + (f" x{trainer.world_size}" if trainer.world_size > 1 else "")


class FinalValidation(pl.Callback):
    """Ends training at max_steps through `should_stop`, which makes Lightning validate at that step, and lifts the
    BLEU sentence limit for that last validation so the reported BLEU covers the whole dev set."""

    def on_train_batch_end(self, trainer: pl.Trainer, pl_module: TranslationModule, *args: Any) -> None:
        if trainer.global_step >= trainer.max_steps:
            trainer.should_stop = True
            pl_module.final_validation = True
            if pl_module.train_config.final_full_validation:
                pl_module.bleu_limit = None


class Recorder(pl.Callback):
    """Collects train/val curves, throughput and timing on rank 0, prints a progress line with ETA every few
    seconds, and at the end of fit keeps the `TrainResult` (`result`) and writes it to result.json for the user; the
    test decoding that follows adds its scores to both. Under ddp_spawn rank 0 is a spawned process whose attributes
    never reach the caller: `train` then reads the file back."""

    def __init__(
        self, result_path: Path, log_every: int, progress: bool, started_at: float, label: str = "", fork: int = 0
    ) -> None:
        self.result_path, self.log_every, self.progress, self.label = result_path, log_every, progress, label
        self.fork = fork
        """A budget's branch starts at its fork step (train.budgets): not a resume."""
        self.started_at = started_at
        self.curves: dict[str, list[dict[str, Any]]] = {"train": [], "val": []}
        self.first_step_at: float | None = None
        self.train_start_step = 0
        self.val_seconds = 0.0
        self.before: dict[str, float] = {"train_s": 0.0, "val_s": 0.0, "wall_s": 0.0}
        """Times of the sessions before a resume (from the checkpoint): a resumed run's record counts them all."""
        self.resumes: list[int] = []
        """Steps this run resumed at."""
        self._val_started = 0.0
        self._test_started = 0.0
        self._fit_ended: float | None = None
        self._resumed_at: int | None = None
        self._last_print = 0.0
        self.result: TrainResult | None = None

    def on_train_batch_start(self, trainer: pl.Trainer, *args: Any) -> None:
        if self.first_step_at is None:
            self.first_step_at = time.time()
            self.train_start_step = trainer.global_step

    def on_train_start(self, trainer: pl.Trainer, pl_module: TranslationModule) -> None:
        if trainer.global_step > self.fork:
            self.resumes.append(trainer.global_step)

    def state_dict(self) -> dict[str, Any]:
        """Saved in every checkpoint: the curves so far and the time spent, so a resumed run reports both whole."""
        return {
            "curves": self.curves,
            "train_s": self.before["train_s"] + (self._train_seconds() if self.first_step_at else 0.0),
            "val_s": self.before["val_s"] + self.val_seconds,
            "wall_s": self.before["wall_s"] + time.time() - self.started_at,
            "resumes": self.resumes,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.curves = state["curves"]
        self.before = {key: float(state[key]) for key in ("train_s", "val_s", "wall_s")}
        self.resumes = list(state["resumes"])

    def _train_seconds(self) -> float:
        return max(time.time() - (self.first_step_at or time.time()) - self.val_seconds, 1e-9)

    def on_train_batch_end(self, trainer: pl.Trainer, pl_module: TranslationModule, *args: Any) -> None:
        step = trainer.global_step
        seen = self.curves["train"] and self.curves["train"][-1]["step"] == step
        if step % self.log_every or not trainer.is_global_zero or seen:
            return
        metrics = trainer.callback_metrics
        point = {"step": step, "loss": _num(metrics.get("train/loss")), "lr": _num(metrics.get("train/lr"))}
        self.curves["train"].append(point)
        now = time.time()
        if self.progress and (now - self._last_print > 5 or step >= trainer.max_steps):
            self._last_print = now
            elapsed = self._train_seconds()
            rate = (step - self.train_start_step) / elapsed
            eta = (trainer.max_steps - step) / rate if rate else float("nan")
            tok_s = (pl_module.src_tokens_seen + pl_module.tgt_tokens_seen) * trainer.world_size / elapsed
            print(
                f"{self.label}step {step}/{trainer.max_steps} loss {point['loss']:.3f} lr {point['lr']:.2e} "
                f"{tok_s:,.0f} tok/s ETA {_fmt_eta(eta)}",
                file=sys.stderr,
                flush=True,
            )

    def on_validation_start(self, trainer: pl.Trainer, *args: Any) -> None:
        self._val_started = time.time()

    def on_validation_end(self, trainer: pl.Trainer, pl_module: TranslationModule) -> None:
        self.val_seconds += time.time() - self._val_started
        if trainer.sanity_checking or not trainer.is_global_zero:
            return
        val = {k: v for k, v in pl_module.last_validation.items() if not isinstance(v, list | str)}
        self.curves["val"] = [p for p in self.curves["val"] if p["step"] != val["step"]] + [val]
        if self.progress:
            bleu = f" BLEU {val['bleu']:.2f}" if "bleu" in val else ""
            print(f"{self.label}step {val['step']} dev PPL {val['ppl']:.2f}{bleu}", file=sys.stderr, flush=True)

    def on_fit_end(self, trainer: pl.Trainer, pl_module: TranslationModule) -> None:
        if not trainer.is_global_zero:
            return
        val = pl_module.last_validation
        train_seconds = self._train_seconds()  # this session's: the throughput is measured on it
        total_train = self.before["train_s"] + train_seconds
        world = trainer.world_size
        first_step_at = self.first_step_at or time.time()
        metrics = {
            "bleu": val.get("bleu"),
            "ppl": val.get("ppl"),
            "nll": val.get("nll"),
            "loss": val.get("loss"),
            "params": pl_module.model.num_parameters(),
            "steps": trainer.global_step,
            "tokens_per_sec": (pl_module.src_tokens_seen + pl_module.tgt_tokens_seen) * world / train_seconds,
            "tgt_tokens_per_sec": pl_module.tgt_tokens_seen * world / train_seconds,
            "step_time_s": total_train / max(trainer.global_step, 1),
            "wall_time_s": self.before["wall_s"] + time.time() - self.started_at,
            "train_time_s": total_train,
            "val_time_s": self.before["val_s"] + self.val_seconds,
            "overhead_s": first_step_at - self.started_at,
            "resumed_at_steps": self.resumes,
            "device": device_name(trainer),
            "precision": str(trainer.precision),
            "bleu_signature": val.get("bleu_signature"),
            "bleu_sentences": val.get("bleu_sentences"),
            "ppl_swapped": val.get("ppl_swapped"),
            "source_ppl_ratio": val.get("source_ppl_ratio"),
            "host": socket.gethostname(),
        }
        references = trainer.datamodule.references("valid")
        hyps = [""] * len(references)
        for i, text in zip(val.get("hypothesis_index", []), val.get("hypotheses", []), strict=True):
            hyps[i] = text
        wandb_info: dict[str, Any] = {}
        logger = trainer.logger
        experiment = getattr(logger, "experiment", None) if logger is not None else None
        if experiment is not None and not _disabled(experiment):
            experiment.summary.update({f"final/{k}": v for k, v in metrics.items() if v is not None})
            wandb_info = {"run_id": experiment.id, "run_dir": str(Path(experiment.dir).parent)}
        sentences = {"nll": val.get("sentence_nll", []), "ntok": val.get("sentence_ntok", [])}
        self.result = TrainResult(metrics, self.curves, hyps, references, wandb_info, sentences)
        write_json_atomic(self.result_path, dataclasses.asdict(self.result))
        self._fit_ended = time.time()

    def resume_test(self, step: int) -> None:
        """This session only decodes the test split of a run whose training and final validation had finished
        (its result.json): the result gains a resume at `step`, and the whole session joins its wall time."""
        self._fit_ended, self._resumed_at = self.started_at, step

    def on_test_start(self, trainer: pl.Trainer, pl_module: TranslationModule) -> None:
        self._test_started = time.time()

    def on_test_end(self, trainer: pl.Trainer, pl_module: TranslationModule) -> None:
        """The test scores join the fit's result (read back from result.json in a spawned rank 0) and W&B summary."""
        test = pl_module.last_test
        if not trainer.is_global_zero or not test:
            return
        now = time.time()
        seconds = now - self._test_started
        if self.result is None:
            with open(self.result_path, encoding="utf-8") as fh:
                self.result = TrainResult(**json.load(fh))
        metrics = {
            "test_bleu": test["bleu"],
            "test_chrf": test["chrf"],
            "test_bleu_signature": test["bleu_signature"],
            "test_chrf_signature": test["chrf_signature"],
            "test_sentences": test["sentences"],
            "test_time_s": seconds,
        }
        self.result.metrics.update(metrics)
        if self._resumed_at is not None:
            self.result.metrics["resumed_at_steps"] = [*self.result.metrics["resumed_at_steps"], self._resumed_at]
        # The trial's wall time grows by the test's, its setup included (a spawned rank 0 knows only the loop's).
        self.result.metrics["wall_time_s"] += now - (self._fit_ended or self._test_started)
        references = trainer.datamodule.references("test")
        hyps = [""] * len(references)
        for i, text in zip(test["hypothesis_index"], test["hypotheses"], strict=True):
            hyps[i] = text
        self.result.test_hypotheses, self.result.test_references = hyps, references
        write_json_atomic(self.result_path, dataclasses.asdict(self.result))
        experiment = getattr(trainer.logger, "experiment", None) if trainer.logger is not None else None
        if experiment is not None and not _disabled(experiment):
            wall = {"wall_time_s": self.result.metrics["wall_time_s"]}
            experiment.summary.update({f"final/{k}": v for k, v in {**metrics, **wall}.items()})
        if self.progress:
            print(
                f"{self.label}test BLEU {test['bleu']:.2f} chrF {test['chrf']:.2f} ({test['sentences']} sentences, "
                f"{seconds:.0f}s)",
                file=sys.stderr,
                flush=True,
            )


def _num(value: Any) -> float:
    return float(value) if value is not None else float("nan")


def _fmt_eta(seconds: float) -> str:
    if not math.isfinite(seconds):
        return "?"
    minutes, sec = divmod(int(seconds), 60)
    return f"{minutes}m{sec:02d}s" if minutes else f"{sec}s"


def quiet_libraries() -> None:
    """Keep trial logs to our progress lines: Lightning's banners and tips ("GPU available", "Tip: ..."), a
    deprecation warning from Lightning's pytree helper, its warning about resuming mid-epoch, its hint to use `srun`
    outside a SLURM job (W&B's notice about Lightning's `anonymous` argument is handled in tracking). Real warnings
    and errors still show."""
    import logging
    import warnings

    logging.getLogger("pytorch_lightning.utilities.rank_zero").setLevel(logging.WARNING)
    logging.getLogger("lightning_fabric.utilities.rank_zero").setLevel(logging.WARNING)
    warnings.filterwarnings("ignore", message=r".*isinstance\(treespec, LeafSpec\).*")
    warnings.filterwarnings("ignore", message=r".*does not have many workers.*")
    # The batch sampler resumes mid-epoch itself (checkpoints.ResumeState), which Lightning cannot see.
    warnings.filterwarnings("ignore", message=r".*your dataloader is not resumable.*")
    if not environment.here().in_slurm_job:
        # Outside a SLURM job ablate trains here on purpose (--launcher slurm starts its tasks with srun), yet
        # Lightning's SLURMEnvironment.detect() hints at `srun` whenever the command exists on the machine. Inside a
        # job the hint stays: there a missing srun is the real mistake it warns of.
        from lightning_fabric.utilities.warnings import PossibleUserWarning

        warnings.filterwarnings("ignore", message=r"The `srun` command is available", category=PossibleUserWarning)
    os.environ.setdefault("WANDB_SILENT", "true")


def fit_to_tokenizer(model: ModelConfig, tokenizer) -> ModelConfig:
    """The model's vocabulary size and padding id as the tokenizer has them: the one place they are reconciled."""
    return replace(model, vocab_size=tokenizer.vocab_size, pad_id=tokenizer.pad_id)


def accumulation(run: RunConfig, world_size: int) -> int:
    """Batches per optimizer update so that an update sees about train.tokens_per_update tokens (section 5.1)."""
    if not run.train.tokens_per_update:
        return 1
    return max(1, math.ceil(run.train.tokens_per_update / (run.data.tokens_per_batch * world_size)))


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
    interrupted trial continues exactly where it stopped: see ablations.checkpoints). With
    `prune`, the finished run's checkpoints are then cut to `train.keep_checkpoints` (a sweep prunes itself, once
    the trial's record is written)."""
    started_at = started_at or time.time()
    quiet_libraries()
    out_dir.mkdir(parents=True, exist_ok=True)
    pl.seed_everything(run.train.seed, workers=True, verbose=False)
    datamodule = TranslationDataModule(run.data)
    datamodule.prepare_data()
    module = _module(run, datamodule.tokenizer)
    result_path, last = out_dir / "result.json", out_dir / "checkpoints" / "last.ckpt"
    finished = _earlier_session(out_dir, resume, run.train.max_steps)
    recorder = Recorder(result_path, run.tracking.log_every, run.tracking.progress, started_at, label=f"[{name}] ")
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
    forks = {fork_step(run.train.max_steps, f, run.train.cooldown_frac) for f in run.train.budgets}
    trainer = make_trainer(run, out_dir, logger, recorder, [*(callbacks or []), SaveForks(last.parent, forks)])
    with interrupt.graceful():
        module = _fit(trainer, module, datamodule, last, recorder, validated=finished is not None)
        reached = _reached_max_steps(last, run.train.max_steps)
        budgets = [_budget(run, out_dir, f, datamodule, callbacks or []) for f in run.train.budgets if reached]
        scored = finished is not None and "test_bleu" in finished.metrics
        if run.train.test_eval and not scored and reached:
            _test(trainer, module, datamodule)
    if budgets and trainer.is_global_zero:
        _add_budgets(recorder, result_path, budgets, trainer.logger)
    # The W&B run ends here, after the test scores joined its summary, and in this process: under ddp_spawn it
    # belongs to the main process, and the spawned ranks of fit and test only attach to it.
    _finish_wandb(exit_code=0)
    if prune and trainer.is_global_zero:
        checkpoints.prune(last.parent, run.train.keep_checkpoints)
    return _rank_zero_result(recorder, result_path)


def _rank_zero_result(recorder: Recorder, result_path: Path) -> TrainResult | None:
    if recorder.result is not None:  # rank 0 ran in this process
        return recorder.result
    if not result_path.exists():  # a relaunched DDP rank (not rank 0): nothing to report
        return None
    with open(result_path, encoding="utf-8") as fh:  # rank 0 was a spawned process (ddp_spawn)
        return TrainResult(**json.load(fh))


def _module(run: RunConfig, tokenizer) -> TranslationModule:
    return TranslationModule(
        fit_to_tokenizer(run.model, tokenizer), run.train, bos_id=tokenizer.bos_id, eos_id=tokenizer.eos_id
    )


def _earlier_session(out_dir: Path, resume: bool, max_steps: int) -> TrainResult | None:
    """What an earlier session of this run left that this one builds on: its last.ckpt (kept when `resume`), and
    its result.json once training and the final validation had finished (returned; any other is removed). A run
    that starts from step 0 also forgets an earlier run's budget branches and forks: they are not its own."""
    result_path, last = out_dir / "result.json", out_dir / "checkpoints" / "last.ckpt"
    if not resume:
        last.unlink(missing_ok=True)
    if not last.exists():
        _forget_budgets(out_dir)
    finished = _finished_result(result_path, last, max_steps)
    if finished is None:
        result_path.unlink(missing_ok=True)
    return finished


class SaveForks(pl.Callback):
    """Saves the run's exact state (weights, optimizer, schedule, RNG, batch position: `checkpoints.ResumeState`)
    as `fork-<step>.ckpt` at each step where a shorter budget's branch leaves the main run (train.budgets). Up to
    there the branch's schedule is the main run's, so a branch resumed from it equals a separate run trained to its
    budget. Runs after ResumeState, whose batch count then includes this step's batch."""

    def __init__(self, directory: Path, steps: set[int]) -> None:
        self.directory, self.steps = directory, steps
        self._step_before = -1

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


def _forget_budgets(out_dir: Path) -> None:
    """Remove the budget branches (b<steps>/) and fork checkpoints of an earlier run in out_dir."""
    for path in [*out_dir.glob("b[0-9]*"), *(out_dir / "checkpoints").glob("fork-*.ckpt")]:
        shutil.rmtree(path, ignore_errors=True) if path.is_dir() else path.unlink(missing_ok=True)


def _budget(run: RunConfig, out_dir: Path, fraction: float, datamodule, callbacks: list[pl.Callback]) -> dict[str, Any]:
    """Train and score one shorter budget: its cooldown, as a branch from the main run's fork checkpoint (or from
    the branch's own last checkpoint, when a branch was interrupted), then the final full-dev validation and the test
    decoding, as for the whole run. W&B stays with the main run, whose summary gets the branch's scores. A branch
    already scored (its result.json) is read, not trained again. Returns TrainResult.budgets' entry."""
    steps = budget_steps(run.train.max_steps, fraction)
    fork = fork_step(run.train.max_steps, fraction, run.train.cooldown_frac)
    branch_dir = out_dir / f"b{steps}"
    result_path, last = branch_dir / "result.json", branch_dir / "checkpoints" / "last.ckpt"
    # A branch scored without its test (train.test_eval was off) whose weights are gone stays as it was scored.
    done = _branch_result(result_path, steps, run.train.test_eval and last.exists())
    if done is None:
        branch = replace(run, train=replace(run.train, max_steps=steps, budgets=(), keep_checkpoints="none"))
        resumable = checkpoints.usable(last) if rank_zero_only.rank == 0 else last.exists()  # as in _fit
        if not resumable:
            source = fork_path(out_dir / "checkpoints", fork)
            if not source.is_file():
                raise AblateError(
                    f"{source} is missing, so budget {fraction:g} (step {steps}) cannot be branched from this run: "
                    f"delete {out_dir} to train the trial again"
                )
            # The branch's own copy (its checkpoints move on, the fork stays), atomic: DDP ranks may copy at once.
            write_atomic(last, lambda fh: fh.write(source.read_bytes()))
        done = _train_branch(branch, branch_dir, datamodule, callbacks, budget_label(fraction), fork)
    return {
        "fraction": fraction,
        "steps": steps,
        "metrics": done.metrics,
        "hypotheses": done.hypotheses,
        "sentences": done.sentences,
        "test_hypotheses": done.test_hypotheses,
    }


def _branch_result(result_path: Path, steps: int, test_eval: bool) -> TrainResult | None:
    """A branch's result.json once it is whole: trained to its budget, validated, and test-decoded if asked."""
    try:
        result = TrainResult(**json.loads(result_path.read_text(encoding="utf-8")))
    except Exception:  # noqa: BLE001 - no file or a damaged one: the branch runs (again)
        return None
    whole = result.metrics.get("steps", 0) >= steps and (not test_eval or "test_bleu" in result.metrics)
    return result if whole else None


def _train_branch(
    run: RunConfig, out_dir: Path, datamodule, callbacks: list[pl.Callback], label: str, fork: int
) -> TrainResult:
    """The branch's fit (resumed from out_dir/checkpoints/last.ckpt) and test, without a logger of its own."""
    module = _module(run, datamodule.tokenizer)
    module.budget = label  # the caller's callbacks (the live view's progress) name the phase from it
    last, result_path = out_dir / "checkpoints" / "last.ckpt", out_dir / "result.json"
    prefix = f"[{run.tracking.label or ''}{label}] " if run.tracking.label else f"[{label}] "
    recorder = Recorder(result_path, run.tracking.log_every, run.tracking.progress, time.time(), prefix, fork)
    trainer = make_trainer(run, out_dir, False, recorder, callbacks)
    validated = _finished_result(result_path, last, run.train.max_steps) is not None  # stopped in its test
    if validated:
        recorder.resume_test(run.train.max_steps)
    module = _fit(trainer, module, datamodule, last, recorder, validated=validated)
    if run.train.test_eval:
        _test(trainer, module, datamodule)
    if not trainer.is_global_zero:  # only rank 0 writes and reads results; train() keeps rank 0's
        return TrainResult(metrics={}, curves={}, hypotheses=[], references=[])
    checkpoints.prune(last.parent, "none")  # the branch is scored: its result.json is all a resume needs
    if recorder.result is not None:
        return recorder.result
    return TrainResult(**json.loads(result_path.read_text(encoding="utf-8")))


def _add_budgets(recorder: Recorder, result_path: Path, budgets: list[dict[str, Any]], logger) -> None:
    """The branches' results join the run's (result.json, and the W&B summary as budget/<T/2>/<metric>)."""
    if recorder.result is None:  # rank 0 was a spawned process (ddp_spawn): its result is on disk
        recorder.result = TrainResult(**json.loads(result_path.read_text(encoding="utf-8")))
    recorder.result.budgets = budgets
    write_json_atomic(result_path, dataclasses.asdict(recorder.result))
    experiment = getattr(logger, "experiment", None) if logger else None
    if experiment is not None and not _disabled(experiment):
        experiment.summary.update(
            {
                f"budget/{budget_label(b['fraction'])}/{k}": v
                for b in budgets
                for k, v in b["metrics"].items()
                if isinstance(v, int | float) and not isinstance(v, bool)
            }
        )


def make_trainer(run: RunConfig, out_dir: Path, logger, recorder: Recorder, callbacks: list[pl.Callback]) -> pl.Trainer:
    """The Lightning Trainer of one run: step-based, validating every train.val_every updates, checkpointing there."""
    # ResumeState writes last.ckpt after every validation (atomically: AtomicCheckpointIO), after the Recorder.
    directory = out_dir / "checkpoints"
    cbs: list[pl.Callback] = [FinalValidation(), recorder, checkpoints.ResumeState(directory / "last.ckpt")]
    cbs.append(StopTestOnSignal(directory / "last.ckpt"))
    if run.train.keep_checkpoints == "best":
        cbs.append(checkpoints.best_checkpoint(directory))
    cbs += callbacks
    if run.train.average_last > 1:
        cbs.append(CheckpointAveraging(run.train.average_last))
    accum = accumulation(run, _world_size(run))
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
    """Under SLURM, Lightning's SLURM environment without its own requeue: our jobs are requeued by submitit, on
    the USR2 the launcher asks for (ablations.launchers.slurm), after the trial saved itself; two requeues would
    race."""
    from lightning_fabric.plugins.environments import SLURMEnvironment

    return [SLURMEnvironment(auto_requeue=False)] if SLURMEnvironment.detect() else []


def _fit(
    trainer: pl.Trainer, module, datamodule, last: Path, recorder: Recorder, *, validated: bool = False
) -> TranslationModule:
    """Fit from the last checkpoint if there is one. A run whose training finished but whose final validation did
    not (the process died) only validates the saved weights; one whose final validation finished too (`validated`:
    its result.json stands) only loads them, for the test decoding that follows in `train`. Returns the module
    holding the final weights."""
    resumable = checkpoints.usable(last) if trainer.is_global_zero else last.exists()
    if resumable and checkpoints.checkpoint_step(last) >= trainer.max_steps:
        module = _final_module(module, last)
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
    try:
        trainer.fit(module, datamodule=datamodule, ckpt_path=str(last) if resumable else None, weights_only=True)
    except BaseException:
        _finish_wandb(exit_code=1)  # else the next trial in this process would log into this run
        raise
    return module


def _final_module(module: TranslationModule, last: Path) -> TranslationModule:
    """The module of a finished run, loaded from its last checkpoint, in the phase `module` was (its budget)."""
    loaded = TranslationModule.load_from_checkpoint(last, map_location="cpu", weights_only=True)
    loaded.budget = module.budget
    return loaded


def _finished_result(result_path: Path, last: Path, max_steps: int) -> TrainResult | None:
    """The result.json of an earlier session of this run whose training and final validation had finished (it and
    last.ckpt are at max_steps), or None. A process that died in the test decoding, or before its sweep wrote the
    record, resumes from it: the dev result stands, only the test split is decoded again. Every rank reads the same
    files (the result is deleted only where this says None), so all ranks take the same path."""
    try:
        result = TrainResult(**json.loads(result_path.read_text(encoding="utf-8")))
        done = result.metrics.get("steps", 0) >= max_steps and checkpoints.checkpoint_step(last) >= max_steps
    except Exception:  # noqa: BLE001 - no file, a damaged one, no checkpoint: nothing to resume from but training
        return None
    return result if done else None


def _reached_max_steps(last: Path, max_steps: int) -> bool:
    """Whether training reached max_steps (a pruned tuning trial stops before), read from the final checkpoint that
    every validation writes: each rank, and the main process of ddp_spawn (whose trainer never counted the steps),
    reads the same answer, so all of them call `trainer.test` or none."""
    return last.is_file() and checkpoints.checkpoint_step(last) >= max_steps


def _test(trainer: pl.Trainer, module: TranslationModule, datamodule) -> None:
    """Decode the test split with the final (or averaged: CheckpointAveraging loaded them before the final
    validation) weights, through Lightning's test loop on every rank; `Recorder.on_test_end` records the scores."""
    try:
        trainer.test(module, datamodule=datamodule, verbose=False)
    except BaseException:
        _finish_wandb(exit_code=1)
        raise


class StopTestOnSignal(pl.Callback):
    """Ctrl-C, SLURM's warning or SIGTERM during the test decoding stops it after the running batch, on every rank
    together. Training has finished, so nothing needs saving: last.ckpt holds the final weights and result.json the
    dev result, and the resumed run only decodes the test split again (`_finished_result`)."""

    def __init__(self, last: Path) -> None:
        self.last = last

    def on_test_batch_end(self, trainer: pl.Trainer, *args: Any) -> None:
        if checkpoints.stop_requested(trainer):
            raise interrupt.Interrupted(
                saved=f"training had finished (final weights in {self.last}); the test decoding runs again on resume"
            )


def _finish_wandb(exit_code: int) -> None:
    wandb = sys.modules.get("wandb")
    if wandb is not None and wandb.run is not None:
        wandb.run.finish(exit_code=exit_code)


def _disabled(experiment: Any) -> bool:
    return (
        bool(getattr(getattr(experiment, "settings", None), "_noop", False))
        or type(experiment).__name__ == "RunDisabled"
    )


def _world_size(run: RunConfig) -> int:
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


def scored(record: Record, result: TrainResult | None, layout: Layout) -> Record:
    """The trial's record, complete with what its training returned: metrics, curves, its W&B run, and the files
    written under OUT (`write_outputs`). The one place a trial's result becomes its `Record`."""
    if result is None:
        raise RuntimeError("training returned no result (not rank 0?)")
    files = write_outputs(result, layout, key_of(record.row, record.seed))
    return replace(
        record, state="complete", reason=None, metrics=result.metrics, curves=result.curves, wandb=result.wandb,
        **files,
    )  # fmt: skip


def write_outputs(result: TrainResult, layout: Layout, stem: str) -> dict[str, Any]:
    """Write the dev hypotheses (one per line, dev order) and references of a trial under OUT, and the test ones when
    the test split was decoded (hyps/<stem>.test.txt, refs/test.txt). Each shorter budget's files are
    hyps/<stem>.b<steps>.*. Returns the `Record` fields naming them, and its `budgets`."""
    references = layout.references("valid")
    if not references.exists():
        write_text_atomic(references, "\n".join(result.references) + "\n")
    files: dict[str, Any] = {"references": references}
    files |= _write_hypotheses(layout, stem, result.hypotheses, result.sentences, result.test_hypotheses)
    if result.test_hypotheses:
        test_references = layout.references("test")
        if not test_references.exists():
            write_text_atomic(test_references, "\n".join(result.test_references) + "\n")
        files["test_references"] = test_references
    files["budgets"] = tuple(
        Budget(
            fraction=b["fraction"],
            steps=b["steps"],
            metrics=b["metrics"],
            **_write_hypotheses(layout, f"{stem}.b{b['steps']}", b["hypotheses"], b["sentences"], b["test_hypotheses"]),
        )
        for b in result.budgets
    )
    return files


def _write_hypotheses(
    layout: Layout, stem: str, hypotheses: list[str], sentences: dict[str, list[float]], test: list[str]
) -> dict[str, Path]:
    """hyps/<stem>.txt, .nll.tsv (per dev sentence: summed NLL <tab> target tokens) and .test.txt."""
    files = {"hypotheses": layout.hypotheses(stem)}
    write_text_atomic(files["hypotheses"], "\n".join(hypotheses) + "\n")
    nll, ntok = sentences.get("nll"), sentences.get("ntok")
    if nll and ntok and len(nll) == len(ntok) == len(hypotheses):
        files["sentence_nll"] = layout.hypotheses(stem, "nll")
        write_text_atomic(
            files["sentence_nll"], "".join(f"{a:.6g}\t{int(b)}\n" for a, b in zip(nll, ntok, strict=True))
        )
    if test:
        files["test_hypotheses"] = layout.hypotheses(stem, "test")
        write_text_atomic(files["test_hypotheses"], "\n".join(test) + "\n")
    return files


__all__ = ["TrainResult", "scored", "train", "write_outputs"]
