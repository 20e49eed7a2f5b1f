"""The benchmark harness behind `ablate bench`: our training and decoding speed, side by side with the peers.

Everything is measured in one process on identical inputs, so machine load hits every system alike:
- training: the first `warmup + repeats` batches of our token-budget sampler (epoch 0), collated once; at every
  repeat each system takes one Adam step on the same batch, in a rotating order. Same loss for all (our
  label-smoothed cross-entropy, `label_smoothed_nll`), same optimizer settings, same precision;
- our real training path as well: the same batches through the Lightning Trainer, as `ablate train` runs them
  (data collation and Lightning's per-step work included), timed from one batch end to the next;
- decoding: one fixed batch of dev sentences, beam 4 (alpha 0.6) and greedy, maximum output length source + 50,
  ours (`lightning_modules.decoding`) against HF `generate()` with the same settings;
- padding: our length-bucketed batches against random batches of the same token budget;
- per-trial overhead: a fresh `ablate train` process (warm caches) from process start to its first step, and a
  second trial in the same process (how a sweep worker runs trials).
Model FLOPs are counted analytically (`train_flops`); MFU is reported against the device's peak bf16 FLOP/s.
"""

from __future__ import annotations

import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from ablate.data.errors import AblateError
from ablate.data.tokenizer import BOS_ID, EOS_ID, PAD_ID
from ablate.lightning_modules.config import ModelConfig

PEAK_BF16_FLOPS: list[tuple[str, float]] = [
    ("H100 PCIe", 756e12),
    ("H100", 989e12),
    ("H200", 989e12),
    ("GH200", 989e12),
    ("A100", 312e12),
    ("L40S", 362e12),
    ("A10G", 70e12),
    ("L4", 121e12),
]
"""Dense bf16 tensor-core peak FLOP/s by device-name substring (first match wins; vendor data sheets)."""


@dataclass(frozen=True, kw_only=True)
class BenchConfig:
    """What `ablate bench` measures and how."""

    study: str = "table3"
    """Study whose row is benchmarked (built-in name or YAML file)."""
    row: str = "base"
    """Row of the study."""
    preset: str = "tiny"
    """Size preset of the row (tiny, smoke, paper)."""
    peers: tuple[str, ...] = ("hf", "torch")
    """Peers measured in the same run: 'hf' (MarianMT, needs the [bench] extra), 'torch' (nn.Transformer)."""
    warmup: int = 5
    """Untimed training steps per system before the timed ones (allocator, caches, torch.compile)."""
    repeats: int = 30
    """Timed training steps per system, one per batch."""
    decode_sentences: int = 32
    """Dev sentences in the decoding batch."""
    decode_repeats: int = 7
    """Timed decoding runs per system (one warm-up run each before); the systems take turns in every round."""
    beam_size: int = 4
    """Beam width of the beam-search measurement (section 6.1: 4)."""
    full_length: bool = True
    """Hold eos back (logit -1e4) in every decoder until the length limit forces it, so that all systems decode
    the same number of steps: with random weights, where a model happens to emit eos is arbitrary."""
    device: Literal["auto", "cpu", "cuda"] = "auto"
    """'auto': CUDA if available, else CPU."""
    precision: Literal["auto", "32-true", "bf16-mixed"] = "auto"
    """'auto': bf16 autocast on a bf16-capable GPU, fp32 on CPU (bf16 is slower on CPUs without AMX)."""
    threads: int | None = None
    """CPU threads of torch (torch.set_num_threads); None: torch's default (one per core)."""
    compile: bool = False
    """torch.compile every trained model (ours and the peers); the first warm-up step then includes compilation."""
    lightning: bool = True
    """Also time our training through the Lightning Trainer, as `ablate train` runs it."""
    overhead: bool = True
    """Measure per-trial overhead with `ablate train` subprocesses (about three trials of the trial preset)."""
    trial_preset: str = "smoke"
    """Preset of the trial whose overhead and wall time are measured."""
    trial_args: tuple[str, ...] = ()
    """Extra `ablate train` overrides for the overhead trials (tests use them to shorten the trial)."""
    corpus: str | None = None
    """Override data.corpus (a directory, a .tsv file); None: the preset's corpus."""
    seed: int = 0
    """Seed of weights, dropout, the batch order and the choice of dev sentences."""

    def __post_init__(self) -> None:
        for name in ("warmup", "repeats", "decode_sentences", "decode_repeats", "beam_size"):
            minimum = 0 if name == "warmup" else 1
            if getattr(self, name) < minimum:
                raise AblateError(f"--{name} must be >= {minimum}, got {getattr(self, name)}")


# ------------------------------------------------------------------------------------------------------ helpers
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


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def resolve_device(name: str):
    import torch

    if name == "cuda" and not torch.cuda.is_available():
        raise AblateError("--device cuda: no CUDA device is visible (torch.cuda.is_available() is False)")
    return torch.device("cuda" if name == "cuda" or (name == "auto" and torch.cuda.is_available()) else "cpu")


def resolve_precision(precision: str, device) -> str:
    import torch

    if precision != "auto":
        return precision
    return "bf16-mixed" if device.type == "cuda" and torch.cuda.is_bf16_supported() else "32-true"


