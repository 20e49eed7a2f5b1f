"""Greedy and batched beam search with incremental (cached key/value) decoding, section 6.1 of the paper.

Beam search follows tensor2tensor, the paper's own code: beam 4, GNMT length penalty lp(Y) = ((5 + |Y|) / 6)^alpha
with alpha = 0.6, maximum output length = source length + 50, and early termination once no live hypothesis can
still beat the finished ones (its score divided by the penalty at the maximum length is an upper bound).
Hand-written rather than taken from a library because it must run on our model's cache and stay batched
(HF `generate()` needs an HF model); the bookkeeping is vectorised over the batch with no per-sentence Python loop.
"""

from __future__ import annotations

from typing import overload

import torch
import torch.nn.functional as F
from ablate.lightning_modules.transformer import KVCache, Transformer
from torch import Tensor


def _max_lengths(src: Tensor, pad_id: int, max_len_a: float, max_len_b: int) -> Tensor:
    """(B,) maximum output length per sentence, eos included: a * |source| + b."""
    src_len = (src != pad_id).sum(1)
    return (src_len.float() * max_len_a).long() + max_len_b


@overload
def length_penalty(length: Tensor, alpha: float) -> Tensor: ...
@overload
def length_penalty(length: int, alpha: float) -> float: ...
def length_penalty(length: Tensor | int, alpha: float) -> Tensor | float:
    """GNMT length penalty (Wu et al., 2016): ((5 + length) / 6) ^ alpha, for a tensor of lengths or one length."""
    return ((5.0 + length) / 6.0) ** alpha


class _Vocabulary:
    """What a decoder may emit: never pad or bos; at a sentence's length limit only eos (both searches)."""

    def __init__(self, vocab: int, pad_id: int, bos_id: int, eos_id: int, device: torch.device) -> None:
        self.never = torch.tensor([pad_id, bos_id], device=device)
        self.not_eos = torch.arange(vocab, device=device) != eos_id  # (V,)

    def restrict(self, scores: Tensor, at_limit: Tensor) -> Tensor:
        """In place on (..., V) scores; `at_limit` (one entry per leading index but the last) marks rows at their
        limit."""
        scores.index_fill_(-1, self.never, float("-inf"))
        if bool(at_limit.any()):
            scores.masked_fill_(at_limit.unsqueeze(-1) & self.not_eos, float("-inf"))
        return scores


@torch.no_grad()
def greedy_search(
    model: Transformer, src: Tensor, bos_id: int, eos_id: int, max_len_a: float = 1.0, max_len_b: int = 50
) -> list[list[int]]:
    """Most probable next token at every step. Returns token ids without bos/eos, one list per sentence."""
    pad_id = model.cfg.pad_id
    bsz = src.size(0)
    memory, src_mask = model.encode(src)
    max_len = _max_lengths(src, pad_id, max_len_a, max_len_b)
    cache = model.new_cache()
    tokens = torch.full((bsz, 1), bos_id, dtype=torch.long, device=src.device)
    out = torch.full((bsz, int(max_len.max())), pad_id, dtype=torch.long, device=src.device)
    active = torch.arange(bsz, device=src.device)  # sentences still decoding (finished ones leave the batch)
    allowed = _Vocabulary(model.cfg.vocab_size, pad_id, bos_id, eos_id, src.device)
    for t in range(out.size(1)):
        logits = model.decode(tokens, memory, src_mask, cache, start=t)[:, -1].float()  # (B', V)
        tokens = allowed.restrict(logits, t + 1 >= max_len).argmax(-1, keepdim=True)  # (B', 1)
        out[active, t] = tokens.squeeze(1)
        done = tokens.squeeze(1) == eos_id
        if bool(done.all()):
            break
        if bool(done.any()):
            keep = (~done).nonzero().squeeze(1)
            active, tokens, memory, max_len = active[keep], tokens[keep], memory[keep], max_len[keep]
            src_mask = src_mask[keep] if src_mask is not None else None
            _keep_sentences(cache, keep, 1)
    return [_strip(row, eos_id, pad_id) for row in out.tolist()]


