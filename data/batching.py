"""Token-budget batches with length bucketing, deterministic per (seed, epoch) and sharded across DDP ranks.

The paper (Section 5.1) batches "by approximate sequence length", each batch holding about 25000 source and 25000
target tokens. Here the budget counts source plus target positions of the padded batch, bos/eos included:
B * (S + T) <= tokens_per_batch, with S = longest source + 1 (eos) and T = longest target + 1 (bos or eos).

With `data.buckets` set, batches take one of a few fixed shapes instead (`plan_buckets`): each pair belongs to one
length bucket, a batch holds pairs of one bucket padded to that bucket's lengths, so a whole run trains on one
(batch, source, target) shape a bucket (every batch full; dev and test add a shorter last batch a bucket), the same
set every epoch and on every machine. A GPU pays for every new shape (cuDNN builds an attention plan, torch.compile
a graph); greedy cuts give most batches of an epoch their own shape. The trade is padding, about as much as the
greedy cut's at 8 buckets, or less (`ablate data prepare` prints both; measured:
docs/reference/code-figures.md, "data/batching.py").

Pure numpy (no torch), so `ablate data prepare` can report padding without importing torch. DataLoader accepts any
iterable of index lists with a length as `batch_sampler`, so the samplers need not subclass torch's Sampler.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import numpy as np


def plan_batches(src_len: np.ndarray, tgt_len: np.ndarray, order: np.ndarray, budget: int) -> list[np.ndarray]:
    """Cut `order` greedily into batches whose padded cost B * (max S + max T) stays within `budget`.

    `src_len`/`tgt_len` are padded-sequence lengths (tokens + 1). A batch always holds at least one pair.
    """
    s, t = src_len[order].tolist(), tgt_len[order].tolist()
    batches, start, max_s, max_t = [], 0, 0, 0
    for i in range(len(s)):
        new_s, new_t = max(max_s, s[i]), max(max_t, t[i])
        if i > start and (i - start + 1) * (new_s + new_t) > budget:
            batches.append(order[start:i])
            start, new_s, new_t = i, s[i], t[i]
        max_s, max_t = new_s, new_t
    if start < len(s):
        batches.append(order[start:])
    return batches


def length_order(src_len: np.ndarray, tgt_len: np.ndarray, rng: np.random.Generator | None) -> np.ndarray:
    """Indices sorted by (target, source) length; with `rng`, equal lengths come in a random order.

    Sorting on the target first: it is the longer side of most corpora and appears twice (input and output).
    """
    base = np.arange(len(src_len)) if rng is None else rng.permutation(len(src_len))
    return base[np.lexsort((src_len[base], tgt_len[base]))]  # lexsort is stable: ties keep the shuffled order


def padding_overhead(src_len: np.ndarray, tgt_len: np.ndarray, batches: list[np.ndarray]) -> float:
    """Share of the padded batch positions (source + target) that are padding."""
    real = int(src_len.sum() + tgt_len.sum())
    padded = sum(len(b) * (int(src_len[b].max()) + int(tgt_len[b].max())) for b in batches)
    return 1.0 - real / padded if padded else 0.0


@dataclass(frozen=True, eq=False)
class ShapeBuckets:
    """Fixed batch shapes (`data.buckets`): a bucket per range of lengths, its padded lengths and batch size.

    Built once from a split's lengths by `plan_buckets`; the sampler cuts each bucket's pairs into batches of `size`
    and the collate function pads a batch to its bucket's `src` and `tgt` lengths, so every training batch is
    (size[k], src[k], tgt[k]) (`batches`)."""

    of_pair: np.ndarray
    """(n,) the bucket of each pair."""
    src: np.ndarray
    """(K,) padded source length of each bucket (eos included): the longest source among its pairs."""
    tgt: np.ndarray
    """(K,) padded target length of each bucket (bos or eos included)."""
    size: np.ndarray
    """(K,) pairs of a full batch: the token budget over src + tgt."""

    def members(self, bucket: int) -> np.ndarray:
        """The pairs of one bucket, in index order."""
        return np.flatnonzero(self.of_pair == bucket)

    def shape_of(self, pairs: Iterable[int]) -> tuple[int, int]:
        """(source, target) padded lengths of a batch of these pairs (all of one bucket)."""
        bucket = self.of_pair[next(iter(pairs))]
        return int(self.src[bucket]), int(self.tgt[bucket])

    def batches(self, rng: np.random.Generator | None, *, every_pair: bool) -> list[np.ndarray]:
        """Each bucket's pairs (shuffled with `rng`, else in index order) cut into batches of the bucket's size.

        `every_pair` (dev and test): each pair once, the last batch of a bucket shorter. Otherwise (training) every
        batch is full: a bucket's last batch is topped up with the first pairs of its own shuffled order, which so
        train twice that epoch (different ones each epoch), as torch's DistributedSampler repeats indices to even out
        its shards. Every step then trains on a full token budget (a shorter last batch a bucket cut the tiny
        preset's pairs a step: docs/reference/code-figures.md, "data/batching.py") and
        a run sees one shape a bucket. A bucket smaller than one batch keeps its one batch."""
        out = []
        for bucket, size in enumerate(self.size.tolist()):
            pairs = self.members(bucket)
            pairs = pairs[rng.permutation(len(pairs))] if rng is not None else pairs
            short = -len(pairs) % size
            if not every_pair and len(pairs) > size and short:
                pairs = np.concatenate([pairs, pairs[:short]])
            out += [pairs[i : i + size] for i in range(0, len(pairs), size)]
        return out

    def padding(self, src_len: np.ndarray, tgt_len: np.ndarray) -> float:
        """Share of the padded batch positions (source + target) that are padding, over the whole split."""
        padded = int(self.src[self.of_pair].sum() + self.tgt[self.of_pair].sum())
        return 1.0 - int(src_len.sum() + tgt_len.sum()) / padded if padded else 0.0

    def shapes(self, *, every_pair: bool) -> set[tuple[int, int, int]]:
        """Every (batch, source, target) shape `batches` can give (before a DDP shard drops any)."""
        counts = np.bincount(self.of_pair, minlength=len(self.size))
        out = set()
        columns = (counts.tolist(), self.size.tolist(), self.src.tolist(), self.tgt.tolist())
        for count, size, s, t in zip(*columns, strict=True):
            out.add((min(size, count), s, t))
            if every_pair and count > size and count % size:
                out.add((count % size, s, t))
        return out


def plan_buckets(src_len: np.ndarray, tgt_len: np.ndarray, buckets: int, budget: int) -> ShapeBuckets:
    """The `buckets` length ranges that pad least, for padded lengths `src_len`, `tgt_len` (tokens + 1).

    Pairs are ordered by one length, max(source, target x mean source / mean target): the longer side of a pair, in
    source units. The ranges are the contiguous cuts of that order with the fewest padded positions, found exactly by
    dynamic programming over its distinct values (a few hundred; milliseconds). A range pads every pair to the range's
    longest source and longest target. This key pads least of the keys tried (the target length alone, source +
    target, the plain max: docs/reference/code-figures.md, "data/batching.py").

    Why not a library: tensor2tensor's `bucket_by_sequence_length` and torchtext's bucket iterators take fixed,
    hand-set boundaries on one length and pad both sides to it; fairseq's batches are greedy like ours (no fixed
    shapes). None chooses the boundaries for a corpus."""
    src_len, tgt_len = np.asarray(src_len, dtype=np.int64), np.asarray(tgt_len, dtype=np.int64)
    ratio = src_len.mean() / max(tgt_len.mean(), 1e-9) if len(src_len) else 1.0
    key = np.maximum(src_len, np.rint(tgt_len * ratio).astype(np.int64))
    values, group = np.unique(key, return_inverse=True)
    n = len(values)
    longest_src, longest_tgt = np.zeros(n, np.int64), np.zeros(n, np.int64)
    np.maximum.at(longest_src, group, src_len)
    np.maximum.at(longest_tgt, group, tgt_len)
    pairs = np.bincount(group, minlength=n)
    cost = np.full((n, n), np.inf)  # cost[i, j]: padded positions of one bucket holding groups i..j
    for i in range(n):
        reach = np.maximum.accumulate(longest_src[i:]) + np.maximum.accumulate(longest_tgt[i:])
        cost[i, i:] = np.cumsum(pairs[i:]) * reach
    k = max(1, min(buckets, n))
    best = np.full((k + 1, n + 1), np.inf)  # best[b, j]: the cheapest cut of groups 0..j-1 into b buckets
    best[0, 0] = 0.0
    start = np.zeros((k + 1, n + 1), np.int64)
    for b in range(1, k + 1):
        for j in range(1, n + 1):
            total = best[b - 1, :j] + cost[:j, j - 1]
            start[b, j] = int(np.argmin(total))
            best[b, j] = total[start[b, j]]
    bucket_of_group, end = np.zeros(n, np.int64), n
    for b in range(k, 0, -1):
        bucket_of_group[start[b, end] : end] = b - 1
        end = int(start[b, end])
    used, of_group = np.unique(bucket_of_group, return_inverse=True)  # drop empty buckets (fewer groups than k)
    of_pair = of_group[group]
    src, tgt = np.zeros(len(used), np.int64), np.zeros(len(used), np.int64)
    np.maximum.at(src, of_pair, src_len)
    np.maximum.at(tgt, of_pair, tgt_len)
    return ShapeBuckets(of_pair, src, tgt, np.maximum(1, budget // (src + tgt)))


class TokenBudgetBatchSampler:
    """Training batches: bucketed by length, shuffled per (seed, epoch), a disjoint equal shard per rank.

    Every rank builds the same list of batches from (seed, epoch), shuffles their order the same way, drops the last
    `len % world_size` batches (different ones each epoch) and takes every `world_size`-th batch from its rank on.
    """

    def __init__(
        self,
        src_len: np.ndarray,
        tgt_len: np.ndarray,
        tokens_per_batch: int,
        *,
        seed: int,
        rank: int = 0,
        world_size: int = 1,
        shapes: ShapeBuckets | None = None,
    ) -> None:
        """`shapes`: fixed batch shapes (`plan_buckets` over these lengths + 1); None cuts batches greedily."""
        if not 0 <= rank < world_size:
            raise ValueError(f"rank {rank} is outside world size {world_size}")
        self.src_len, self.tgt_len = np.asarray(src_len) + 1, np.asarray(tgt_len) + 1  # + eos / + bos-or-eos
        self.tokens_per_batch, self.seed, self.rank, self.world_size = tokens_per_batch, seed, rank, world_size
        self.shapes = shapes
        self.epoch = 0
        self._resume: tuple[int, int] | None = None
        self._cache: tuple[int, list[np.ndarray]] | None = None

    @property
    def sampler(self) -> TokenBudgetBatchSampler:
        """Lightning calls `set_epoch` on `dataloader.batch_sampler.sampler` (fabric `_set_sampler_epoch`), not on
        the batch sampler itself: exposing ourselves here is how each epoch gets its own shuffle."""
        return self

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def resume(self, epoch: int, batches_done: int) -> None:
        """Continue an interrupted run: epoch `epoch`, when it is iterated, starts after its first `batches_done`
        batches (this rank's), the batches the run had trained on. Lightning restarts a loader's epoch from its
        first batch; without this a resumed run would see those batches twice and others never. The epoch is
        checked when iteration starts, after Lightning's `set_epoch`: a run saved at an epoch's last batch goes on
        with the next epoch, whole. `len` stays the epoch's."""
        self._resume = (epoch, batches_done)

    def _all_batches(self) -> list[np.ndarray]:
        if self._cache is None or self._cache[0] != self.epoch:
            rng = np.random.default_rng([self.seed, self.epoch])
            if self.shapes is not None:
                batches = self.shapes.batches(rng, every_pair=False)
            else:
                order = length_order(self.src_len, self.tgt_len, rng)
                batches = plan_batches(self.src_len, self.tgt_len, order, self.tokens_per_batch)
            batches = [batches[i] for i in rng.permutation(len(batches))]
            self._cache = (self.epoch, batches[: len(batches) - len(batches) % self.world_size])
        return self._cache[1]

    def __iter__(self) -> Iterator[list[int]]:
        resume, self._resume = self._resume, None
        skip = resume[1] if resume is not None and resume[0] == self.epoch else 0
        for batch in self._all_batches()[self.rank :: self.world_size][skip:]:
            yield batch.tolist()

    def __len__(self) -> int:
        return len(self._all_batches()) // self.world_size

    def largest(self) -> list[int]:
        """This rank's batch of the current epoch with the most padded tokens, B x (S + T): the step that needs the
        most memory (a run checks it before step 1). Reads the epoch's plan without moving the iteration."""

        def padded(batch: np.ndarray) -> int:
            if self.shapes is not None:
                s, t = self.shapes.shape_of(batch.tolist())
            else:
                s, t = int(self.src_len[batch].max()), int(self.tgt_len[batch].max())
            return len(batch) * (s + t)

        return max(self._all_batches()[self.rank :: self.world_size], key=padded).tolist()


class EvalBatchSampler:
    """Validation/test batches: sorted by length, never shuffled, an equal number per rank.

    When the batches do not divide evenly, the shortest batch is repeated for the ranks that would be short; the
    batch's `index` field lets the caller drop the repeats.
    """

    def __init__(
        self,
        src_len: np.ndarray,
        tgt_len: np.ndarray,
        tokens_per_batch: int,
        *,
        rank: int = 0,
        world_size: int = 1,
        shapes: ShapeBuckets | None = None,
    ) -> None:
        """`shapes`: fixed batch shapes (`plan_buckets` over these lengths + 1), batches in bucket order."""
        if not 0 <= rank < world_size:
            raise ValueError(f"rank {rank} is outside world size {world_size}")
        src_len, tgt_len = np.asarray(src_len) + 1, np.asarray(tgt_len) + 1
        if shapes is not None:
            batches = shapes.batches(None, every_pair=True)
        else:
            batches = plan_batches(src_len, tgt_len, length_order(src_len, tgt_len, None), tokens_per_batch)
        batches += [batches[0]] * (-len(batches) % world_size) if batches else []
        self.batches, self.shapes = batches[rank::world_size], shapes

    def __iter__(self) -> Iterator[list[int]]:
        for batch in self.batches:
            yield batch.tolist()

    def __len__(self) -> int:
        return len(self.batches)
