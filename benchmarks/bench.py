"""The benchmark harness behind `ablate bench`: our training and decoding speed, side by side with the peers
(other implementations, or our model as another row of the study builds it: `--vs row:NAME`).

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
Model FLOPs come from torch's FlopCounterMode (`benchmarks.mfu`); MFU is reported against the device's peak bf16
FLOP/s. The measurements live in their own modules: `timing` (training), `decoding`, `overhead`, `mfu`, `device`,
and `summary` (ratios, targets, the printed report); this module runs them in order.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, replace
from typing import Any

import numpy as np
import torch
from ablate.ablations.study.definition import load_study
from ablate.benchmarks.attention import attention_figures
from ablate.benchmarks.decoding import decoding_figures
from ablate.benchmarks.device import autocast, device_info, resolve_device, resolve_precision, synchronize
from ablate.benchmarks.host import host_costs
from ablate.benchmarks.mfu import flop_figures, model_figures, throughput
from ablate.benchmarks.overhead import trial_overhead
from ablate.benchmarks.peers import build_peer, check_peer, row_of
from ablate.benchmarks.settings import BenchConfig, Setup
from ablate.benchmarks.summary import format_report, ratios, targets
from ablate.benchmarks.timing import (
    Trainee,
    cpu_choices,
    lightning_step_times,
    make_trainee,
    memory_profile,
    run_training,
    step_breakdown,
    summarize,
)
from ablate.data.datamodule import PadCollate, TranslationDataModule
from ablate.data.errors import AblateError
from ablate.data.tokenizer import BOS_ID, EOS_ID
from ablate.lightning_modules.config import for_compile, on_cpu
from ablate.lightning_modules.kernels import eager
from ablate.lightning_modules.transformer import Transformer
from torch._dynamo.utils import counters
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.profiler import ProfilerActivity, profile

__all__ = ["BenchConfig", "Setup", "format_report", "run_bench"]


def load_inputs(run, bench: BenchConfig, device) -> tuple[list[dict], Any, dict[str, Any]]:
    """The training batches (first of epoch 0), the decoding batch and data figures (padding, collation time)."""
    datamodule = TranslationDataModule(run.data)
    loader = datamodule.train_dataloader()
    index_lists = []
    assert loader.batch_sampler is not None  # the data module batches by token budget
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
    padding = corpus.padding(run.data.tokens_per_batch, run.data.seed, run.data.buckets)
    measured = batches[bench.warmup :] or batches
    real = sum(int((b["src"] != 0).sum() + (b["tgt_out"] != 0).sum()) for b in measured)
    slots = sum(b["src"].numel() + b["tgt_out"].numel() for b in measured)
    data = {
        "vocab_size": corpus.vocab_size,
        "tokens_per_batch": run.data.tokens_per_batch,
        "padding_ours": padding["bucketed"]["overhead"],
        "padding_random": padding["random"]["overhead"],
        "padding_measured_batches": 1 - real / slots,
        "padding_fixed_shapes": padding["fixed"]["overhead"],
        "buckets": run.data.buckets,
        "run_shapes": run_shapes(loader.batch_sampler, run.train.max_steps),
        "pairs_per_batch": statistics.mean(b["src"].size(0) for b in measured),
        "collate_ms": summarize([s * 1000 for s in collate_s]),
        "decode_sentences": src.size(0),
        "decode_src_len": int(src.size(1)),
    }
    return batches, src, data


RUN_SHAPES_MAX_EPOCHS = 200
"""Epochs of greedy batches `run_shapes` plans at most (fixed shapes are counted exactly, without planning)."""


def run_shapes(sampler, max_steps: int) -> dict[str, Any]:
    """The distinct (batch, source, target) shapes a run of `max_steps` batches sees: with data.buckets exactly, from
    the buckets; with greedy batches by planning its epochs (at most RUN_SHAPES_MAX_EPOCHS; `complete` says whether
    that covered the run). Each new shape costs a GPU an attention plan and, compiled, possibly a graph."""
    if sampler.shapes is not None:
        return {"shapes": len(sampler.shapes.shapes(every_pair=False)), "epochs": None, "complete": True}
    epochs = math.ceil(max_steps / max(len(sampler), 1))
    seen = set()
    for epoch in range(min(epochs, RUN_SHAPES_MAX_EPOCHS)):
        sampler.set_epoch(epoch)
        for batch in sampler:  # this rank's batches, as index lists
            seen.add((len(batch), int(sampler.src_len[batch].max()), int(sampler.tgt_len[batch].max())))
    sampler.set_epoch(0)
    return {"shapes": len(seen), "epochs": epochs, "complete": epochs <= RUN_SHAPES_MAX_EPOCHS}


def run_bench(bench: BenchConfig, progress=None) -> dict[str, Any]:
    """Measure everything `ablate bench` reports; returns the JSON-ready result."""
    say = progress or (lambda message: None)
    s, batches, src, data = _prepare(bench, say)
    trainees = build_trainees(bench, s)
    training, flops, info, compiled = _train(trainees, batches, bench, s, say)
    profile = _profile(trainees[0], batches, data, bench, s, say)
    if bench.lightning:
        say("training through the Lightning Trainer")
        training["ours_lightning"] = lightning_figures(s, bench, flops["ours"], info)
        profile["lightning_overhead_ms"] = 1000 * (
            training["ours_lightning"]["step_time_s"]["median"] - training["ours"]["step_time_s"]["median"]
        )
    if bench.host:
        say("counting a step's operators and host syncs on the card's path")
        profile["host"] = host_costs(s.run, accelerator=s.device.type)
    cuda = sdpa_check(trainees[0], batches[0], s) if s.device.type == "cuda" else None
    if bench.attention:
        say(f"attention over padded sources: {len(batches)} batches, kernel against kernel")
        profile["attention"] = attention_figures(batches, s)

    say(f"decoding {src.size(0)} sentences: beam {bench.beam_size} and greedy")

    with eager():  # layers compiled in place (--compile_scope layers) decode eagerly, as in training runs
        decoding, profile["beam_search"] = decoding_figures(trainees, src, bench, s)

    overhead = None
    if bench.overhead:
        say(f"per-trial overhead: ablate train --preset {bench.trial_preset} in fresh processes")
        overhead = trial_overhead(bench)

    measured = {name: [figures[i] for i in trainees[0].batch_ids] for name, figures in flops.items()}
    result = {
        "date": time.strftime("%Y-%m-%d"),
        "config": {**asdict(bench), "precision": s.precision, "device": s.device.type},
        "device": info,
        "model": model_figures(s.cfg, training["ours"]["params"], measured["ours"]),
        "row_models": {
            name: model_figures(cfg, training[name]["params"], measured[name]) for name, cfg in s.rows.items()
        },
        "data": data,
        "training": training,
        "decoding": decoding,
        "overhead": overhead,
        "profile": profile,
        "cuda": cuda,
        "compile": compiled,
    }
    result["ratios"] = ratios(result)
    result["targets"] = targets(result)
    return result


def _prepare(bench: BenchConfig, say: Callable[[str], None]) -> tuple[Setup, list[dict], Any, dict[str, Any]]:
    """The setup, with the vocabulary the data gave, and the inputs (`load_inputs`)."""
    s = setup(bench)
    say("preparing data")
    batches, src, data = load_inputs(s.run, bench, s.device)
    vocab = data["vocab_size"]
    s = replace(
        s,
        run=replace(s.run, model=replace(s.cfg, vocab_size=vocab)),
        rows={name: replace(cfg, vocab_size=vocab) for name, cfg in s.rows.items()},
    )
    return s, batches, src, data


def _train(
    trainees: list[Trainee], batches: list[dict], bench: BenchConfig, s: Setup, say: Callable[[str], None]
) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any], dict[str, Any] | None]:
    """Train every trainee; (training figures, FLOPs per batch of ours and each row peer, device, compile figures)."""
    names = ", ".join(t.name for t in trainees)
    say(f"training: {bench.warmup} + {bench.repeats} steps each for {names} on {s.device}")
    run_training(trainees, batches, bench, s)
    compiled = compile_figures(trainees) if bench.compile else None
    # A row peer's FLOPs are its own (a gated FFN, fewer K/V heads): counted on its module, like ours.
    flops = {t.name: flop_figures(t.module, batches, s.of_row(t.name)) for t in trainees if t.name in s.rows}
    figures = flops["ours"] = flop_figures(trainees[0].module, batches, s)
    info = device_info(s.device)
    training = {t.name: training_figures(t, batches, flops.get(t.name, figures), s, info) for t in trainees}
    return training, flops, info, compiled


def _profile(
    ours: Trainee, batches: list[dict], data: dict[str, Any], bench: BenchConfig, s: Setup, say: Callable[[str], None]
) -> dict[str, Any]:
    """Where our training step's time goes, and on a CPU our choices against PyTorch's defaults."""
    breakdown = step_breakdown(ours, [batches[i] for i in ours.batch_ids[:10]], s)
    profile: dict[str, Any] = {"train_step_ms": {**breakdown, "collate": data["collate_ms"]["median"]}}
    if s.device.type == "cpu":
        say("training: our CPU choices against PyTorch's defaults")
        profile["cpu_choices"] = cpu_choices(ours, batches, bench, s)
    return profile


def build_trainees(bench: BenchConfig, s: Setup) -> list[Trainee]:
    """Ours first, then the peers, all initialised from the bench's seed."""
    torch.manual_seed(bench.seed)
    torch.backends.cuda.enable_cudnn_sdp(s.run.train.cudnn_attention)  # as TranslationModule.configure_model does
    cfg = for_compile(s.cfg) if bench.compile else s.cfg
    modules: dict[str, torch.nn.Module] = {"ours": Transformer(cfg)}
    for name in bench.peers:
        modules[name] = Transformer(s.rows[name]) if name in s.rows else build_peer(name, s.cfg, BOS_ID, EOS_ID)
    fused = {"ours": s.run.train.fused_loss}  # our run's loss; a peer (or another row) trains through its logits
    return [
        make_trainee(
            name, module, s.device, bench.compile, fused_loss=fused.get(name, False), scope=bench.compile_scope
        )
        for name, module in modules.items()
    ]