def _keep_sentences(cache: KVCache, keep: Tensor, k: int) -> None:
    """Drop finished sentences from the cache: the `keep` sentences' k beam rows of the self-attention keys/values,
    their single row of the cross-attention ones."""
    rows = (keep.unsqueeze(1) * k + torch.arange(k, device=keep.device)).view(-1)
    for layer in cache:
        layer["self"].select(rows)
        cross = layer["cross"]
        for name, tensor in cross.items():
            cross[name] = tensor.index_select(0, keep)


def _extend(seq: Tensor, beam: Tensor, tok: Tensor) -> Tensor:
    """Hypotheses (B, k, t+1), parent beams (B, m) and new tokens (B, m) -> the m extended hypotheses (B, m, t+2)."""
    parents = seq.gather(1, beam.unsqueeze(-1).expand(-1, -1, seq.size(2)))
    return torch.cat([parents, tok.unsqueeze(-1)], 2)


def _strip(ids: list[int], eos_id: int, pad_id: int) -> list[int]:
    """Cut at the first eos and drop padding."""
    if eos_id in ids:
        ids = ids[: ids.index(eos_id)]
    return [i for i in ids if i != pad_id]


def _start(bsz: int, k: int, max_steps: int, bos_id: int, pad_id: int, device) -> tuple[Tensor, ...]:
    """The k live beams of each sentence (only the first alive: all start identical) and k empty finished slots."""
    alive_seq = torch.full((bsz, k, 1), bos_id, dtype=torch.long, device=device)  # (B, k, t+1)
    alive_score = torch.zeros(bsz, k, device=device)
    alive_score[:, 1:] = float("-inf")  # all beams start identical: keep one alive at t = 0
    fin_seq = torch.full((bsz, k, max_steps + 1), pad_id, dtype=torch.long, device=device)
    fin_score = torch.full((bsz, k), float("-inf"), device=device)  # length-normalised
    return alive_seq, alive_score, fin_seq, fin_score


def _candidates(logits: Tensor, alive_score: Tensor, allowed: _Vocabulary, at_limit: Tensor) -> tuple[Tensor, ...]:
    """The 2k best extensions of each sentence's k beams, (B', 2k) scores, parent beams and tokens: at most k of
    them end in eos, so k live ones always remain."""
    k, vocab = logits.shape[1:]
    # score + log_softmax(logits) = logits + (score - logsumexp): one pass over the vocabulary fewer.
    offset = alive_score - torch.logsumexp(logits, dim=-1)  # (B', k)
    cand = allowed.restrict(logits + offset.unsqueeze(-1), at_limit)
    top_score, top_idx = cand.view(-1, k * vocab).topk(2 * k, dim=1)  # (B', 2k)
    return top_score, top_idx // vocab, top_idx % vocab


def _merge_finished(fin_seq: Tensor, fin_score: Tensor, new_seq: Tensor, new_score: Tensor, k: int, pad_id: int):
    """The k best of the finished hypotheses and the newly finished ones (length-normalised scores); the new ones
    are padded to the finished ones' length."""
    new_seq = F.pad(new_seq, (0, fin_seq.size(2) - new_seq.size(2)), value=pad_id)
    fin_score, keep = torch.cat([fin_score, new_score], 1).topk(k, dim=1)  # of (B, 3k)
    fin_seq = torch.cat([fin_seq, new_seq], 1).gather(1, keep.unsqueeze(-1).expand(-1, -1, fin_seq.size(2)))
    return fin_seq, fin_score


def _cannot_improve(alive_score: Tensor, fin_score: Tensor, best_possible_lp: Tensor) -> Tensor:
    """(B,) True where k hypotheses have finished and the best alive one, even at the most favourable length
    penalty, scores no better than the worst of them."""
    bound = alive_score[:, 0] / best_possible_lp
    return (fin_score[:, -1] > float("-inf")) & (bound <= fin_score[:, -1])