def autocast(device, precision: str):
    import torch

    if precision == "bf16-mixed":
        return torch.autocast(device.type, dtype=torch.bfloat16)
    return contextlib.nullcontext()


def synchronize(device) -> None:
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize(device)


def device_info(device) -> dict[str, Any]:
    """Name, threads and peak bf16 FLOP/s (None where unknown: CPUs and unlisted GPUs)."""
    import torch

    if device.type == "cuda":
        name = torch.cuda.get_device_name(device)
        peak = next((flops for key, flops in PEAK_BF16_FLOPS if key in name), None)
        return {"type": "cuda", "name": name, "peak_bf16_flops": peak, "torch": torch.__version__}
    model = "unknown CPU"
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    return {
        "type": "cpu",
        "name": model,
        "threads": torch.get_num_threads(),
        "peak_bf16_flops": None,
        "torch": torch.__version__,
    }


def train_flops(cfg: ModelConfig, src_tokens: int, tgt_tokens: int, src_width: int, tgt_width: int) -> float:
    """Model FLOPs of one training step (forward + backward = 3x forward), counting matrix multiplies as 2mnk.

    Projections and the output layer count real (non-pad) tokens; attention counts each real query against the
    padded key length of its batch (`src_width`, `tgt_width`), causal self-attention over all keys (the usual MFU
    convention). Embedding lookups, softmax and LayerNorm are left out.
    """
    d, h, dk, dv, dff, n = cfg.d_model, cfg.n_heads, cfg.head_dim_k, cfg.head_dim_v, cfg.d_ff, cfg.n_layers
    proj = 2 * d * h * (2 * dk + dv) + 2 * h * dv * d  # Q, K, V and output projections, per token
    ffn = 4 * d * dff
    enc = n * (proj + ffn + 2 * h * src_width * (dk + dv))
    memory_kv = n * 2 * d * h * (dk + dv)  # cross-attention keys and values, per source token
    cross = 2 * d * h * dk + 2 * h * dv * d + 2 * h * src_width * (dk + dv)
    dec = n * (proj + ffn + 2 * h * tgt_width * (dk + dv) + cross) + 2 * d * cfg.vocab_size
    return 3.0 * (src_tokens * (enc + memory_kv) + tgt_tokens * dec)


# ----------------------------------------------------------------------------------------------------- training
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
    first_step_s: float = 0.0


def make_trainee(name: str, module, device, compile_model: bool, lr: float = 1e-4, fused: bool = True) -> Trainee:
    """Move to the device, train mode, Adam (0.9, 0.98, 1e-9), fused as TranslationModule uses it (every system
    gets the same; `fused=False` is Adam's default implementation, for `cpu_choices`)."""
    import torch

    module = module.to(device).train()
    opt = torch.optim.Adam(module.parameters(), lr=lr, betas=(0.9, 0.98), eps=1e-9, fused=fused or None)
    return Trainee(name, module, opt, torch.compile(module) if compile_model else module)


def train_step(t: Trainee, batch: dict, cfg: ModelConfig, precision: str, device, mark=None):
    """One optimizer update with our label-smoothed loss normalised per target token. Returns the loss tensor.
    `mark`, if given, is called after the forward pass, the loss, the backward pass and the optimizer step."""
    from ablate.lightning_modules.module import label_smoothed_nll

    mark = mark or (lambda: None)
    t.optimizer.zero_grad(set_to_none=True)
    with autocast(device, precision):
        logits = t.net(batch["src"], batch["tgt_in"])  # (B, T, V)
        mark()
        target = batch["tgt_out"]
        loss, _ = label_smoothed_nll(logits.flatten(0, 1), target.flatten(), cfg.label_smoothing, cfg.pad_id)
        loss = loss.sum() / (target != cfg.pad_id).sum().clamp(min=1)
        mark()
    loss.backward()
    mark()
    t.optimizer.step()
    mark()
    return loss


def run_training(trainees: list[Trainee], batches: list[dict], bench: BenchConfig, cfg: ModelConfig, precision, device):
    """Warm-up, then `repeats` rounds; in each round every system steps once on the same batch (rotating order)."""
    for r in range(bench.warmup + bench.repeats):
        batch = batches[r % len(batches)]
        for t in trainees[r % len(trainees) :] + trainees[: r % len(trainees)]:
            synchronize(device)
            start = time.perf_counter()
            loss = train_step(t, batch, cfg, precision, device)
            loss_value = float(loss.detach())  # a host sync, as Lightning's NaN check does every step
            elapsed = time.perf_counter() - start
            if loss_value != loss_value:
                raise AblateError(f"{t.name}: training loss became NaN in the benchmark")
            if r == 0:
                t.first_step_s = elapsed
            if r >= bench.warmup:
                t.times.append(elapsed)
                t.batch_ids.append(r % len(batches))


