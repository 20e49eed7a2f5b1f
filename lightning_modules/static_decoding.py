"""Beam search with fixed shapes: the decoding of `decoding.beam_search`, written so that a GPU can replay each step
as one captured CUDA graph (`train.decoding`).

`decoding.beam_search` is the readable one, and the one CPUs run: sentences leave the batch as they finish, keys are
cached in buffers that grow, and Python checks tensors between steps (`if finishing.any()`). Each of those is a host
sync or a new shape, and on a GPU a small model's step is a few hundred kernel launches that the card then waits on.
Here every tensor of a step keeps its shape and address from the first step to the last:

- the self-attention cache is allocated at its final length (`StaticSelfAttentionCache`); a query reads every slot,
  and a key mask hides the ones not yet written;
- the step counter lives on the device, and positions are read from it (`transformer.rows_at`);
- finished sentences stay in the batch, frozen: they are masked out of the finished set's merges;
- each step updates the search state in place, and the only sync is the check whether every sentence is done, made
  once every `check_every` steps.

On CUDA the first step runs eagerly (it fills the cross-attention cache and warms the kernels), the second is
captured as a CUDA graph, and the rest replay it. The hypotheses are those of `decoding.beam_search`: the same
candidates, ranks and merges at every step (tested over every model knob in float64, where the rounding of attention
over the longer, masked key axis cannot decide a tie).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from ablate.lightning_modules.decoding import (
    _candidates,
    _cannot_improve,
    _max_lengths,
    _strip,
    _Vocabulary,
    length_penalty,
)
from ablate.lightning_modules.transformer import KVCache, Transformer
from torch import Tensor


class StaticSelfAttentionCache:
    """A decoder layer's self-attention keys and values at fixed shape (rows, h_kv, capacity, d), zero-filled.

    A step writes its key at position `start` (a 0-dim device tensor) and attends over all `capacity` slots with a
    mask of the written ones, so no shape changes from step to step; `select` reorders rows in place (copy_), so the
    buffers keep their addresses for a captured graph. The buffers are made at the first append, in the dtype of
    the keys that step computed: under autocast a bf16 projection's, not the fp32 encoder output's (as the dynamic
    cache, which concatenates the keys it gets). The first step runs before any capture, so the addresses a graph
    records are the final ones."""

    def __init__(self, rows: int, heads: int, capacity: int, d_k: int, d_v: int, like: Tensor) -> None:
        self.shape_k, self.shape_v = (rows, heads, capacity, d_k), (rows, heads, capacity, d_v)
        self.k, self.v = like.new_zeros(self.shape_k), like.new_zeros(self.shape_v)
        self.positions = torch.arange(capacity, device=like.device)
        self.written = False

    def append(self, k: Tensor, v: Tensor, start: int | Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """Write (rows, h_kv, 1, d) at `start`; all slots and the mask (1, 1, 1, capacity) of those filled so far."""
        if not self.written:  # the keys' dtype, known from the first step (the buffers are still all zeros)
            self.k, self.v = k.new_zeros(self.shape_k), v.new_zeros(self.shape_v)
            self.written = True
        at = torch.as_tensor(start, device=self.k.device).view(1)
        self.k.index_copy_(2, at, k)
        self.v.index_copy_(2, at, v)
        return self.k, self.v, (self.positions <= at).view(1, 1, 1, -1)

    def select(self, rows: Tensor) -> None:
        self.k.copy_(self.k.index_select(0, rows))
        self.v.copy_(self.v.index_select(0, rows))


def static_cache(model: Transformer, rows: int, capacity: int, like: Tensor) -> KVCache:
    """An empty fixed-shape cache for `rows` hypotheses of up to `capacity` positions."""
    cfg = model.cfg
    layers = []
    for _ in model.decoder:
        cache = StaticSelfAttentionCache(rows, cfg.kv_heads, capacity, cfg.head_dim_k, cfg.head_dim_v, like)
        layers.append({"self": cache, "cross": {}})
    return layers


@dataclass
class BeamState:
    """Everything a step reads and writes, at fixed shapes: B sentences, k beams, the longest output L (eos
    included). Every field but the inputs is updated in place."""

    memory: Tensor  # (B, S, d_model), one row per sentence (its beams share it in cross-attention)
    src_mask: Tensor | None  # (B, 1, 1, S)
    max_len: Tensor  # (B,) longest output per sentence
    best_possible_lp: Tensor  # (B,) the length penalty at that length
    cache: KVCache
    t: Tensor  # () the step: the position of the token being extended
    alive_seq: Tensor  # (B, k, L + 1) live hypotheses, bos first, padding after position t
    alive_score: Tensor  # (B, k) their log-probabilities
    fin_seq: Tensor  # (B, k, L + 1) finished hypotheses
    fin_score: Tensor  # (B, k) their length-normalised scores
    done: Tensor  # (B,) sentences whose best hypothesis is final
    first_row: Tensor  # (B, 1) each sentence's first row among the B*k of the cache


def _start(model: Transformer, src: Tensor, k: int, alpha: float, max_len_a: float, max_len_b: int, bos_id: int):
    """The state before the first step (as `decoding._start`: one live beam per sentence, no finished ones)."""
    pad_id, bsz, device = model.cfg.pad_id, src.size(0), src.device
    memory, src_mask = model.encode(src)
    max_len = _max_lengths(src, pad_id, max_len_a, max_len_b)
    steps = int(max_len.max())
    model.tgt_embed.positions(0, steps)  # sinusoids grow their table now, not inside a captured step
    alive_seq = torch.full((bsz, k, steps + 1), pad_id, dtype=torch.long, device=device)
    alive_seq[:, :, 0] = bos_id
    alive_score = torch.zeros(bsz, k, device=device)
    alive_score[:, 1:] = float("-inf")
    return BeamState(
        memory=memory,
        src_mask=src_mask,
        max_len=max_len,
        best_possible_lp=length_penalty(max_len, alpha),
        cache=static_cache(model, bsz * k, steps, memory),
        t=torch.zeros((), dtype=torch.long, device=device),
        alive_seq=alive_seq,
        alive_score=alive_score,
        fin_seq=torch.full_like(alive_seq, pad_id),
        fin_score=torch.full((bsz, k), float("-inf"), device=device),
        done=torch.zeros(bsz, dtype=torch.bool, device=device),
        first_row=torch.arange(bsz, device=device).unsqueeze(1) * k,
    )


class _EveryStep(_Vocabulary):
    """`decoding._Vocabulary` without its `any()` check: both masks are applied at every step."""

    def restrict(self, scores: Tensor, at_limit: Tensor) -> Tensor:
        scores.index_fill_(-1, self.never, float("-inf"))
        return scores.masked_fill_(at_limit.unsqueeze(-1) & self.not_eos, float("-inf"))


class _Search:
    """One step of beam search over a `BeamState`, with no host sync and no shape that depends on the data."""

    def __init__(self, model: Transformer, k: int, alpha: float, bos_id: int, eos_id: int, device) -> None:
        self.model, self.k, self.alpha, self.eos_id = model, k, alpha, eos_id
        self.allowed = _EveryStep(model.cfg.vocab_size, model.cfg.pad_id, bos_id, eos_id, device)
        self.rank_ok = torch.arange(2 * k, device=device).unsqueeze(0) < k

    def _extend(self, seq: Tensor, beam: Tensor, tok: Tensor, t: Tensor) -> Tensor:
        """Hypotheses (B, k, L+1), parents (B, m), tokens (B, m) -> the m extensions, the token at position t + 1."""
        parents = seq.gather(1, beam.unsqueeze(-1).expand(-1, -1, seq.size(2)))
        return parents.index_copy_(2, (t + 1).view(1), tok.unsqueeze(-1))

    def step(self, s: BeamState) -> None:
        k, bsz = self.k, s.alive_seq.size(0)
        last = s.alive_seq.index_select(2, s.t.view(1)).view(-1, 1)  # (B*k, 1) each hypothesis' newest token
        logits = self.model.decode(last, s.memory, s.src_mask, s.cache, start=s.t)[:, -1].float().view(bsz, k, -1)
        at_limit = (s.t + 1 >= s.max_len).unsqueeze(1)  # (B, 1)
        top_score, top_beam, top_tok = _candidates(logits, s.alive_score, self.allowed, at_limit)  # (B, 2k)

        # Finish: eos candidates within the top k, merged into the finished set (a done sentence's set is frozen).
        finishing = (top_tok == self.eos_id) & self.rank_ok & ~s.done.unsqueeze(1)
        lp = length_penalty((s.t + 1).double(), self.alpha).float()  # as decoding's Python float: in double
        new_fin = torch.where(finishing, top_score, float("-inf")) / lp
        fin_score, keep = torch.cat([s.fin_score, new_fin], 1).topk(k, dim=1)
        new_seq = self._extend(s.alive_seq, top_beam, top_tok, s.t)
        every = torch.cat([s.fin_seq, new_seq], 1)
        s.fin_seq.copy_(every.gather(1, keep.unsqueeze(-1).expand(-1, -1, every.size(2))))
        s.fin_score.copy_(fin_score)

        # Continue: the k best candidates that do not end in eos; the cache follows their parents.
        live = torch.where(top_tok == self.eos_id, float("-inf"), top_score)
        alive_score, pick = live.topk(k, dim=1)
        parent = top_beam.gather(1, pick)
        s.alive_seq.copy_(self._extend(s.alive_seq, parent, top_tok.gather(1, pick), s.t))
        s.alive_score.copy_(alive_score)
        self.model.reorder_cache(s.cache, (parent + s.first_row).view(-1))

        s.done |= _cannot_improve(s.alive_score, s.fin_score, s.best_possible_lp) | (s.t + 1 >= s.max_len)
        s.t += 1


@torch.no_grad()
def static_beam_search(
    model: Transformer,
    src: Tensor,
    bos_id: int,
    eos_id: int,
    beam_size: int = 4,
    alpha: float = 0.6,
    max_len_a: float = 1.0,
    max_len_b: int = 50,
    *,
    cuda_graph: bool | None = None,
    check_every: int = 4,
) -> list[list[int]]:
    """`decoding.beam_search` at fixed shapes. `cuda_graph` (default: on a CUDA device) replays a captured step;
    `check_every`: steps between the host's checks whether every sentence is done."""
    state = _start(model, src, beam_size, alpha, max_len_a, max_len_b, bos_id)
    search = _Search(model, beam_size, alpha, bos_id, eos_id, src.device)
    graph = src.is_cuda if cuda_graph is None else cuda_graph
    step = _on_side_stream(search.step) if graph else search.step
    for t in range(state.alive_seq.size(2) - 1):
        if graph and t == 1:  # step 0 filled the cross-attention cache and warmed the kernels: capture step 1
            step = _capture(search.step, state)
        step(state)
        if (t + 1) % check_every == 0 and bool(state.done.all()):
            break
    return [_strip(row, eos_id, model.cfg.pad_id) for row in state.fin_seq[:, 0, 1:].tolist()]


def _on_side_stream(step):
    """The warm-up run a CUDA graph capture wants before it: on a side stream, joined after."""

    def run(state: BeamState) -> None:
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            step(state)
        torch.cuda.current_stream().wait_stream(side)

    return run


def _capture(step, state: BeamState):
    """`step` over `state` recorded as one CUDA graph (recording runs nothing); returns what replays it."""
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        step(state)
    return lambda _state: graph.replay()


__all__ = ["BeamState", "StaticSelfAttentionCache", "static_beam_search", "static_cache"]
