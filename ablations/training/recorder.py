"""What one run reports while and after it trains, on rank 0: the progress lines, the curves and costs, the final
metrics, the W&B summary, and the run's `TrainResult` (result.json: `ablations.training.result`).

`Recorder` is the Lightning callback that collects them; the test decoding and the budget branches that follow the
fit add their scores to the same result.
"""

from __future__ import annotations

import math
import socket
import sys
import time
from pathlib import Path
from typing import Any

import pytorch_lightning as pl
import torch
from ablate.ablations.runtime import environment
from ablate.ablations.statistics.budgets import budget_label
from ablate.ablations.training.result import TrainResult
from ablate.lightning_modules import card
from ablate.lightning_modules.module import TranslationModule


class Recorder(pl.Callback):
    """Collects train/val curves, throughput and timing on rank 0, prints a progress line with ETA every few
    seconds, and at the end of fit keeps the `TrainResult` (`result`) and writes it to result.json for the user; the
    test decoding that follows adds its scores to both. Under ddp_spawn rank 0 is a spawned process whose attributes
    never reach the caller: `train` then reads the file back."""

    def __init__(
        self, run_dir: Path, log_every: int, progress: bool, started_at: float, label: str = "", fork: int = 0
    ) -> None:
        self.run_dir, self.log_every, self.progress, self.label = run_dir, log_every, progress, label
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

    # ------------------------------------------------------------------------------------------ resume state
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

    def resume_test(self, step: int) -> None:
        """This session only decodes the test split of a run whose training and final validation had finished
        (its result.json): the result gains a resume at `step`, and the whole session joins its wall time."""
        self._fit_ended, self._resumed_at = self.started_at, step

    # ---------------------------------------------------------------------------------------------- training
    def on_train_batch_start(self, trainer: pl.Trainer, *args: Any) -> None:
        if self.first_step_at is None:
            self.first_step_at = time.time()
            self.train_start_step = trainer.global_step

    def on_train_start(self, trainer: pl.Trainer, pl_module: TranslationModule) -> None:
        if trainer.global_step > self.fork:
            self.resumes.append(trainer.global_step)

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
            self.say(
                f"step {step}/{trainer.max_steps} loss {point['loss']:.3f} lr {point['lr']:.2e} "
                f"{tok_s:,.0f} tok/s ETA {_fmt_eta(eta)}"
            )

    # -------------------------------------------------------------------------------------------- validation
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
            self.say(f"step {val['step']} dev PPL {val['ppl']:.2f}{bleu}")

    def on_fit_end(self, trainer: pl.Trainer, pl_module: TranslationModule) -> None:
        """The run's dev result (the last validation's, the whole dev set): kept, written, and in the W&B summary."""
        if not trainer.is_global_zero:
            return
        val = pl_module.last_validation
        metrics = self._fit_metrics(trainer, pl_module)
        references = pl_module.references("valid")
        hyps = _in_order(val.get("hypothesis_index", []), val.get("hypotheses", []), len(references))
        wandb_info: dict[str, Any] = {}
        experiment = _experiment(trainer.logger)
        if experiment is not None:
            experiment.summary.update({f"final/{k}": v for k, v in metrics.items() if v is not None})
            wandb_info = {"run_id": experiment.id, "run_dir": str(Path(experiment.dir).parent)}
        sentences = {"nll": val.get("sentence_nll", []), "ntok": val.get("sentence_ntok", [])}
        self.result = TrainResult(metrics, self.curves, hyps, references, wandb_info, sentences)
        self.result.write(self.run_dir)
        self._fit_ended = time.time()

    def _fit_metrics(self, trainer: pl.Trainer, pl_module: TranslationModule) -> dict[str, Any]:
        """The dev scores of the final validation, the model's size, and the run's costs (all its sessions')."""
        val = pl_module.last_validation
        train_seconds = self._train_seconds()  # this session's: the throughput is measured on it
        total_train = self.before["train_s"] + train_seconds
        world = trainer.world_size
        first_step_at = self.first_step_at or time.time()
        return {
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
            "kernels": kernels_ran_on(trainer),
            "precision": str(trainer.precision),
            "path": path_taken(trainer, pl_module),
            "bleu_signature": val.get("bleu_signature"),
            "bleu_sentences": val.get("bleu_sentences"),
            "ppl_swapped": val.get("ppl_swapped"),
            "source_ppl_ratio": val.get("source_ppl_ratio"),
            "host": socket.gethostname(),
        }

    # -------------------------------------------------------------------------------------------------- test
    def on_test_start(self, trainer: pl.Trainer, pl_module: TranslationModule) -> None:
        self._test_started = time.time()

    def on_test_end(self, trainer: pl.Trainer, pl_module: TranslationModule) -> None:
        """The test scores join the fit's result (read back from result.json in a spawned rank 0) and W&B summary."""
        test = pl_module.last_test
        if not trainer.is_global_zero or not test:
            return
        now = time.time()
        seconds = now - self._test_started
        result = self.result = self.result or TrainResult.read(self.run_dir)
        metrics = {
            "test_bleu": test["bleu"],
            "test_chrf": test["chrf"],
            "test_bleu_signature": test["bleu_signature"],
            "test_chrf_signature": test["chrf_signature"],
            "test_sentences": test["sentences"],
            "test_time_s": seconds,
        }
        result.metrics.update(metrics)
        if self._resumed_at is not None:
            result.metrics["resumed_at_steps"] = [*result.metrics["resumed_at_steps"], self._resumed_at]
        # The trial's wall time grows by the test's, its setup included (a spawned rank 0 knows only the loop's).
        result.metrics["wall_time_s"] += now - (self._fit_ended or self._test_started)
        references = pl_module.references("test")
        result.test_hypotheses = _in_order(test["hypothesis_index"], test["hypotheses"], len(references))
        result.test_references = references
        result.write(self.run_dir)
        experiment = _experiment(trainer.logger)
        if experiment is not None:
            wall = {"wall_time_s": result.metrics["wall_time_s"]}
            experiment.summary.update({f"final/{k}": v for k, v in {**metrics, **wall}.items()})
        if self.progress:
            self.say(
                f"test BLEU {test['bleu']:.2f} chrF {test['chrf']:.2f} ({test['sentences']} sentences, {seconds:.0f}s)"
            )

    # ------------------------------------------------------------------------------------------ after the run
    def add_budgets(self, budgets: list[dict[str, Any]], logger: Any) -> None:
        """The branches' results join the run's (result.json, and the W&B summary as budget/<T/2>/<metric>)."""
        result = self.result = self.result or TrainResult.read(self.run_dir)  # a spawned rank 0's is on disk
        result.budgets = budgets
        result.write(self.run_dir)
        experiment = _experiment(logger)
        if experiment is not None:
            experiment.summary.update(
                {
                    f"budget/{budget_label(b['fraction'])}/{k}": v
                    for b in budgets
                    for k, v in b["metrics"].items()
                    if isinstance(v, int | float) and not isinstance(v, bool)
                }
            )

    def final_result(self) -> TrainResult | None:
        """The run's result as rank 0 left it; None in a process that is not rank 0 and wrote none."""
        if self.result is not None:  # rank 0 ran in this process
            return self.result
        if not TrainResult.path(self.run_dir).exists():  # a relaunched DDP rank (not rank 0): nothing to report
            return None
        return TrainResult.read(self.run_dir)  # rank 0 was a spawned process (ddp_spawn)

    def say(self, line: str) -> None:
        """Print a progress line of this run, prefixed by its name."""
        print(f"{self.label}{line}", file=sys.stderr, flush=True)