def memory_profile(t: Trainee, batch: dict, cfg: ModelConfig, precision: str, device) -> dict[str, Any]:
    """Peak memory of one training step of `t` (after warm-up, so Adam's state exists).

    CUDA: torch.cuda.max_memory_allocated above what was allocated before the step, plus this model's parameters
    and Adam state. CPU: an allocator-independent estimate, parameters + gradients + Adam state + the tensors
    autograd saves for backward; `rss_delta_mb` is the process's peak-RSS growth during the step (/proc), which
    undercounts memory that the allocator reuses from earlier steps.
    """
    import torch

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
        train_step(t, batch, cfg, precision, device)
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
        train_step(t, batch, cfg, precision, device)
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


def step_breakdown(t: Trainee, batches: list[dict], cfg: ModelConfig, precision: str, device) -> dict[str, float]:
    """Median milliseconds of each phase of our training step (forward, loss, backward, optimizer), synchronised."""
    phases: dict[str, list[float]] = {"forward": [], "loss": [], "backward": [], "optimizer": []}
    marks: list[float] = []

    def mark() -> None:
        synchronize(device)
        marks.append(time.perf_counter())

    for batch in batches:
        marks.clear()
        mark()
        train_step(t, batch, cfg, precision, device, mark)
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


def cpu_choices(ours: Trainee, batches: list[dict], bench: BenchConfig, cfg: ModelConfig, precision, device):
    """Median step time of our model with each of our CPU choices undone (CPU_CHOICES), same weights and batches,
    variants interleaved step by step; `speedup` is each variant's step time over ours (paired by batch)."""
    from ablate.lightning_modules.kernels import kernels_for
    from ablate.lightning_modules.transformer import Transformer

    variants = {}
    for name, choices in CPU_CHOICES.items():
        kernels = kernels_for("cpu", reference_parts=tuple(c for c in choices if c != "adam"))
        module = Transformer(cfg, kernels=kernels)  # the same model and weights through other kernels
        module.load_state_dict(ours.module.state_dict())
        variants[name] = (make_trainee(name, module, device, False, fused="adam" not in choices), choices)
    measured = batches[bench.warmup :] or batches
    for r in range(2 + min(len(measured), 15)):
        batch = measured[r % len(measured)]
        for trainee, _ in variants.values():
            start = time.perf_counter()
            float(train_step(trainee, batch, cfg, precision, device).detach())
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


def lightning_step_times(run, steps: int, device, precision: str, compile_model: bool) -> list[float]:
    """Seconds between consecutive batch ends when `TranslationModule` trains through the Lightning Trainer on the
    same data module (so the same first batches): data collation, Lightning's loop, logging and the step."""
    import pytorch_lightning as pl
    from ablate.data.datamodule import TranslationDataModule
    from ablate.lightning_modules.module import TranslationModule

    stamps: list[float] = []

    class StepClock(pl.Callback):
        def on_train_batch_end(self, *args: Any) -> None:
            synchronize(device)
            stamps.append(time.perf_counter())

    pl.seed_everything(run.train.seed, verbose=False)
    train = replace(run.train, compile=compile_model, max_steps=steps)
    module = TranslationModule(run.model, train, bos_id=BOS_ID, eos_id=EOS_ID)
    trainer = pl.Trainer(
        accelerator=device.type,
        devices=1,
        precision=precision,
        max_steps=steps,
        max_epochs=-1,
        limit_val_batches=0,
        num_sanity_val_steps=0,
        log_every_n_steps=run.tracking.log_every,
        use_distributed_sampler=False,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        callbacks=[StepClock()],
    )
    trainer.fit(module, datamodule=TranslationDataModule(run.data))
    return [b - a for a, b in zip(stamps, stamps[1:], strict=False)]


# ----------------------------------------------------------------------------------------------------- decoding
class DecodeClock:
    """Counts decoder steps (calls of the output projection) and, given the module each step starts with, the time
    spent inside the network."""

    def __init__(self, output_layer, device, step_start=None) -> None:
        self.steps, self.model_s, self.device, self._start = 0, 0.0, device, 0.0
        self.handles = [output_layer.register_forward_hook(self._end)]
        if step_start is not None:
            self.handles.append(step_start.register_forward_pre_hook(self._begin))

    def _begin(self, *args: Any) -> None:
        synchronize(self.device)
        self._start = time.perf_counter()

    def _end(self, *args: Any) -> None:
        self.steps += 1
        if self._start:
            synchronize(self.device)
            self.model_s += time.perf_counter() - self._start
            self._start = 0.0

    def close(self) -> None:
        for handle in self.handles:
            handle.remove()


def beam_bookkeeping(model, src, bench: BenchConfig, run, device) -> dict[str, float]:
    """Share of our beam search's time spent outside the network (selection, finished set, cache reordering)."""
    from ablate.lightning_modules.decoding import beam_search

    clock = DecodeClock(model.output, device, step_start=model.tgt_embed)
    encoder_end: list[float] = []
    enc = model.encoder_norm.register_forward_hook(lambda *args: encoder_end.append(time.perf_counter()))
    try:
        synchronize(device)
        start = time.perf_counter()
        beam_search(model, src, BOS_ID, EOS_ID, bench.beam_size, run.train.length_penalty, *_max_len(run))
        synchronize(device)
        total = time.perf_counter() - start
    finally:
        clock.close()
        enc.remove()
    encode = (encoder_end[0] if encoder_end else start) - start
    return {
        "total_s": total,
        "encode_s": encode,
        "decoder_s": clock.model_s,
        "bookkeeping_s": total - encode - clock.model_s,
        "bookkeeping_share": (total - encode - clock.model_s) / total,
        "steps": clock.steps,
    }


