"""Model FLOPs and MFU: the FLOPs of one training step on a batch, throughput from step times, and the model's size.

`train_flops` is the analytic count (matrix multiplies as 2mnk) of the paper's block; `counted_flops` asks torch's
`FlopCounterMode` for the same step, so any model knob (gated feed-forward, grouped keys and values, ...) is counted
without a formula to update. The bench uses the counted FLOPs (once per batch shape) and keeps the analytic count
beside it as a check.
"""

from __future__ import annotations

import copy
import statistics
from typing import Any

import torch
from ablate.benchmarks.timing import summarize
from ablate.lightning_modules.config import ModelConfig
from torch.utils.flop_counter import FlopCounterMode


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


def counted_flops(module, src_shape: tuple[int, int], tgt_shape: tuple[int, int], cfg: ModelConfig) -> float:
    """FLOPs of one training step (forward and backward, every position, no padding) of `module` on a batch of these
    shapes, counted by torch's FlopCounterMode on a copy of the module on its own device: what the kernels are asked
    to do, for any knob, with no formula to keep in step with the model. (Not on the meta device: the model checks
    its input for padding, which needs values.)"""
    twin = copy.deepcopy(module)
    device = next(twin.parameters()).device
    src = torch.full(src_shape, cfg.pad_id + 1, dtype=torch.long, device=device)
    tgt = torch.full(tgt_shape, cfg.pad_id + 1, dtype=torch.long, device=device)
    with FlopCounterMode(display=False) as counter:
        twin(src, tgt).float().sum().backward()
    return float(counter.get_total_flops())


def flop_figures(module, batches: list[dict], s) -> list[tuple[int, int, float]]:
    """Per batch: real source tokens, real target tokens and the model FLOPs of a training step on it. The FLOPs are
    counted once per batch shape (`counted_flops`) and scaled by the batch's share of real (non-pad) positions, so
    MFU counts useful work, as the analytic convention (`train_flops`) does."""
    cfg, counted, out = s.cfg, {}, []
    for batch in batches:
        shapes = (tuple(batch["src"].shape), tuple(batch["tgt_in"].shape))
        if shapes not in counted:
            counted[shapes] = counted_flops(module, *shapes, cfg)
        src, tgt = int((batch["src"] != cfg.pad_id).sum()), int((batch["tgt_out"] != cfg.pad_id).sum())
        positions = batch["src"].numel() + batch["tgt_in"].numel()
        out.append((src, tgt, counted[shapes] * (src + tgt) / positions))
    return out


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
