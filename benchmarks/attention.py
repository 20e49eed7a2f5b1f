"""Attention over padded sources, kernel against kernel, on the bench's own batches (`ablate bench --attention`).

Our model attends with F.scaled_dot_product_attention and, where the source is padded, a key mask (B, 1, 1, S)
(`masked`, today's). A mask rules PyTorch's flash kernel out on a GPU: the memory-efficient kernel runs the
encoder's self-attention and the cross-attention (the decoder's causal self-attention takes no mask and already
runs flash). Before the model changes (issue 54), the ways to drop that mask are measured here on the run's own
shapes, and the model's path chosen from the figures:

- `jagged` (the model's `model.kernels: jagged`): keys and values as nested jagged tensors with the padding
  dropped, queries dense as jagged ones; SDPA then runs the flash kernel over variable lengths on a GPU (PyTorch's
  math path on a CPU: there it is a correctness check, not a candidate);
- `flex`: FlexAttention, compiled once for all shapes, the padding as a block mask (blocks wholly padded skipped);
  on a GPU only (compiled for a CPU it costs minutes and measures nothing the card needs);
- `unpadded`: SDPA with no mask at the same shapes: what flash would cost were nothing padded. A bound, not a
  candidate (it attends to padding).

Each is timed forward and backward at the encoder's self-attention (queries = keys = the source) and the
cross-attention (target queries, source keys) of each batch, with random queries, keys and values in the run's
precision, no dropout, and checked against `masked` on every query row (padded query rows included).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from ablate.benchmarks.device import synchronize
from ablate.benchmarks.settings import Setup
from ablate.lightning_modules.kernels import jagged_keys_attention
from torch.nn.attention.flex_attention import create_block_mask, flex_attention

CANDIDATES = ("masked", "jagged", "flex", "unpadded")


def masked(q, k, v, keep):
    """Today's: q (B, h, L, d), k/v (B, h, S, d), keep (B, S) True where a key may be attended."""
    return F.scaled_dot_product_attention(q, k, v, attn_mask=keep[:, None, None, :])


def jagged(q, k, v, keep):
    """The model's `kernels: jagged` attention: keys and values as nested jagged tensors, queries whole."""
    return jagged_keys_attention(q, k, v, keep)


def flex(q, k, v, keep, attend: Callable | None = None):
    """FlexAttention with the padding as a block mask. `attend`: flex_attention compiled (the timed path); None
    runs it eagerly (PyTorch's reference implementation, for the correctness check)."""

    def key_kept(b, h, q_idx, kv_idx):
        return keep[b, kv_idx]

    blocks = create_block_mask(key_kept, q.size(0), None, q.size(-2), k.size(-2), device=q.device)
    return (attend or flex_attention)(q, k, v, block_mask=blocks)


def unpadded(q, k, v, keep):
    return F.scaled_dot_product_attention(q, k, v)


def attention_figures(batches: list[dict], s: Setup, repeats: int = 5) -> dict[str, Any]:
    """Forward + backward time of each candidate over the batches' two padded sites, its ratio to `masked`, and
    its largest difference from `masked`'s output (None for the bound)."""
    functions = _candidates(s.device)
    heads, dim = s.cfg.n_heads, s.cfg.d_k or s.cfg.d_model // s.cfg.n_heads
    dtype = torch.bfloat16 if s.precision == "bf16-mixed" else torch.float32
    times = {name: 0.0 for name in functions}
    error = {name: 0.0 for name in functions if name != "unpadded"}
    padded = 0.0
    for batch in batches:
        keep = batch["src"] != s.cfg.pad_id
        padded += float(1 - keep.float().mean())
        for length in (batch["src"].size(1), batch["tgt_in"].size(1)):  # encoder self-attention, cross-attention
            q, k, v = _inputs(keep.size(0), heads, length, keep.size(1), dim, dtype, s.device)
            reference = masked(q, k, v, keep)
            for name, function in functions.items():
                out, seconds = _time(function, q, k, v, keep, repeats, s.device)
                times[name] += seconds
                if name in error:
                    error[name] = max(error[name], float((out.float() - reference.float()).abs().max()))
    base = times["masked"]
    return {
        "heads": heads,
        "head_dim": dim,
        "dtype": str(dtype).removeprefix("torch."),
        "batches": len(batches),
        "key_padding": padded / len(batches),
        "candidates": {
            name: {"ms": 1000 * t / len(batches), "speedup": base / t if t else None, "max_abs_diff": error.get(name)}
            for name, t in times.items()
        },
    }


def _candidates(device) -> dict[str, Callable]:
    functions: dict[str, Callable] = {"masked": masked, "jagged": jagged, "unpadded": unpadded}
    if device.type == "cuda":
        compiled = torch.compile(flex_attention, dynamic=True)
        functions["flex"] = lambda q, k, v, keep: flex(q, k, v, keep, compiled)
    return functions


def _inputs(batch: int, heads: int, length: int, keys: int, dim: int, dtype, device):
    def tensor(rows: int):
        return torch.randn(batch, heads, rows, dim, device=device, dtype=dtype, requires_grad=True)

    return tensor(length), tensor(keys), tensor(keys)


def _time(function: Callable, q, k, v, keep, repeats: int, device) -> tuple[Any, float]:
    """The output of one untimed call (warm-up: compilation, plans), then the median of `repeats` timed forward +
    backward passes."""
    out = function(q, k, v, keep)
    out.sum().backward()
    seconds = []
    for _ in range(repeats):
        synchronize(device)
        start = time.perf_counter()
        function(q, k, v, keep).sum().backward()
        synchronize(device)
        seconds.append(time.perf_counter() - start)
    return out.detach(), sorted(seconds)[len(seconds) // 2]