def _max_len(run) -> tuple[float, int]:
    return run.train.max_len_a, run.train.max_len_b


def run_decoding(ours, hf, src, bench: BenchConfig, run, precision: str, device) -> dict[str, dict]:
    """Beam and greedy decoding of one source batch, ours and (if given) HF generate, interleaved."""
    import torch
    from ablate.lightning_modules.decoding import beam_search, greedy_search

    alpha, (a, b) = run.train.length_penalty, _max_len(run)
    systems: dict[str, tuple[Any, Any]] = {
        "ours_beam": (ours.output, lambda: beam_search(ours, src, BOS_ID, EOS_ID, bench.beam_size, alpha, a, b)),
        "ours_greedy": (ours.output, lambda: greedy_search(ours, src, BOS_ID, EOS_ID, a, b)),
    }
    if hf is not None:
        systems["hf_beam"] = (
            hf.hf.lm_head,
            lambda: hf.generate(src, beam_size=bench.beam_size, alpha=alpha, max_len_a=a, max_len_b=b),
        )
        systems["hf_greedy"] = (
            hf.hf.lm_head,
            lambda: hf.generate(src, beam_size=1, alpha=alpha, max_len_a=a, max_len_b=b),
        )
    times: dict[str, list[float]] = {name: [] for name in systems}
    steps: dict[str, int] = {}
    lengths: dict[str, float] = {}
    names = list(systems)
    with contextlib.ExitStack() as stack:
        if bench.full_length:
            stack.enter_context(hold_back_eos(ours, hf))
        for r in range(1 + bench.decode_repeats):
            for name in names[r % len(names) :] + names[: r % len(names)]:
                layer, decode = systems[name]
                clock = DecodeClock(layer, device)
                synchronize(device)
                start = time.perf_counter()
                with torch.inference_mode(), autocast(device, precision):
                    out = decode()
                synchronize(device)
                elapsed = time.perf_counter() - start
                clock.close()
                if r == 0:
                    steps[name], lengths[name] = clock.steps, _mean_length(out)
                else:
                    times[name].append(elapsed)
    n = src.size(0)
    return {
        name: {
            "sentences_per_s": n / statistics.median(times[name]),
            "time_s": summarize(times[name]),
            "times_s": times[name],  # one per round; the systems take turns within a round: ratios pair them
            "decoder_steps": steps[name],
            "mean_output_tokens": lengths[name],
        }
        for name in systems
    }


@contextlib.contextmanager
def hold_back_eos(ours, hf):
    """Lower eos's logit by 1e4 in our model (a hook on the output layer) and in HF's (final_logits_bias), so every
    hypothesis runs to the length limit, where both searches force eos."""
    handle = ours.output.register_forward_hook(lambda module, args, out: out.index_fill(-1, _eos(out), -1e4))
    saved = None
    if hf is not None:
        saved = hf.hf.final_logits_bias.clone()
        hf.hf.final_logits_bias[..., EOS_ID] = -1e4
    try:
        yield
    finally:
        handle.remove()
        if hf is not None:
            hf.hf.final_logits_bias.copy_(saved)


def _eos(out):
    import torch

    return torch.tensor([EOS_ID], device=out.device)


def _mean_length(out) -> float:
    """Mean output length (tokens before eos, no bos/pad) of our lists or of HF's (B, L) tensor."""
    if not isinstance(out, list):
        rows = out.tolist()
        out = [
            [i for i in (row[: row.index(EOS_ID)] if EOS_ID in row else row) if i not in (PAD_ID, BOS_ID)]
            for row in rows
        ]
    return sum(len(row) for row in out) / max(1, len(out))


