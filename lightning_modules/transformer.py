"""The encoder-decoder Transformer of "Attention Is All You Need" (Vaswani et al., 2017), section 3.

Plain PyTorch, built from one `ModelConfig`. Shapes use B = batch, S = source length, T = target length,
h = heads. Attention and dropout are PyTorch's (`F.scaled_dot_product_attention`, `nn.Dropout`) unless
`ModelConfig.kernels` picks the faster CPU routes of `kernels.py`; the choice is made once, in `Transformer`.
Incremental decoding keeps per-layer key/value caches (`KVCache`), used by greedy and beam search.
The later components a config may switch on (RMSNorm, gated FFNs, RoPE, grouped-query attention, query/key norm, no
biases) live in `modern.py` and are chosen once, where a module is built; with the defaults this is the paper's model.
"""

from __future__ import annotations

import math
from typing import Protocol

import torch
from ablate.data.errors import AblateError
from ablate.lightning_modules import card
from ablate.lightning_modules.config import ModelConfig
from ablate.lightning_modules.kernels import Kernels, kernels_for
from ablate.lightning_modules.modern import (
    ACTIVATIONS,
    GATED,
    GatedFeedForward,
    NoPositions,
    norm_class,
    repeat_kv,
    rotary_for,
)
from torch import Tensor, nn


class SelfAttentionCache:
    """Keys and values of the positions decoded so far, for one decoder layer's self-attention.

    They live in buffers with room to grow, (B, h_kv, capacity, d), and attention reads the filled prefix as a view:
    appending a position writes one slot instead of concatenating (copying) the whole prefix. Beam search reorders
    the rows at every step; `select` writes them straight into a new buffer with one free slot, so the next append
    copies nothing else, which is faster than index_select and cat (timed:
    docs/reference/code-figures.md, "lightning_modules/transformer.py").
    `gather_rows` is the kernels' way of writing the selected rows.
    h_kv is model.n_kv_heads (grouped-query attention caches only the shared heads); keys are cached after their
    rotary positions are applied (RoPE), so a cached key never moves.
    """

    def __init__(self, gather_rows) -> None:
        self.gather_rows = gather_rows
        self.k: Tensor | None = None
        self.v: Tensor | None = None
        self.length = 0

    def append(self, k: Tensor, v: Tensor, start: int | Tensor = 0) -> tuple[Tensor, Tensor, Tensor | None]:
        """Add (B, h_kv, T, d) new keys/values; returns all of them so far as (B, h_kv, length, d) views, and no key
        mask: every cached key is in the queries' past. (`start` is the cache's own length here.)"""
        end = self.length + k.size(2)
        if self.k is None or self.v is None or end > self.k.size(2):
            self.k, self.v = (self._moved(old, new, None, 2 * end) for old, new in ((self.k, k), (self.v, v)))
        self.k[:, :, self.length : end] = k
        self.v[:, :, self.length : end] = v
        self.length = end
        return self.k[:, :, :end], self.v[:, :, :end], None

    def select(self, rows: Tensor) -> None:
        """Keep these rows, in this order (beam reordering; finished sentences leaving)."""
        if self.k is not None and self.v is not None:
            self.k, self.v = (self._moved(old, old, rows, self.length + 1) for old in (self.k, self.v))

    def _moved(self, old: Tensor | None, like: Tensor, rows: Tensor | None, capacity: int) -> Tensor:
        """A new buffer of `capacity` positions holding old's prefix (its `rows` if given)."""
        n = like.size(0) if rows is None else rows.numel()
        buffer = like.new_empty(n, like.size(1), capacity, like.size(3))
        if old is not None and self.length:
            prefix = old[:, :, : self.length]
            if rows is None:
                buffer[:, :, : self.length] = prefix
            else:
                self.gather_rows(prefix, rows, buffer[:, :, : self.length])
        return buffer


class KeyValueCache(Protocol):
    """A decoder layer's self-attention cache: `SelfAttentionCache`, or `static_decoding.StaticSelfAttentionCache`
    (fixed shapes, for CUDA graphs)."""

    def append(self, k: Tensor, v: Tensor, start: int | Tensor) -> tuple[Tensor, Tensor, Tensor | None]:
        """Store the new keys/values at positions start..; return every key/value a query may read and the mask of
        those it may attend (None: all)."""
        ...

    def select(self, rows: Tensor) -> None:
        """Keep these rows, in this order (beam reordering)."""
        ...


