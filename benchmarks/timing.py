"""Timing our training step beside the peers': one Adam step per system per batch, interleaved, plus the step's
phases, its peak memory, our CPU kernel choices undone one by one, and the same batches through Lightning."""

from __future__ import annotations

import contextlib
import statistics
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

import pytorch_lightning as pl
import torch
from ablate.benchmarks.device import autocast, synchronize
from ablate.benchmarks.settings import BenchConfig, Setup
from ablate.data.datamodule import TranslationDataModule
from ablate.data.errors import AblateError
from ablate.data.tokenizer import BOS_ID, EOS_ID
from ablate.lightning_modules.kernels import FusedLinearLabelSmoothedNLL, compile_for_training, kernels_for
from ablate.lightning_modules.module import TranslationModule, label_smoothed_nll
from ablate.lightning_modules.transformer import Transformer


def summarize(values: list[float]) -> dict[str, float]:
    """Median and spread of timings: median, q1, q3, iqr, min, max, n."""
    if not values:
        return {"n": 0}
    q1, median, q3 = statistics.quantiles(values, n=4, method="inclusive") if len(values) > 1 else [values[0]] * 3
    return {
        "median": median,
        "q1": q1,
        "q3": q3,
        "iqr": q3 - q1,
        "min": min(values),
        "max": max(values),
        "n": len(values),
    }


def ratio(a: float | None, b: float | None) -> float | None:
    """a / b, None where either is missing or b is 0."""
    return a / b if a is not None and b else None


def paired_speedup(ours: list[float], peer: list[float]) -> float | None:
    """Median over paired measurements (same batch or same round, taken back to back) of peer time / our time.

    Load from other jobs comes and goes within seconds on a shared machine; pairing cancels it where separate
    medians of each system would not (it is ours/peer in tokens/s or sentences/s: the work is identical)."""
    pairs = [p / o for o, p in zip(ours, peer, strict=False) if o > 0]
    return statistics.median(pairs) if pairs else None


@dataclass
class Trainee:
    """One trained system: a module with forward(src, tgt_in) -> logits, its optimizer, and its timings."""

    name: str
    module: Any
    optimizer: Any
    net: Any
    times: list[float] = field(default_factory=list)
    """Seconds of each timed step."""
    batch_ids: list[int] = field(default_factory=list)
    """Which batch each timed step trained on."""
    fused_loss: bool = False
    """`net` gives the decoder's final states, projected inside the loss (train.fused_loss)."""
    compiled: bool = False
    """`net` is compiled (and so is the fused loss's element-wise work)."""
    first_step_s: float = 0.0
    cold_times: list[float] = field(default_factory=list)
    """Seconds of each step of the untimed pass: the first time each timed batch's shape was seen."""


def make_trainee(
    name: str,
    module,
    device,
    compile_model: bool,
    lr: float = 1e-4,
    fused: bool = True,
    fused_loss: bool = False,
    scope: Literal["model", "layers"] = "layers",
) -> Trainee:
    """Move to the device, train mode, Adam (0.9, 0.98, 1e-9), fused as TranslationModule uses it (every system
    gets the same; `fused=False` is Adam's default implementation, for `cpu_choices`). `fused_loss`: our model
    trains as train.fused_loss does, its `features` then the projection inside the loss. Compiled as train.compile
    compiles (`compile_for_training`: one graph for every shape, of the model or, `scope` 'layers', of each layer),
    peers alike."""
    module = module.to(device).train()
    opt = torch.optim.Adam(module.parameters(), lr=lr, betas=(0.9, 0.98), eps=1e-9, fused=fused or None)
    net = module.features if fused_loss else module
    net = compile_for_training(net, scope=scope) if compile_model else net
    return Trainee(name, module, opt, net, fused_loss=fused_loss, compiled=compile_model)


def train_step(t: Trainee, batch: dict, s: Setup, mark=None):
    """One optimizer update with our label-smoothed loss normalised per target token. Returns the loss tensor.
    `mark`, if given, is called after the forward pass, the loss, the backward pass and the optimizer step."""
    cfg = s.cfg
    mark = mark or (lambda: None)
    t.optimizer.zero_grad(set_to_none=True)
    with autocast(s.device, s.precision):
        out = t.net(batch["src"], batch["tgt_in"])  # (B, T, V) logits, or (B, T, d_model) states if fused_loss
        mark()
        target = batch["tgt_out"]
        if t.fused_loss:
            weight = t.module.output.weight
            total = FusedLinearLabelSmoothedNLL.apply(
                out.flatten(0, 1), weight, target.flatten(), cfg.label_smoothing, cfg.pad_id, t.compiled
            )[0]
        else:
            total = label_smoothed_nll(out.flatten(0, 1), target.flatten(), cfg.label_smoothing, cfg.pad_id)[0].sum()
        loss = total / (target != cfg.pad_id).sum().clamp(min=1)
        mark()
    loss.backward()
    mark()
    t.optimizer.step()
    mark()
    return loss


