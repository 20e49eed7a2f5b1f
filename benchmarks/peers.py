"""The peers `ablate bench` measures us against, built with our model's dimensions and random weights.

- `hf`: Hugging Face `transformers`' MarianMT, the encoder-decoder users would pick instead (the [bench] extra).
  Built from a `MarianConfig`, never downloaded. Its train step and its `generate()` (beam 4) are timed.
- `torch`: `torch.nn.Transformer` plus what the paper adds around it (shared embeddings scaled by sqrt(d_model),
  sinusoidal positions, embedding dropout, tied pre-softmax projection). Train step only: it has no decoder cache.

- `row:NAME`: our own model built from another row of the benchmarked study (`--vs row:paper` on the modern base),
  trained on the same batches and decoded on the same sentences in the same run: what a knob costs, as a ratio.

Every peer exposes `forward(src, tgt_in) -> logits (B, T, V)`, so the bench applies the same label-smoothed loss to
all. Imports of torch and transformers stay inside functions: the module is imported by `ablate bench --help`.
"""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F
from ablate.data.errors import AblateError
from ablate.lightning_modules.config import ModelConfig
from torch import nn

PEERS = ("hf", "torch")
"""Peer implementations accepted by `ablate bench --vs`; besides them, `row:NAME` (`row_of`)."""
ROW = "row:"
INSTALL_HINT = "pip install 'ablate[bench]'"


def row_of(name: str) -> str | None:
    """The study row a `row:NAME` peer names, else None."""
    return name[len(ROW) :] if name.startswith(ROW) else None


def check_peer(name: str, cfg: ModelConfig) -> None:
    """Raise AblateError if `name` is not a peer implementation or cannot be built with exactly this configuration's
    shape (a `row:NAME` peer is checked where the study is read, `benchmarks.bench.setup`)."""
    if name not in PEERS:
        raise AblateError(
            f"unknown peer {name!r} in --vs: choose from {', '.join(PEERS)}, or row:NAME for another row of --study"
        )
    if cfg.head_dim_k * cfg.n_heads != cfg.d_model or cfg.head_dim_v * cfg.n_heads != cfg.d_model:
        raise AblateError(
            f"peer {name!r} needs d_k = d_v = d_model / h, but this row has d_model={cfg.d_model}, h={cfg.n_heads}, "
            f"d_k={cfg.head_dim_k}, d_v={cfg.head_dim_v}: pick another row or drop --vs"
        )
    if not cfg.tie_embeddings:
        raise AblateError(f"peer {name!r} shares its embeddings, but this configuration does not: drop --vs")
    if name == "hf":
        require_transformers()
        if cfg.norm != "post":
            raise AblateError("MarianMT is post-norm only; this row is pre-norm: use --vs torch")


def require_transformers() -> None:
    """Import check for the [bench] extra, with a one-line fix."""
    try:
        import transformers  # noqa: F401  # pyright: ignore[reportMissingImports]  # the optional [bench] extra
    except ImportError:
        raise AblateError(f"the 'hf' peer needs Hugging Face transformers: {INSTALL_HINT}") from None


def build_peer(name: str, cfg: ModelConfig, bos_id: int, eos_id: int):
    """The peer `name` with the dimensions of `cfg` and random weights."""
    check_peer(name, cfg)
    return build_marian_peer(cfg, bos_id, eos_id) if name == "hf" else build_torch_peer(cfg)