# Per decoder layer: {"self": KeyValueCache, "cross": {"k": Tensor, "v": Tensor}} (cross-attention's keys and
# values are computed from the source once, one row per sentence).
KVCache = list[dict]


def rows_at(table: Tensor, start: int | Tensor, length: int) -> Tensor:
    """table[start : start + length]. `start` may be a 0-dim tensor on the table's device (static decoding keeps its
    step there): then by index_select, with no host sync, so a captured CUDA graph can replay it at every step."""
    if isinstance(start, Tensor):
        return table.index_select(0, start + torch.arange(length, device=table.device))
    return table[start : start + length]


class MultiHeadAttention(nn.Module):
    """Section 3.2.2: MultiHead(Q, K, V) = Concat(head_1..head_h) W_O, head_i = Attention(Q W_Q_i, K W_K_i, V W_V_i).

    W_Q is d_model x h*d_k, W_K is d_model x h_kv*d_k and W_V is d_model x h_kv*d_v, with d_k and d_v independent of
    d_model / h; W_O is h*d_v x d_model. h_kv = h (model.n_kv_heads unset) is the paper's; fewer key/value heads,
    each shared by a group of query heads, is grouped-query attention (`RepeatKV`). Queries and keys may be
    normalised per head (model.qk_norm) and, in self-attention, rotated by their positions (RoPE); both are
    identities in the paper's model.
    """

    def __init__(self, cfg: ModelConfig, kernels: Kernels, self_attention: bool) -> None:
        super().__init__()
        self.h, self.h_kv, self.d_k, self.d_v = cfg.n_heads, cfg.kv_heads, cfg.head_dim_k, cfg.head_dim_v
        self.w_q = nn.Linear(cfg.d_model, self.h * self.d_k, bias=cfg.bias)
        self.w_k = nn.Linear(cfg.d_model, self.h_kv * self.d_k, bias=cfg.bias)
        self.w_v = nn.Linear(cfg.d_model, self.h_kv * self.d_v, bias=cfg.bias)
        self.w_o = nn.Linear(self.h * self.d_v, cfg.d_model, bias=cfg.bias)
        norm = norm_class(cfg) if cfg.qk_norm else lambda width: nn.Identity()
        self.q_norm, self.k_norm = norm(self.d_k), norm(self.d_k)
        self.rotate = rotary_for(cfg, self_attention)(self.d_k)
        self.repeat_kv = repeat_kv(cfg)  # (B, h_kv, L, d) -> (B, h, L, d)
        self.p_attn = cfg.p_drop_attn
        self.attention = kernels.attention  # equation 1: softmax(Q K^T / sqrt(d_k)) V

    @staticmethod
    def _heads(x: Tensor, heads: int, d: int) -> Tensor:
        return x.unflatten(-1, (heads, d)).transpose(1, 2)  # (B, L, heads*d) -> (B, heads, L, d)

    def forward(
        self,
        x: Tensor,
        memory: Tensor,
        mask: Tensor | None = None,
        causal: bool = False,
        cache: KeyValueCache | dict[str, Tensor] | None = None,
        start: int | Tensor = 0,
    ) -> Tensor:
        """x: (B, T, d_model) queries; memory: (B, L, d_model) keys/values; mask: (B, 1, 1, L) True = attend.
        `start`: the position of x's first query (in self-attention, of memory's first key too): the cached prefix's
        length when decoding step by step. Only rotary positions use it.

        With a cache, new keys/values are appended (self-attention: a KeyValueCache, which also says which of its
        keys are filled) or computed from the memory once (cross-attention: a dict).
        Beam search passes one memory row per sentence and x with its k beams in consecutive rows (B*k, T): the
        beams' queries attend to that shared memory as one sequence of k*T queries, so the source's keys and values
        are neither repeated nor reordered per beam. Only for cross-attention, whose queries are independent.
        """
        rows, length = x.shape[:2]
        x = x.reshape(memory.size(0), -1, x.size(-1))  # (B, k*T, d_model); k = 1 outside beam search
        q = self.rotate(self.q_norm(self._heads(self.w_q(x), self.h, self.d_k)), start)  # (B, h, k*T, d_k)
        if isinstance(cache, dict) and "k" in cache:
            k, v = cache["k"], cache["v"]
        else:
            k = self.rotate(self.k_norm(self._heads(self.w_k(memory), self.h_kv, self.d_k)), start)  # (B, h_kv, L, d_k)
            v = self._heads(self.w_v(memory), self.h_kv, self.d_v)  # (B, h_kv, L, d_v)
            if isinstance(cache, dict):  # read at every decoding step: contiguous once rather than reshaped every time
                cache["k"], cache["v"] = k, v = k.contiguous(), v.contiguous()
            elif cache is not None:
                k, v, mask = cache.append(k, v, start)
        k, v = self.repeat_kv(k), self.repeat_kv(v)  # (B, h, L, d): each key/value head serves its query group
        out = self.attention(q, k, v, mask, causal, self.p_attn if self.training else 0.0)  # (B, h, k*T, d_v)
        return self.w_o(out.transpose(1, 2).flatten(2)).reshape(rows, length, -1)  # (B*k, T, d_model)