def run_training(trainees: list[Trainee], batches: list[dict], bench: BenchConfig, s: Setup):
    """Warm-up, one untimed pass over the timed batches, then `repeats` rounds; in each round every system steps once
    on the same batch (rotating order).

    The untimed pass makes the timed steps the steady state that every epoch after the first is: each batch's shape
    has been seen once. On a GPU the first step at a new shape pays for cuDNN's attention plans and the caching
    allocator's new blocks; measured on an H200 (2026-11-26, paper base, first steps at each shape) that put the
    median at 267 ms against 52 ms at best, and the same batches again took 77 ms. Those cold steps are kept apart
    (`cold_times`), since they are what a run's first epoch costs."""
    warmup = min(bench.warmup, len(batches) - 1)
    timed = range(warmup, len(batches))
    rounds = [(i, "warmup") for i in range(warmup)] + [(i, "cold") for i in timed]
    rounds += [(timed[i % len(timed)], "timed") for i in range(bench.repeats)]
    for n, (index, phase) in enumerate(rounds):
        batch = batches[index]
        for t in trainees[n % len(trainees) :] + trainees[: n % len(trainees)]:
            synchronize(s.device)
            start = time.perf_counter()
            loss = train_step(t, batch, s)
            loss_value = float(loss.detach())  # a host sync, as Lightning's NaN check does every step
            elapsed = time.perf_counter() - start
            if loss_value != loss_value:
                raise AblateError(f"{t.name}: training loss became NaN in the benchmark")
            if n == 0:
                t.first_step_s = elapsed
            if phase == "timed":
                t.times.append(elapsed)
                t.batch_ids.append(index)
            elif phase == "cold":
                t.cold_times.append(elapsed)


def memory_profile(t: Trainee, batch: dict, s: Setup) -> dict[str, Any]:
    """Peak memory of one training step of `t` (after warm-up, so Adam's state exists).

    CUDA: torch.cuda.max_memory_allocated above what was allocated before the step, plus this model's parameters
    and Adam state. CPU: an allocator-independent estimate, parameters + gradients + Adam state + the tensors
    autograd saves for backward; `rss_delta_mb` is the process's peak-RSS growth during the step (/proc), which
    undercounts memory that the allocator reuses from earlier steps.
    """
    device = s.device
    params = list(t.module.parameters())
    param_bytes = sum(p.numel() * p.element_size() for p in params)
    state_bytes = sum(
        v.numel() * v.element_size() for s in t.optimizer.state.values() for v in s.values() if torch.is_tensor(v)
    )
    if device.type == "cuda":
        t.optimizer.zero_grad(set_to_none=True)
        synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
        before = torch.cuda.memory_allocated(device)
        train_step(t, batch, s)
        synchronize(device)
        transient = torch.cuda.max_memory_allocated(device) - before
        return {"peak_mb": (param_bytes + state_bytes + transient) / 2**20, "method": "cuda.max_memory_allocated"}
    own = {p.untyped_storage().data_ptr() for p in params}
    saved: dict[int, int] = {}

    def pack(tensor):
        storage = tensor.untyped_storage()
        if storage.data_ptr() not in own:
            saved[storage.data_ptr()] = storage.nbytes()
        return tensor

    rss_before = _proc_status("VmRSS")
    _reset_peak_rss()
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        train_step(t, batch, s)
    rss_peak = _proc_status("VmHWM")
    activations = sum(saved.values())
    return {
        "peak_mb": (2 * param_bytes + state_bytes + activations) / 2**20,
        "activations_mb": activations / 2**20,
        "rss_delta_mb": (rss_peak - rss_before) / 2**20 if rss_peak and rss_before else None,
        "method": "estimate: params + grads + Adam state + saved activations",
    }


def _proc_status(key: str) -> int | None:
    """A memory figure of this process from /proc/self/status, in bytes (None off Linux)."""
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    return None


def _reset_peak_rss() -> None:
    with contextlib.suppress(OSError):
        Path("/proc/self/clear_refs").write_text("5")  # resets VmHWM to the current RSS (Linux >= 4.0)