# ---------------------------------------------------------------------------------------------- trial overhead
def trial_overhead(bench: BenchConfig) -> dict[str, Any]:
    """Process start -> first training step of a fresh `ablate train` (warm caches), and the overhead of a second
    trial in the same process. Runs one short warm-up trial first (data caches, OS file cache of the libraries)."""
    from ablate.ablations.config import TrackingConfig
    from ablate.ablations.tracking import wandb_mode

    base = ["train", "--study", bench.study, "--row", bench.row, "--preset", bench.trial_preset, "--json"]
    with tempfile.TemporaryDirectory(prefix="ablate-bench-") as tmp:
        warm = [*base, "--out", f"{tmp}/warm", "--train.max_steps", "1", "--train.final_full_validation", "false"]
        _run_python(f"from ablate.ablations.cli import main; main({warm!r})")
        first, second = Path(tmp, "first"), Path(tmp, "second")
        code = (
            f"from ablate.ablations.cli import main; main({[*base, *bench.trial_args, '--out', str(first)]!r}); "
            f"main({[*base, *bench.trial_args, '--out', str(second)]!r})"
        )
        started = time.time()
        _run_python(code)
        m1 = json.loads((first / "result.json").read_text())["metrics"]
        m2 = json.loads((second / "result.json").read_text())["metrics"]
        # result.json is written at the end of the trial, wall_time_s after the trial's own start.
        trial_end = (first / "result.json").stat().st_mtime
        first_step = trial_end - m1["wall_time_s"] + m1["overhead_s"]
    process_to_first_step = first_step - started
    trial_wall = trial_end - started
    return {
        "trial": f"ablate train --preset {bench.trial_preset} --row {bench.row} " + " ".join(bench.trial_args),
        "wandb_mode": wandb_mode(TrackingConfig()),
        "process_to_first_step_s": process_to_first_step,
        "trial_wall_s": trial_wall,
        "overhead_share": process_to_first_step / trial_wall,
        "in_process_overhead_s": m2["overhead_s"],
        "in_process_trial_wall_s": m2["wall_time_s"],
        "in_process_overhead_share": m2["overhead_s"] / m2["wall_time_s"],
        "steps": m1["steps"],
    }


def _run_python(code: str) -> None:
    """Run `code` in a fresh interpreter that can import this checkout's packages."""
    root = str(Path(__file__).resolve().parent.parent)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    if proc.returncode:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
        raise AblateError(f"the per-trial overhead run failed (exit {proc.returncode}): {tail[0]}")


# --------------------------------------------------------------------------------------------------- the bench
def load_inputs(run, bench: BenchConfig, device) -> tuple[list[dict], Any, dict[str, Any]]:
    """The training batches (first of epoch 0), the decoding batch and data figures (padding, collation time)."""
    import numpy as np
    from ablate.data.datamodule import PadCollate, TranslationDataModule

    datamodule = TranslationDataModule(run.data)
    loader = datamodule.train_dataloader()
    index_lists = []
    for indices in loader.batch_sampler:
        index_lists.append(indices)
        if len(index_lists) == bench.warmup + bench.repeats:
            break
    collate = loader.collate_fn
    batches, collate_s = [], []
    for indices in index_lists:
        start = time.perf_counter()
        batch = collate(indices)
        collate_s.append(time.perf_counter() - start)
        batches.append({k: v.to(device) for k, v in batch.items()})
    corpus = datamodule.corpus
    valid = corpus.split("valid")
    rng = np.random.default_rng(bench.seed)
    chosen = sorted(rng.permutation(len(valid))[: bench.decode_sentences].tolist())
    src = PadCollate(corpus, "valid")(chosen)["src"].to(device)
    padding = corpus.padding(run.data.tokens_per_batch, run.data.seed)
    measured = batches[bench.warmup :] or batches
    real = sum(int((b["src"] != 0).sum() + (b["tgt_out"] != 0).sum()) for b in measured)
    slots = sum(b["src"].numel() + b["tgt_out"].numel() for b in measured)
    data = {
        "vocab_size": corpus.vocab_size,
        "tokens_per_batch": run.data.tokens_per_batch,
        "padding_ours": padding["bucketed"]["overhead"],
        "padding_random": padding["random"]["overhead"],
        "padding_measured_batches": 1 - real / slots,
        "pairs_per_batch": statistics.mean(b["src"].size(0) for b in measured),
        "collate_ms": summarize([s * 1000 for s in collate_s]),
        "decode_sentences": src.size(0),
        "decode_src_len": int(src.size(1)),
    }
    return batches, src, data


def batch_figures(batch: dict, cfg: ModelConfig) -> tuple[int, int, float]:
    """Real source tokens, real target tokens and model FLOPs of one training step on `batch`."""
    src, tgt = int((batch["src"] != cfg.pad_id).sum()), int((batch["tgt_out"] != cfg.pad_id).sum())
    return src, tgt, train_flops(cfg, src, tgt, batch["src"].size(1), batch["tgt_in"].size(1))


def throughput(times: list[float], figures: list[tuple[int, int, float]], peak: float | None) -> dict[str, Any]:
    """Per-step rates, summarised by their median (robust to bursts of load from other jobs): target tokens/s,
    source+target tokens/s, model FLOP/s and MFU; plus the step times' median and spread."""
    tgt = [f[1] / t for t, f in zip(times, figures, strict=True)]
    both = [(f[0] + f[1]) / t for t, f in zip(times, figures, strict=True)]
    flops = [f[2] / t for t, f in zip(times, figures, strict=True)]
    model_flops = statistics.median(flops)
    return {
        "tgt_tokens_per_s": statistics.median(tgt),
        "tokens_per_s": statistics.median(both),
        "tgt_tokens_per_s_iqr": summarize(tgt)["iqr"],
        "step_time_s": summarize(times),
        "model_flops_per_s": model_flops,
        "mfu": model_flops / peak if peak else None,
    }