class FeedForward(nn.Module):
    """Section 3.3: FFN(x) = max(0, x W_1 + b_1) W_2 + b_2, inner width d_ff (ReLU, or GELU by model.activation)."""

    def __init__(self, cfg: ModelConfig, kernels: Kernels) -> None:
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(cfg.d_model, cfg.d_ff, bias=cfg.bias),
            ACTIVATIONS[cfg.activation](),
            kernels.dropout(cfg.p_drop_relu),
            nn.Linear(cfg.d_ff, cfg.d_model, bias=cfg.bias),
        )

    def forward(self, x: Tensor) -> Tensor:
        return self.net(x)


def feed_forward(cfg: ModelConfig, kernels: Kernels) -> nn.Module:
    """Section 3.3's network, or a gated linear unit (SwiGLU, GeGLU: Shazeer, 2020) by model.activation."""
    return (GatedFeedForward if cfg.activation in GATED else FeedForward)(cfg, kernels)


class Residual(nn.Module):
    """Section 3.1 and 5.4: the sub-layer connection with residual dropout P_drop.

    post-norm (the paper): LayerNorm(x + Dropout(Sublayer(x))); pre-norm: x + Dropout(Sublayer(LayerNorm(x))).
    The unused norm is an Identity, so forward has no branch on the choice; LayerNorm or RMSNorm by model.norm_type.
    """

    def __init__(self, cfg: ModelConfig, kernels: Kernels) -> None:
        super().__init__()
        pre, norm = cfg.norm == "pre", norm_class(cfg)
        self.norm_in = norm(cfg.d_model) if pre else nn.Identity()
        self.norm_out = nn.Identity() if pre else norm(cfg.d_model)
        self.dropout = kernels.dropout(cfg.p_drop)

    def forward(self, x: Tensor, sublayer) -> Tensor:
        return self.norm_out(x + self.dropout(sublayer(self.norm_in(x))))


class EncoderLayer(nn.Module):
    """Section 3.1: self-attention, then a position-wise feed-forward network."""

    def __init__(self, cfg: ModelConfig, kernels: Kernels) -> None:
        super().__init__()
        self.self_attn, self.ffn = MultiHeadAttention(cfg, kernels, self_attention=True), feed_forward(cfg, kernels)
        self.res_attn, self.res_ffn = Residual(cfg, kernels), Residual(cfg, kernels)

    def forward(self, x: Tensor, src_mask: Tensor | None) -> Tensor:
        x = self.res_attn(x, lambda h: self.self_attn(h, h, mask=src_mask))
        return self.res_ffn(x, self.ffn)


class DecoderLayer(nn.Module):
    """Section 3.1: masked self-attention, encoder-decoder attention, feed-forward network."""

    def __init__(self, cfg: ModelConfig, kernels: Kernels) -> None:
        super().__init__()
        self.self_attn = MultiHeadAttention(cfg, kernels, self_attention=True)
        self.cross_attn = MultiHeadAttention(cfg, kernels, self_attention=False)
        self.ffn = feed_forward(cfg, kernels)
        self.res_self, self.res_cross, self.res_ffn = (Residual(cfg, kernels) for _ in range(3))

    def forward(
        self,
        y: Tensor,
        memory: Tensor,
        src_mask: Tensor | None,
        cache: dict[str, dict[str, Tensor]] | None = None,
        start: int | Tensor = 0,
    ) -> Tensor:
        # Without a cache the whole prefix is present: the causal mask hides the future. With a cache only the
        # newest position is queried and every cached key is in its past, so no mask is needed.
        self_cache, cross_cache = (cache["self"], cache["cross"]) if cache is not None else (None, None)
        y = self.res_self(y, lambda h: self.self_attn(h, h, causal=cache is None, cache=self_cache, start=start))
        y = self.res_cross(y, lambda h: self.cross_attn(h, memory, mask=src_mask, cache=cross_cache))
        return self.res_ffn(y, self.ffn)