def step_breakdown(t: Trainee, batches: list[dict], s: Setup) -> dict[str, float]:
    """Median milliseconds of each phase of our training step (forward, loss, backward, optimizer), synchronised."""
    phases: dict[str, list[float]] = {"forward": [], "loss": [], "backward": [], "optimizer": []}
    marks: list[float] = []

    def mark() -> None:
        synchronize(s.device)
        marks.append(time.perf_counter())

    for batch in batches:
        marks.clear()
        mark()
        train_step(t, batch, s, mark)
        for name, a, b in zip(phases, marks, marks[1:], strict=False):
            phases[name].append((b - a) * 1000)
    return {name: statistics.median(values) for name, values in phases.items()}


CPU_CHOICES: dict[str, tuple[str, ...]] = {
    "ours": (),
    "sdpa_attention": ("attention",),
    "bernoulli_dropout": ("dropout",),
    "loop_adam": ("adam",),
    "pytorch_defaults": ("attention", "dropout", "adam"),
}
"""Variants of our training step on CPU, each undoing some of our CPU choices: SDPA for all attention (instead of
MatmulAttention for short sequences), nn.Dropout (instead of masks from 15-bit draws), Adam's default for-loop
implementation (instead of the fused kernel). `pytorch_defaults` undoes all three. Each variant is the model built
with other kernels (`kernels_for(..., reference_parts=...)`), nothing patched at run time."""


def cpu_choices(ours: Trainee, batches: list[dict], bench: BenchConfig, s: Setup):
    """Median step time of our model with each of our CPU choices undone (CPU_CHOICES), same weights and batches,
    variants interleaved step by step; `speedup` is each variant's step time over ours (paired by batch)."""
    variants = {}
    for name, choices in CPU_CHOICES.items():
        kernels = kernels_for("cpu", reference_parts=tuple(c for c in choices if c != "adam"))
        module = Transformer(s.cfg, kernels=kernels)  # the same model and weights through other kernels
        module.load_state_dict(ours.module.state_dict())
        variants[name] = (make_trainee(name, module, s.device, False, fused="adam" not in choices), choices)
    measured = batches[bench.warmup :] or batches
    for r in range(2 + min(len(measured), 15)):
        batch = measured[r % len(measured)]
        for trainee, _ in variants.values():
            start = time.perf_counter()
            float(train_step(trainee, batch, s).detach())
            if r >= 2:
                trainee.times.append(time.perf_counter() - start)
    ours_times = variants["ours"][0].times
    return {
        name: {
            "undone": list(choices),
            "step_ms": 1000 * statistics.median(trainee.times),
            "speedup": paired_speedup(ours_times, trainee.times),
        }
        for name, (trainee, choices) in variants.items()
    }


def fit_through_lightning(run, accelerator: str, precision: str, callbacks: list) -> None:
    """Train `run` (its train.max_steps) through the Lightning Trainer as a bench measures it: one device, no
    validation, logger or checkpoints, its data module's first batches, `callbacks` watching."""
    pl.seed_everything(run.train.seed, verbose=False)
    module = TranslationModule(run.model, run.train, bos_id=BOS_ID, eos_id=EOS_ID)
    trainer = pl.Trainer(
        accelerator=accelerator,
        devices=1,
        precision=precision,  # pyright: ignore[reportArgumentType]
        max_steps=run.train.max_steps,
        max_epochs=-1,
        limit_val_batches=0,
        num_sanity_val_steps=0,
        log_every_n_steps=run.tracking.log_every,
        use_distributed_sampler=False,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        callbacks=callbacks,
    )
    trainer.fit(module, datamodule=TranslationDataModule(run.data))


def lightning_step_times(
    s: Setup, steps: int, compile_model: bool, scope: Literal["model", "layers"] = "layers"
) -> list[float]:
    """Seconds between consecutive batch ends when `TranslationModule` trains through the Lightning Trainer on the
    same data module (so the same first batches): data collation, Lightning's loop, logging and the step."""
    run, device = s.run, s.device
    stamps: list[float] = []

    class StepClock(pl.Callback):
        def on_train_batch_end(self, *args: Any) -> None:
            synchronize(device)
            stamps.append(time.perf_counter())

    train = replace(run.train, compile=compile_model, compile_scope=scope, max_steps=steps)
    fit_through_lightning(replace(run, train=train), device.type, s.precision, [StepClock()])
    return [b - a for a, b in zip(stamps, stamps[1:], strict=False)]