def device_name(trainer: pl.Trainer) -> str:
    """What the run trained on, as the record names it: '2x NVIDIA H100', 'cpu (8 threads)'."""
    if trainer.strategy.root_device.type == "cuda":
        name = torch.cuda.get_device_name(trainer.strategy.root_device)
        return f"{trainer.world_size}x {name}" if trainer.world_size > 1 else name
    threads = torch.get_num_threads()
    said = f"cpu ({threads} thread{'s' if threads != 1 else ''})"
    return said + (f" x{trainer.world_size}" if trainer.world_size > 1 else "")


def kernels_ran_on(trainer: pl.Trainer) -> dict[str, Any]:
    """What a run's numbers were computed with, beyond the device's name: the same recipe reproduces a result to the
    digit only on the same kernels (torch's version, its CPU vector extension, the CPU or GPU model); elsewhere the
    rounding differs in the seventh digit at some step and the run drifts within seed noise from there."""
    device = trainer.strategy.root_device
    return {
        "torch": torch.__version__,
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "cpu": environment.cpu_model(),
        "threads": torch.get_num_threads(),
        "gpu": torch.cuda.get_device_name(device) if device.type == "cuda" else None,
        "cuda": torch.version.cuda if device.type == "cuda" else None,
    }


def path_taken(trainer: pl.Trainer, pl_module: TranslationModule) -> dict[str, Any]:
    """The path the run's numbers took, each setting `auto` may resolve differently on a card (`card`) as resolved:
    decoding, kernels, compile and graphs, precision, the torch version, and the ABLATE_CARD switch it ran under."""
    cfg = pl_module.train_config
    cuda = trainer.strategy.root_device.type == "cuda"
    return {
        "decoding": pl_module.decoding(cuda),
        "kernels": pl_module.model.kernels.name,
        "compile": cfg.compile_scope if cfg.compile else None,
        "cuda_graphs": cfg.cuda_graphs and cuda,
        # The replayed step (train.replay_step): recorded as CUDA graphs on a card, the same step eagerly elsewhere.
        "replay_step": ("graphs" if cuda else "eager") if cfg.replay_step else None,
        "precision": str(trainer.precision),
        "torch": torch.__version__,
        "card": card.mode() or None,
    }


def _in_order(index: list[int], texts: list[str], n: int) -> list[str]:
    """Decoded sentences by sentence index as a list of `n` in split order ('' where one was not decoded)."""
    ordered = [""] * n
    for i, text in zip(index, texts, strict=True):
        ordered[i] = text
    return ordered


def _experiment(logger: Any) -> Any:
    """The logger's live W&B run, or None (no logger, or W&B disabled)."""
    experiment = getattr(logger, "experiment", None) if logger is not None else None
    if experiment is None or _disabled(experiment):
        return None
    return experiment


def _disabled(experiment: Any) -> bool:
    return (
        bool(getattr(getattr(experiment, "settings", None), "_noop", False))
        or type(experiment).__name__ == "RunDisabled"
    )


def _num(value: Any) -> float:
    return float(value) if value is not None else float("nan")


def _fmt_eta(seconds: float) -> str:
    if not math.isfinite(seconds):
        return "?"
    minutes, sec = divmod(int(seconds), 60)
    return f"{minutes}m{sec:02d}s" if minutes else f"{sec}s"


__all__ = ["Recorder", "device_name"]