def run_bench(bench: BenchConfig, progress=None) -> dict[str, Any]:
    """Measure everything `ablate bench` reports; returns the JSON-ready result."""
    say = progress or (lambda message: None)
    run, device, precision = setup(bench)
    say("preparing data")
    batches, src, data = load_inputs(run, bench, device)
    cfg = replace(run.model, vocab_size=data["vocab_size"])
    run = replace(run, model=cfg)

    trainees = build_trainees(bench, cfg, device)
    say(f"training: {bench.warmup} + {bench.repeats} steps each for {', '.join(t.name for t in trainees)} on {device}")
    run_training(trainees, batches, bench, cfg, precision, device)
    figures = [batch_figures(b, cfg) for b in batches]
    measured = [figures[i] for i in trainees[0].batch_ids]
    info = device_info(device)
    training = {t.name: training_figures(t, batches, figures, cfg, precision, device, info) for t in trainees}
    ours = trainees[0]
    breakdown = step_breakdown(ours, [batches[i] for i in ours.batch_ids[:10]], cfg, precision, device)
    profile: dict[str, Any] = {"train_step_ms": {**breakdown, "collate": data["collate_ms"]["median"]}}
    if device.type == "cpu":
        say("training: our CPU choices against PyTorch's defaults")
        profile["cpu_choices"] = cpu_choices(ours, batches, bench, cfg, precision, device)
    if bench.lightning:
        say("training through the Lightning Trainer")
        training["ours_lightning"] = lightning_figures(run, bench, device, precision, figures, info)
        profile["lightning_overhead_ms"] = 1000 * (
            training["ours_lightning"]["step_time_s"]["median"] - training["ours"]["step_time_s"]["median"]
        )
    cuda = sdpa_check(ours, batches[0], precision, device) if device.type == "cuda" else None

    say(f"decoding {src.size(0)} sentences: beam {bench.beam_size} and greedy")
    decoding, profile["beam_search"] = decoding_figures(trainees, src, bench, run, precision, device)

    overhead = None
    if bench.overhead:
        say(f"per-trial overhead: ablate train --preset {bench.trial_preset} in fresh processes")
        overhead = trial_overhead(bench)

    result = {
        "date": time.strftime("%Y-%m-%d"),
        "config": {**asdict(bench), "precision": precision, "device": device.type},
        "device": info,
        "model": model_figures(cfg, training["ours"]["params"], measured),
        "data": data,
        "training": training,
        "decoding": decoding,
        "overhead": overhead,
        "profile": profile,
        "cuda": cuda,
    }
    result["ratios"] = ratios(result)
    result["targets"] = targets(result)
    return result


def build_trainees(bench: BenchConfig, cfg, device) -> list:
    """Ours first, then the peers, all initialised from the bench's seed."""
    import torch
    from ablate.benchmarks.peers import build_peer
    from ablate.lightning_modules.transformer import Transformer

    torch.manual_seed(bench.seed)
    modules = {"ours": Transformer(cfg)}
    for name in bench.peers:
        modules[name] = build_peer(name, cfg, BOS_ID, EOS_ID)
    return [make_trainee(name, module, device, bench.compile) for name, module in modules.items()]


def setup(bench: BenchConfig):
    """The benchmarked run's config, device and precision; the peers are checked before any work."""
    import torch
    from ablate.ablations.studies import load_study
    from ablate.benchmarks.peers import check_peer

    extra = {"data": {"corpus": bench.corpus}} if bench.corpus else {}
    run = load_study(bench.study).run_config(bench.row, bench.preset, seed=bench.seed, **extra)
    device = resolve_device(bench.device)
    if bench.threads:
        torch.set_num_threads(bench.threads)
    for name in bench.peers:
        check_peer(name, run.model)
    return run, device, resolve_precision(bench.precision, device)


def decoding_figures(trainees: list[Trainee], src, bench: BenchConfig, run, precision: str, device):
    """Beam and greedy decoding speed of ours (and HF's), and where our beam search spends its time."""
    import torch

    for t in trainees:
        t.module.eval()
    ours = trainees[0].module
    hf = next((t.module for t in trainees if t.name == "hf"), None)
    decoding = run_decoding(ours, hf, src, bench, run, precision, device)
    with torch.inference_mode(), autocast(device, precision), contextlib.ExitStack() as stack:
        if bench.full_length:
            stack.enter_context(hold_back_eos(ours, None))
        return decoding, beam_bookkeeping(ours, src, bench, run, device)


def training_figures(t: Trainee, batches, figures, cfg: ModelConfig, precision, device, info) -> dict[str, Any]:
    """One system's training throughput, step times and peak memory."""
    return {
        "params": sum(p.numel() for p in t.module.parameters()),
        **throughput(t.times, [figures[i] for i in t.batch_ids], info["peak_bf16_flops"]),
        "first_step_s": t.first_step_s,
        "step_times_s": t.times,  # in batch order, the same batches for every system: ratios pair them
        "memory": memory_profile(t, batches[t.batch_ids[0]], cfg, precision, device),
    }