def setup(bench: BenchConfig) -> Setup:
    """The benchmarked run's config, device and precision; the peers are checked before any work."""
    extra = {section: dict(fields) for section, fields in bench.settings.items()}
    if bench.corpus:
        extra["data"] = {**extra.get("data", {}), "corpus": bench.corpus}
    study = load_study(bench.study)
    run = study.run_config(bench.row, bench.preset, seed=bench.seed, **extra)
    rows = {}
    for name in bench.peers:
        row = row_of(name)
        if row is None:
            check_peer(name, run.model)
            continue
        other = study.run_config(row, bench.preset, seed=bench.seed, **extra)
        if other.data != run.data:
            raise AblateError(
                f"--vs {name}: row {row} of {study.name} changes data settings, so it cannot train on row "
                f"{bench.row}'s batches: compare rows that differ in model settings only"
            )
        rows[name] = other.model
    device = resolve_device(bench.device)
    if device.type == "cpu" and not bench.compile:  # compiled: the reference kernels (for_compile)
        run = replace(run, model=on_cpu(run.model))
        rows = {name: on_cpu(cfg) for name, cfg in rows.items()}
    if bench.threads:
        torch.set_num_threads(bench.threads)
    return Setup(run, device, resolve_precision(bench.precision, device), rows)


def compile_figures(trainees: list[Trainee]) -> dict[str, Any]:
    """What torch.compile did over the warm-up, the untimed pass and the timed steps (all shapes of the timed batches,
    each seen at least twice): graphs compiled by dynamo for all systems together (one per system and per recompile),
    graph breaks, and our first step (compilation included) against our warm median."""
    ours = trainees[0]
    return {
        "systems": len(trainees),
        "graphs": counters["stats"]["unique_graphs"],
        "graph_breaks": sum(counters["graph_break"].values()),
        "ours_first_step_s": ours.first_step_s,
        "ours_warm_step_s": statistics.median(ours.times) if ours.times else None,
    }