class PositionalEncoding(nn.Module):
    """Section 3.5: PE(pos, 2i) = sin(pos / 10000^(2i/d_model)), PE(pos, 2i+1) = cos(pos / 10000^(2i/d_model))."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.d_model = cfg.d_model
        self.register_buffer("table", self._table(cfg.max_len), persistent=False)

    def _table(self, length: int) -> Tensor:
        pos = torch.arange(length, dtype=torch.float32).unsqueeze(1)  # (L, 1)
        two_i = torch.arange(0, self.d_model, 2, dtype=torch.float32)
        inv_freq = torch.exp(two_i * (-math.log(10000.0) / self.d_model))  # 1 / 10000^(2i/d_model)
        table = torch.zeros(length, self.d_model)
        table[:, 0::2] = torch.sin(pos * inv_freq)
        table[:, 1::2] = torch.cos(pos * inv_freq[: self.d_model // 2])
        return table

    def forward(self, start: int | Tensor, length: int) -> Tensor:
        # Sinusoids extend to any length: grow the table (a static decoder asks for all its positions first).
        if not isinstance(start, Tensor) and start + length > self.table.size(0):
            self.table = self._table(2 * (start + length)).to(self.table.device)
        return rows_at(self.table, start, length)  # (L, d_model)


class LearnedPositions(nn.Module):
    """Row E: learned position embeddings in place of the sinusoids (section 3.5 reports nearly identical results)."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.max_len = cfg.max_len
        self.embedding = nn.Embedding(cfg.max_len, cfg.d_model)

    def forward(self, start: int | Tensor, length: int) -> Tensor:
        if not isinstance(start, Tensor) and start + length > self.max_len:
            raise AblateError(
                f"sequence of {start + length} positions is longer than model.max_len={self.max_len} of the learned "
                "positions: raise model.max_len or lower data.max_len"
            )
        return rows_at(self.embedding.weight, start, length)


class Embedding(nn.Module):
    """Section 3.4: token embedding times sqrt(d_model), plus positions, then dropout P_drop (section 5.4)."""

    def __init__(self, cfg: ModelConfig, kernels: Kernels, tokens: nn.Embedding, positions: nn.Module) -> None:
        super().__init__()
        self.tokens, self.positions = tokens, positions
        self.scale = math.sqrt(cfg.d_model) if cfg.scale_embeddings else 1.0
        self.dropout = kernels.dropout(cfg.p_drop)

    def forward(self, ids: Tensor, start: int | Tensor = 0) -> Tensor:
        x = self.tokens(ids) * self.scale  # (B, L, d_model)
        return self.dropout(x + self.positions(start, ids.size(1)).to(x.dtype))


