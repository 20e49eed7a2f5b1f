"""The later components a `ModelConfig` can switch on: the pieces of a "modern" block, beside the paper's own.

Each is a small module chosen once, when the model is built (`norm_class`, `rotary_for`, `repeat_kv`, and
`transformer.feed_forward` between section 3.3's FFN and `GatedFeedForward`), as litgpt's `Config.norm_class` and
`mlp_class` are. Where a component is off, its place holds a module that does nothing (`nn.Identity`, `NoRotation`,
`NoPositions`), so no forward branches on the config. Every default is the paper's: LayerNorm, ReLU, additive
positions, one key/value head per query head, no query/key norm, biases.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import torch
from ablate.lightning_modules.config import ModelConfig
from ablate.lightning_modules.kernels import Kernels
from torch import Tensor, nn

NORMS: dict[str, type[nn.Module]] = {"layernorm": nn.LayerNorm, "rmsnorm": nn.RMSNorm}
"""model.norm_type -> its module. nn.RMSNorm: x / sqrt(mean(x^2) + eps) * g (Zhang and Sennrich, 2019)."""

ACTIVATIONS: dict[str, type[nn.Module]] = {"relu": nn.ReLU, "gelu": nn.GELU, "swiglu": nn.SiLU, "geglu": nn.GELU}
"""model.activation -> the nonlinearity; for the gated units the one on the gate (Swish_1 = SiLU, Shazeer 2020)."""

GATED = ("swiglu", "geglu")
"""The activations that are gated linear units (`GatedFeedForward`)."""


def norm_class(cfg: ModelConfig) -> Callable[[int], nn.Module]:
    """The norm of model.norm_type, as a function of the width it normalises."""
    return functools.partial(NORMS[cfg.norm_type], eps=cfg.layer_norm_eps)


class GatedFeedForward(nn.Module):
    """Shazeer (2020), section 3: FFN_GLU(x) = (act(x W) * x V) W_2; SwiGLU with act = Swish, GeGLU with GELU.

    W and V are d_model x d_ff and W_2 is d_ff x d_model: three matrices where section 3.3 has two, so an FFN of the
    paper's parameter count has d_ff at about 2/3 of the paper's.
    """

    def __init__(self, cfg: ModelConfig, kernels: Kernels) -> None:
        super().__init__()
        self.w = nn.Linear(cfg.d_model, cfg.d_ff, bias=cfg.bias)
        self.v = nn.Linear(cfg.d_model, cfg.d_ff, bias=cfg.bias)
        self.act = ACTIVATIONS[cfg.activation]()
        self.dropout = kernels.dropout(cfg.p_drop_relu)
        self.w_2 = nn.Linear(cfg.d_ff, cfg.d_model, bias=cfg.bias)

    def forward(self, x: Tensor) -> Tensor:
        return self.w_2(self.dropout(self.act(self.w(x)) * self.v(x)))  # (B, L, d_ff) -> (B, L, d_model)


class RotaryEmbedding(nn.Module):
    """RoPE (Su et al., 2021, section 3.2): rotate each pair of dimensions (i, i + d/2) of a query or key at
    position m by the angle m * theta_i, theta_i = 10000^(-2i/d) (the "rotate half" pairing of GPT-NeoX and litgpt,
    equivalent to the paper's adjacent pairs up to a fixed permutation of the weights). Then <R_m q, R_n k> depends
    on m - n only. An odd width leaves its last dimension unrotated."""

    BASE = 10000.0
    theta: Tensor

    def __init__(self, width: int) -> None:
        super().__init__()
        self.pairs = width // 2  # not `half`: that name is nn.Module's method (cast to float16)
        theta = self.BASE ** (-torch.arange(self.pairs, dtype=torch.float32) * 2 / max(2 * self.pairs, 1))
        self.register_buffer("theta", theta, persistent=False)

    def forward(self, x: Tensor, start: int | Tensor) -> Tensor:
        """x: (B, h, L, d) at positions start .. start + L - 1 (a decoding step's `start`: the cached prefix; a 0-dim
        tensor in static decoding)."""
        pos = (start + torch.arange(x.size(-2), device=x.device)).to(torch.float32)
        angle = torch.outer(pos, self.theta)  # (L, d/2)
        cos, sin = angle.cos().to(x.dtype), angle.sin().to(x.dtype)
        x1, x2, rest = x[..., : self.pairs], x[..., self.pairs : 2 * self.pairs], x[..., 2 * self.pairs :]
        return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin, rest], dim=-1)


class NoRotation(nn.Module):
    """The place of `RotaryEmbedding` where attention has no rotary positions (the paper; all cross-attention)."""

    def forward(self, x: Tensor, start: int | Tensor) -> Tensor:
        return x


def rotary_for(cfg: ModelConfig, self_attention: bool) -> Callable[[int], nn.Module]:
    """RoPE for self-attention when model.positions is 'rope', else no rotation (cross-attention never rotates:
    source and target positions are not on one axis)."""
    return RotaryEmbedding if cfg.positions == "rope" and self_attention else lambda width: NoRotation()


class NoPositions(nn.Module):
    """The place of the additive position encodings when there are none at the input ('rope', 'none'): adds 0."""

    zero: Tensor

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.register_buffer("zero", torch.zeros(()), persistent=False)

    def forward(self, start: int | Tensor, length: int) -> Tensor:
        return self.zero


class RepeatKV(nn.Module):
    """Grouped-query attention (Ainslie et al., 2023): each of the n_kv_heads key/value heads serves n_heads /
    n_kv_heads consecutive query heads. (B, n_kv, L, d) -> (B, h, L, d), at attention time only: projections and
    the decoder's cache hold n_kv_heads heads. `nn.Identity` takes its place when n_kv_heads = n_heads."""

    def __init__(self, groups: int) -> None:
        super().__init__()
        self.groups = groups

    def forward(self, x: Tensor) -> Tensor:
        return x.repeat_interleave(self.groups, dim=1)


def repeat_kv(cfg: ModelConfig) -> nn.Module:
    """What turns cached key/value heads into one per query head: nothing for multi-head attention."""
    groups = cfg.n_heads // cfg.kv_heads
    return RepeatKV(groups) if groups > 1 else nn.Identity()


__all__ = [
    "ACTIVATIONS",
    "GATED",
    "NORMS",
    "GatedFeedForward",
    "NoPositions",
    "NoRotation",
    "RepeatKV",
    "RotaryEmbedding",
    "norm_class",
    "repeat_kv",
    "rotary_for",
]