@torch.no_grad()
def beam_search(
    model: Transformer,
    src: Tensor,
    bos_id: int,
    eos_id: int,
    beam_size: int = 4,
    alpha: float = 0.6,
    max_len_a: float = 1.0,
    max_len_b: int = 50,
) -> list[list[int]]:
    """Batched beam search. Returns the best finished hypothesis per sentence (ids without bos/eos)."""
    pad_id, k, vocab, bsz, device = model.cfg.pad_id, beam_size, model.cfg.vocab_size, src.size(0), src.device
    memory, src_mask = model.encode(src)  # one row per sentence: its k beams share it in cross-attention
    max_len = _max_lengths(src, pad_id, max_len_a, max_len_b)  # (B,)
    max_steps = int(max_len.max())
    best_possible_lp = length_penalty(max_len, alpha)  # (B,) penalty at the longest allowed output

    cache = model.new_cache()
    alive_seq, alive_score, fin_seq, fin_score = _start(bsz, k, max_steps, bos_id, pad_id, device)
    sentence_done = torch.zeros(bsz, dtype=torch.bool, device=device)
    batch_offset = (torch.arange(bsz, device=device) * k).unsqueeze(1)  # (B, 1)
    active = torch.arange(bsz, device=device)  # sentences still searching: finished ones leave the batch
    best = torch.full((bsz, max_steps + 1), pad_id, dtype=torch.long, device=device)
    allowed = _Vocabulary(vocab, pad_id, bos_id, eos_id, device)
    rank_ok = torch.arange(2 * k, device=device).unsqueeze(0) < k

    for t in range(max_steps):
        logits = model.decode(alive_seq[:, :, -1].reshape(-1, 1), memory, src_mask, cache, start=t)
        logits = logits[:, -1].float().view(-1, k, vocab)  # (B', k, V)
        top_score, top_beam, top_tok = _candidates(logits, alive_score, allowed, (t + 1 >= max_len).unsqueeze(1))

        # Finish: eos candidates ranked within the top k, length-normalised, merged with the finished set.
        finishing = (top_tok == eos_id) & rank_ok & ~sentence_done.unsqueeze(1)
        if bool(finishing.any()):  # most steps have no eos among the top k: nothing to merge
            new_fin = torch.where(finishing, top_score, float("-inf")) / length_penalty(t + 1, alpha)
            new_seq = _extend(alive_seq, top_beam, top_tok)
            fin_seq, fin_score = _merge_finished(fin_seq, fin_score, new_seq, new_fin, k, pad_id)

        # Continue: the k best candidates that do not end in eos.
        live = torch.where(top_tok == eos_id, float("-inf"), top_score)
        alive_score, pick = live.topk(k, dim=1)  # (B, k)
        parent = top_beam.gather(1, pick)  # (B, k)
        alive_seq = _extend(alive_seq, parent, top_tok.gather(1, pick))
        model.reorder_cache(cache, (parent + batch_offset).view(-1))

        # Early termination: nothing alive can beat the worst of the k finished hypotheses, or the length limit.
        sentence_done |= _cannot_improve(alive_score, fin_score, best_possible_lp) | (t + 1 >= max_len)
        if bool(sentence_done.any()):  # a finished sentence's best hypothesis is final: it leaves the batch
            best[active[sentence_done]] = fin_seq[sentence_done, 0]
            if bool(sentence_done.all()):
                break
            keep = (~sentence_done).nonzero().squeeze(1)  # (B',)
            active, memory, max_len, best_possible_lp = (x[keep] for x in (active, memory, max_len, best_possible_lp))
            alive_seq, alive_score, fin_seq, fin_score = (x[keep] for x in (alive_seq, alive_score, fin_seq, fin_score))
            src_mask = src_mask[keep] if src_mask is not None else None
            sentence_done, batch_offset = sentence_done[keep], batch_offset[: keep.numel()]
            _keep_sentences(cache, keep, k)
    else:
        best[active] = fin_seq[:, 0]
    return [_strip(row, eos_id, pad_id) for row in best[:, 1:].tolist()]  # drop bos