def training_figures(t: Trainee, batches, figures, s: Setup, info) -> dict[str, Any]:
    """One system's training throughput, step times and peak memory."""
    return {
        "params": sum(p.numel() for p in t.module.parameters()),
        **throughput(t.times, [figures[i] for i in t.batch_ids], info["peak_bf16_flops"]),
        "first_step_s": t.first_step_s,
        "cold_step_time_s": summarize(t.cold_times),  # the untimed pass: each batch's shape seen for the first time
        "step_times_s": t.times,  # in batch order, the same batches for every system: ratios pair them
        "memory": memory_profile(t, batches[t.batch_ids[0]], s),
    }


def lightning_figures(s: Setup, bench: BenchConfig, figures, info) -> dict[str, Any]:
    """Throughput of our training through the Lightning Trainer, on the same first batches."""
    intervals = lightning_step_times(s, bench.warmup + bench.repeats, bench.compile, bench.compile_scope)
    # Interval j runs from the end of batch j to the end of batch j + 1 (its data loading included).
    timed = [(seconds, j + 1) for j, seconds in enumerate(intervals) if j + 1 >= bench.warmup]
    return throughput(
        [seconds for seconds, _ in timed], [figures[i % len(figures)] for _, i in timed], info["peak_bf16_flops"]
    )


def sdpa_check(ours: Trainee, batch: dict, s: Setup) -> dict[str, Any]:
    """Which fused attention kernels run our forward: each backend alone (does the model run with only it?) and
    the CUDA kernels the default dispatcher actually launched (profiler kernel names)."""
    model, device, precision = ours.module, s.device, s.precision
    out: dict[str, Any] = {"fused_adam": True, "bf16_autocast": precision == "bf16-mixed"}
    for name, backend in (("flash", SDPBackend.FLASH_ATTENTION), ("efficient", SDPBackend.EFFICIENT_ATTENTION)):
        try:
            with sdpa_kernel([backend]), autocast(device, precision):  # with gradients: as a training step runs
                model(batch["src"], batch["tgt_in"])
            out[f"{name}_runs_whole_model"] = True
        except RuntimeError:
            out[f"{name}_runs_whole_model"] = False

    with profile(activities=[ProfilerActivity.CUDA]) as prof, autocast(device, precision):
        model(batch["src"], batch["tgt_in"])
        synchronize(device)
    names = {e.name for e in prof.events() or []}
    keys = ("flash", "fmha", "efficient_attention", "mem_eff", "attention")
    out["attention_kernels"] = sorted(n for n in names if any(k in n.lower() for k in keys))[:10]
    out["math_fallback"] = not any(k in n.lower() for n in out["attention_kernels"] for k in keys[:4])
    return out