def lightning_figures(run, bench: BenchConfig, device, precision: str, figures, info) -> dict[str, Any]:
    """Throughput of our training through the Lightning Trainer, on the same first batches."""
    intervals = lightning_step_times(run, bench.warmup + bench.repeats, device, precision, bench.compile)
    # Interval j runs from the end of batch j to the end of batch j + 1 (its data loading included).
    timed = [(seconds, j + 1) for j, seconds in enumerate(intervals) if j + 1 >= bench.warmup]
    return throughput(
        [seconds for seconds, _ in timed], [figures[i % len(figures)] for _, i in timed], info["peak_bf16_flops"]
    )


def model_figures(cfg: ModelConfig, params: int, measured: list[tuple[int, int, float]]) -> dict[str, Any]:
    """The benchmarked configuration, its size and its training FLOPs per token."""
    src_tokens, tgt_tokens, flops = (sum(column) for column in zip(*measured, strict=True))
    return {
        **cfg.resolved(),
        "params": params,
        "train_flops_per_tgt_token": flops / tgt_tokens,
        "train_flops_per_token": flops / (tgt_tokens + src_tokens),
        "tgt_tokens_per_batch": tgt_tokens / len(measured),
    }


def sdpa_check(ours: Trainee, batch: dict, precision: str, device) -> dict[str, Any]:
    """Which fused attention kernels run our forward: each backend alone (does the model run with only it?) and
    the CUDA kernels the default dispatcher actually launched (profiler kernel names)."""
    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel

    model = ours.module
    out: dict[str, Any] = {"fused_adam": True, "bf16_autocast": precision == "bf16-mixed"}
    for name, backend in (("flash", SDPBackend.FLASH_ATTENTION), ("efficient", SDPBackend.EFFICIENT_ATTENTION)):
        try:
            with torch.no_grad(), sdpa_kernel([backend]), autocast(device, precision):
                model(batch["src"], batch["tgt_in"])
            out[f"{name}_runs_whole_model"] = True
        except RuntimeError:
            out[f"{name}_runs_whole_model"] = False
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof, torch.no_grad(), autocast(device, precision):
        model(batch["src"], batch["tgt_in"])
        synchronize(device)
    names = {e.name for e in prof.events()}
    keys = ("flash", "fmha", "efficient_attention", "mem_eff", "attention")
    out["attention_kernels"] = sorted(n for n in names if any(k in n.lower() for k in keys))[:10]
    out["math_fallback"] = not any(k in n.lower() for n in out["attention_kernels"] for k in keys[:4])
    return out


def paired_speedup(ours: list[float], peer: list[float]) -> float | None:
    """Median over paired measurements (same batch or same round, taken back to back) of peer time / our time.

    Load from other jobs comes and goes within seconds on a shared machine; pairing cancels it where separate
    medians of each system would not (it is ours/peer in tokens/s or sentences/s: the work is identical)."""
    pairs = [p / o for o, p in zip(ours, peer, strict=False) if o > 0]
    return statistics.median(pairs) if pairs else None


def ratios(result: dict[str, Any]) -> dict[str, float | None]:
    """ours / peer for training target tokens/s (model step, paired by batch; and through Lightning, a separate run
    compared by medians) and decoding sentences/s (paired by round)."""
    train, dec = result["training"], result["decoding"]
    out: dict[str, float | None] = {}
    for peer in ("hf", "torch"):
        if peer in train:
            out[f"train_tok_s_ours_vs_{peer}"] = paired_speedup(
                train["ours"]["step_times_s"], train[peer]["step_times_s"]
            )
            if "ours_lightning" in train:
                lightning = train["ours_lightning"]["tgt_tokens_per_s"]
                out[f"train_tok_s_lightning_vs_{peer}"] = _ratio(lightning, train[peer]["tgt_tokens_per_s"])
            out[f"peak_memory_ours_vs_{peer}"] = _ratio(
                train["ours"]["memory"]["peak_mb"], train[peer]["memory"]["peak_mb"]
            )
    if "hf_beam" in dec:
        out["beam_sent_s_ours_vs_hf"] = paired_speedup(dec["ours_beam"]["times_s"], dec["hf_beam"]["times_s"])
        out["greedy_sent_s_ours_vs_hf"] = paired_speedup(dec["ours_greedy"]["times_s"], dec["hf_greedy"]["times_s"])
    return out