class Transformer(nn.Module):
    """The full model: Encoder (N layers), Decoder (N layers), shared embeddings and pre-softmax projection."""

    def __init__(self, cfg: ModelConfig, kernels: Kernels | None = None) -> None:
        """`kernels` overrides cfg.kernels (the benchmark builds variants that way)."""
        super().__init__()
        self.cfg = cfg
        self.kernels = kernels = kernels or kernels_for(cfg.kernels)  # the one place the kernels are chosen
        positions = {"sinusoidal": PositionalEncoding, "learned": LearnedPositions}.get(cfg.positions, NoPositions)
        src_tokens = nn.Embedding(cfg.vocab_size, cfg.d_model, padding_idx=cfg.pad_id)
        tgt_tokens = src_tokens if cfg.tie_embeddings else nn.Embedding(cfg.vocab_size, cfg.d_model, cfg.pad_id)
        self.src_embed = Embedding(cfg, kernels, src_tokens, positions(cfg))
        self.tgt_embed = Embedding(cfg, kernels, tgt_tokens, positions(cfg))
        self.encoder = nn.ModuleList(EncoderLayer(cfg, kernels) for _ in range(cfg.n_layers))
        self.decoder = nn.ModuleList(DecoderLayer(cfg, kernels) for _ in range(cfg.n_layers))
        # Pre-norm leaves the last residual stream un-normalised: add the final norm there (and only there).
        final_norm = norm_class(cfg) if cfg.norm == "pre" else lambda width: nn.Identity()
        self.encoder_norm, self.decoder_norm = final_norm(cfg.d_model), final_norm(cfg.d_model)
        self.output = nn.Linear(cfg.d_model, cfg.vocab_size, bias=False)
        self.reset_parameters()
        if cfg.tie_embeddings:
            self.output.weight = tgt_tokens.weight

    def reset_parameters(self) -> None:
        """Xavier-uniform linear layers (as tensor2tensor and fairseq); embeddings N(0, d_model^-0.5), so that the
        sqrt(d_model) scaling of section 3.4 gives inputs of unit variance."""
        for module in self.modules():
            if isinstance(module, nn.Linear):
                nn.init.xavier_uniform_(module.weight)
                if module.bias is not None:
                    nn.init.zeros_(module.bias)
            elif isinstance(module, nn.Embedding):
                nn.init.normal_(module.weight, std=self.cfg.d_model**-0.5)
                if module.padding_idx is not None:
                    nn.init.zeros_(module.weight[module.padding_idx])

    def padding_mask(self, src: Tensor) -> Tensor | None:
        """(B, S) ids -> (B, 1, 1, S) True where a key may be attended; None when nothing is padded (fast path)."""
        keep = src != self.cfg.pad_id
        if torch.compiler.is_compiling() or card.takes("padding mask", src.is_cuda):
            # No data-dependent branch in a compiled graph (it broke the graph), nor a host read on a card that takes
            # that path: an all-True mask gives the same attention, by a kernel that takes a mask. Where and how it
            # broke: docs/reference/code-figures.md, "lightning_modules/transformer.py".
            return keep[:, None, None, :]
        return None if bool(keep.all()) else keep[:, None, None, :]

    def encode(self, src: Tensor) -> tuple[Tensor, Tensor | None]:
        """(B, S) source ids -> memory (B, S, d_model) and its key mask."""
        src_mask = self.padding_mask(src)
        x = self.src_embed(src)
        for layer in self.encoder:
            x = layer(x, src_mask)
        return self.encoder_norm(x), src_mask

    def decode(
        self,
        tgt_in: Tensor,
        memory: Tensor,
        src_mask: Tensor | None,
        cache: KVCache | None = None,
        start: int | Tensor = 0,
    ) -> Tensor:
        """(B, T) target ids (shifted right) -> logits (B, T, vocab). With a cache, tgt_in holds only the new
        positions, starting at position `start` (an int, or a 0-dim tensor on the model's device)."""
        return self.output(self.decoder_states(tgt_in, memory, src_mask, cache, start))

    def decoder_states(
        self,
        tgt_in: Tensor,
        memory: Tensor,
        src_mask: Tensor | None,
        cache: KVCache | None = None,
        start: int | Tensor = 0,
    ) -> Tensor:
        """`decode` before the pre-softmax projection: the decoder's final states (B, T, d_model)."""
        y = self.tgt_embed(tgt_in, start)
        for i, layer in enumerate(self.decoder):
            y = layer(y, memory, src_mask, cache[i] if cache is not None else None, start)
        return self.decoder_norm(y)

    def forward(self, src: Tensor, tgt_in: Tensor) -> Tensor:
        """Teacher-forced logits (B, T, vocab) for source (B, S) and right-shifted target (B, T)."""
        memory, src_mask = self.encode(src)
        return self.decode(tgt_in, memory, src_mask)

    def features(self, src: Tensor, tgt_in: Tensor) -> Tensor:
        """The decoder's final states (B, T, d_model), before the pre-softmax projection `output` (`forward` without
        its last matrix product): train.fused_loss applies that projection inside the loss."""
        memory, src_mask = self.encode(src)
        return self.decoder_states(tgt_in, memory, src_mask)

    def new_cache(self) -> KVCache:
        """An empty key/value cache for incremental decoding."""
        return [{"self": SelfAttentionCache(self.kernels.gather_rows), "cross": {}} for _ in self.decoder]

    @staticmethod
    def reorder_cache(cache: KVCache, order: Tensor) -> None:
        """Select rows of the self-attention caches (beam search keeps the surviving hypotheses). Cross-attention
        keys/values hold one row per sentence, shared by all its beams: nothing to reorder."""
        for layer in cache:
            layer["self"].select(order)

    def num_parameters(self) -> int:
        """Parameters, counting a shared embedding matrix once."""
        return sum(p.numel() for p in self.parameters())

    @classmethod
    def count(cls, cfg: ModelConfig) -> int:
        """`num_parameters` of the model `cfg` makes, built on the meta device (no memory, no initialisation; the
        first still imports torch._dynamo for the meta kernels, which takes a while:
        docs/reference/code-figures.md, "lightning_modules/transformer.py")."""
        with torch.device("meta"):
            return cls(cfg).num_parameters()