def sinusoid_table(length: int, d_model: int):
    """Section 3.5 positions, interleaved sin/cos as in our model."""
    pos = torch.arange(length, dtype=torch.float32).unsqueeze(1)
    inv_freq = torch.exp(torch.arange(0, d_model, 2, dtype=torch.float32) * (-math.log(10000.0) / d_model))
    table = torch.zeros(length, d_model)
    table[:, 0::2] = torch.sin(pos * inv_freq)
    table[:, 1::2] = torch.cos(pos * inv_freq[: d_model // 2])
    return table


def build_torch_peer(cfg: ModelConfig):
    """`torch.nn.Transformer` wrapped with the paper's embeddings and tied output projection."""

    class TorchTransformerPeer(nn.Module):
        """nn.Transformer (batch_first) + shared scaled embeddings + sinusoids + tied output. Note: nn.Transformer
        always adds a final LayerNorm to encoder and decoder, which our post-norm model does not."""

        positions: torch.Tensor

        def __init__(self) -> None:
            super().__init__()
            self.pad_id, self.scale = cfg.pad_id, math.sqrt(cfg.d_model)
            self.embed = nn.Embedding(cfg.vocab_size, cfg.d_model, padding_idx=cfg.pad_id)
            nn.init.normal_(self.embed.weight, std=cfg.d_model**-0.5)
            self.register_buffer("positions", sinusoid_table(cfg.max_len, cfg.d_model), persistent=False)
            self.dropout = nn.Dropout(cfg.p_drop)
            self.core = nn.Transformer(
                d_model=cfg.d_model,
                nhead=cfg.n_heads,
                num_encoder_layers=cfg.n_layers,
                num_decoder_layers=cfg.n_layers,
                dim_feedforward=cfg.d_ff,
                dropout=cfg.p_drop,
                layer_norm_eps=cfg.layer_norm_eps,
                batch_first=True,
                norm_first=cfg.norm == "pre",
            )

        def _embed(self, ids):
            return self.dropout(self.embed(ids) * self.scale + self.positions[: ids.size(1)])

        def forward(self, src, tgt_in):
            src_pad = src == self.pad_id  # (B, S) True = ignore
            size = tgt_in.size(1)
            causal = torch.triu(torch.ones(size, size, dtype=torch.bool, device=src.device), 1)  # True = hidden
            out = self.core(
                self._embed(src),
                self._embed(tgt_in),
                tgt_mask=causal,
                src_key_padding_mask=src_pad,
                memory_key_padding_mask=src_pad,
                tgt_is_causal=True,
            )  # (B, T, d_model)
            return F.linear(out, self.embed.weight)  # (B, T, V)

    return TorchTransformerPeer()


def marian_config(cfg: ModelConfig, bos_id: int, eos_id: int):
    """A `MarianConfig` with our dimensions, dropouts, scaled and shared embeddings, and our special ids."""
    from transformers import MarianConfig  # pyright: ignore[reportMissingImports]  # the optional [bench] extra

    return MarianConfig(
        vocab_size=cfg.vocab_size,
        d_model=cfg.d_model,
        encoder_layers=cfg.n_layers,
        decoder_layers=cfg.n_layers,
        encoder_attention_heads=cfg.n_heads,
        decoder_attention_heads=cfg.n_heads,
        encoder_ffn_dim=cfg.d_ff,
        decoder_ffn_dim=cfg.d_ff,
        max_position_embeddings=cfg.max_len,
        dropout=cfg.p_drop,
        attention_dropout=cfg.p_drop_attn,
        activation_dropout=cfg.p_drop_relu,
        activation_function="relu",
        scale_embedding=cfg.scale_embeddings,
        share_encoder_decoder_embeddings=True,
        tie_word_embeddings=True,
        pad_token_id=cfg.pad_id,
        bos_token_id=bos_id,
        eos_token_id=eos_id,
        decoder_start_token_id=bos_id,
        forced_eos_token_id=eos_id,
    )


def build_marian_peer(cfg: ModelConfig, bos_id: int, eos_id: int):
    """MarianMT with random weights, wrapped so that forward(src, tgt_in) returns logits like our model."""
    from transformers import MarianMTModel  # pyright: ignore[reportMissingImports]  # the optional [bench] extra

    marian = MarianMTModel(marian_config(cfg, bos_id, eos_id))
    pad_id = cfg.pad_id

    class MarianPeer(nn.Module):
        """forward(src, tgt_in) -> logits (B, T, V); `generate` is HF's, with the settings of our search."""

        def __init__(self) -> None:
            super().__init__()
            self.hf = marian

        def forward(self, src, tgt_in):
            return self.hf(
                input_ids=src, attention_mask=src != pad_id, decoder_input_ids=tgt_in, use_cache=False
            ).logits

        def generate(self, src, *, beam_size: int, alpha: float, max_len_a: float, max_len_b: int) -> Any:
            """HF generate as our search decodes: beam k, length penalty alpha, canonical termination ("never": stop
            only when no live beam can still win), at most a * |src| + b new tokens with eos forced at the limit,
            pad and bos banned."""
            beam = {"length_penalty": alpha, "early_stopping": "never"} if beam_size > 1 else {}
            return self.hf.generate(
                input_ids=src,
                attention_mask=src != pad_id,
                num_beams=beam_size,
                do_sample=False,
                **beam,
                max_new_tokens=int(src.size(1) * max_len_a) + max_len_b,
                decoder_start_token_id=bos_id,
                eos_token_id=eos_id,
                pad_token_id=pad_id,
                forced_eos_token_id=eos_id,
                suppress_tokens=[pad_id, bos_id],
                use_cache=True,
            )

    return MarianPeer()