def targets(result: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The issue's targets with the measured value and whether it is met (None: not measured in this run)."""
    r, data, over, train = result["ratios"], result["data"], result["overhead"], result["training"]

    def check(value, ok) -> dict[str, Any]:
        return {"value": value, "met": None if value is None else bool(ok(value))}

    mfu = train["ours"]["mfu"]
    return {
        "train_vs_hf_at_least_1.2x": check(r.get("train_tok_s_ours_vs_hf"), lambda v: v >= 1.2),
        "train_vs_torch_at_least_1x": check(r.get("train_tok_s_ours_vs_torch"), lambda v: v >= 1.0),
        "beam4_vs_hf_at_least_2x": check(r.get("beam_sent_s_ours_vs_hf"), lambda v: v >= 2.0),
        "padding_at_most_5pct": check(data["padding_ours"], lambda v: v <= 0.05),
        # Per-trial overhead as a sweep pays it: its workers train trial after trial in one process.
        "trial_overhead_under_10pct": check(over and over["in_process_overhead_share"], lambda v: v < 0.10),
        "trial_overhead_under_5s": check(over and over["in_process_overhead_s"], lambda v: v < 5.0),
        # A lone `ablate train` in a fresh process: imports (Lightning, torch, W&B) dominate.
        "fresh_process_overhead_under_10pct": check(over and over["overhead_share"], lambda v: v < 0.10),
        "fresh_process_overhead_under_5s": check(over and over["process_to_first_step_s"], lambda v: v < 5.0),
        "mfu_at_least_40pct": check(mfu, lambda v: v >= 0.40),
    }


# ------------------------------------------------------------------------------------------------------- report
def format_report(result: dict[str, Any]) -> str:
    """The human-readable summary `ablate bench` prints without --json."""
    dev, cfg, model = result["device"], result["config"], result["model"]
    lines = [
        f"ablate bench: {cfg['study']} row {cfg['row']} at preset {cfg['preset']} on {dev['name']}"
        + (f" ({dev['threads']} threads)" if dev.get("threads") else "")
        + f", {cfg['precision']}{', compiled' if cfg['compile'] else ''}",
        f"model: {model['params'] / 1e6:.2f}M params, {model['train_flops_per_tgt_token'] / 1e6:.1f} MFLOP per "
        f"target token (train step); batches of {result['data']['pairs_per_batch']:.0f} pairs, "
        f"{model['tgt_tokens_per_batch']:.0f} target tokens",
        "",
        f"{'training':<16} {'tgt tok/s':>10} {'tok/s':>10} {'step ms':>8} {'IQR ms':>7} {'peak MB':>8} {'GFLOP/s':>8}",
    ]
    lines += [_training_line(name, t) for name, t in result["training"].items()]
    lines += ["", f"{'decoding':<16} {'sent/s':>10} {'median s':>9} {'steps':>6} {'out len':>8}"]
    for name, d in result["decoding"].items():
        lines.append(
            f"{name:<16} {d['sentences_per_s']:>10.1f} {d['time_s']['median']:>9.3f} {d['decoder_steps']:>6} "
            f"{d['mean_output_tokens']:>8.1f}"
        )
    lines += _profile_lines(result)
    lines += ["", "ratios ours/peer: " + ", ".join(f"{k} {_num(v, '{:.2f}x')}" for k, v in result["ratios"].items())]
    lines.append(
        "targets: "
        + ", ".join(
            f"{k} {'met' if t['met'] else 'NOT met' if t['met'] is not None else 'not measured'}"
            for k, t in result["targets"].items()
        )
    )
    return "\n".join(lines)


def _training_line(name: str, t: dict[str, Any]) -> str:
    step = t["step_time_s"]
    mem = t.get("memory", {}).get("peak_mb")
    gflops = t.get("model_flops_per_s")
    return (
        f"{name:<16} {_num(t['tgt_tokens_per_s'], '{:,.0f}'):>10} {_num(t['tokens_per_s'], '{:,.0f}'):>10} "
        f"{step['median'] * 1000:>8.1f} {step['iqr'] * 1000:>7.1f} {_num(mem, '{:.1f}'):>8} "
        f"{_num(gflops and gflops / 1e9, '{:.1f}'):>8}"
    )


def _profile_lines(result: dict[str, Any]) -> list[str]:
    """Padding, per-trial overhead, our step's breakdown, the CPU kernels' effect, beam search, CUDA checks."""
    lines = []
    data = result["data"]
    lines += [
        "",
        f"padding: ours {data['padding_ours']:.1%}, random batching {data['padding_random']:.1%} "
        f"(budget {data['tokens_per_batch']} tokens); collation {data['collate_ms']['median']:.2f} ms/batch",
    ]
    over = result["overhead"]
    if over:
        lines.append(
            f"per-trial overhead: process start -> first step {over['process_to_first_step_s']:.2f} s of a "
            f"{over['trial_wall_s']:.1f} s trial ({over['overhead_share']:.0%}); a second trial in the same process: "
            f"{over['in_process_overhead_s']:.2f} s ({over['in_process_overhead_share']:.1%})"
        )
    prof = result["profile"]
    step = prof["train_step_ms"]
    lines.append(
        "our step (ms): "
        + ", ".join(f"{k} {v:.1f}" for k, v in step.items())
        + (f"; Lightning adds {prof['lightning_overhead_ms']:.1f} ms/step" if "lightning_overhead_ms" in prof else "")
    )
    if "cpu_choices" in prof:
        lines.append(
            "our CPU choices, step ms with each undone: "
            + ", ".join(f"{k} {v['step_ms']:.1f} ({v['speedup']:.2f}x)" for k, v in prof["cpu_choices"].items())
        )
    beam = prof["beam_search"]
    lines.append(
        f"beam search: {beam['bookkeeping_share']:.0%} of the time outside the network "
        f"({beam['steps']} steps, {beam['total_s']:.2f} s)"
    )
    if result["cuda"]:
        lines.append(f"cuda: {json.dumps(result['cuda'])}")
    return lines


def _num(value: float | None, fmt: str) -> str:
    return "-" if value is None else fmt.format(value)
