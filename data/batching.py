"""Token-budget batches with length bucketing, deterministic per (seed, epoch) and sharded across DDP ranks.

The paper (Section 5.1) batches "by approximate sequence length", each batch holding about 25000 source and 25000
target tokens. Here the budget counts source plus target positions of the padded batch, bos/eos included:
B * (S + T) <= tokens_per_batch, with S = longest source + 1 (eos) and T = longest target + 1 (bos or eos).

Pure numpy (no torch), so `ablate data prepare` can report padding without importing torch. DataLoader accepts any
iterable of index lists with a length as `batch_sampler`, so the samplers need not subclass torch's Sampler.
"""

from __future__ import annotations

from collections.abc import Iterator

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
    ) -> None:
        if not 0 <= rank < world_size:
            raise ValueError(f"rank {rank} is outside world size {world_size}")
        self.src_len, self.tgt_len = np.asarray(src_len) + 1, np.asarray(tgt_len) + 1  # + eos / + bos-or-eos
        self.tokens_per_batch, self.seed, self.rank, self.world_size = tokens_per_batch, seed, rank, world_size
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
            batches = plan_batches(
                self.src_len, self.tgt_len, length_order(self.src_len, self.tgt_len, rng), self.tokens_per_batch
            )
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


class EvalBatchSampler:
    """Validation/test batches: sorted by length, never shuffled, an equal number per rank.

    When the batches do not divide evenly, the shortest batch is repeated for the ranks that would be short; the
    batch's `index` field lets the caller drop the repeats.
    """

    def __init__(
        self, src_len: np.ndarray, tgt_len: np.ndarray, tokens_per_batch: int, *, rank: int = 0, world_size: int = 1
    ) -> None:
        if not 0 <= rank < world_size:
            raise ValueError(f"rank {rank} is outside world size {world_size}")
        src_len, tgt_len = np.asarray(src_len) + 1, np.asarray(tgt_len) + 1
        batches = plan_batches(src_len, tgt_len, length_order(src_len, tgt_len, None), tokens_per_batch)
        batches += [batches[0]] * (-len(batches) % world_size) if batches else []
        self.batches = batches[rank::world_size]

    def __iter__(self) -> Iterator[list[int]]:
        for batch in self.batches:
            yield batch.tolist()

    def __len__(self) -> int:
        return len(self.batches)
