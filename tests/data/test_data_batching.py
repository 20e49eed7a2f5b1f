"""Token-budget batching: budget, bucketing, determinism per (seed, epoch), DDP shards."""

from __future__ import annotations

import numpy as np
import pytest
from ablate.data.batching import (
    EvalBatchSampler,
    TokenBudgetBatchSampler,
    padding_overhead,
    plan_batches,
    plan_buckets,
)

BUDGET = 512


@pytest.fixture(scope="module")
def lengths() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    src = rng.integers(1, 60, size=3001)
    tgt = np.clip(src + rng.integers(-5, 6, size=src.size), 1, 64)
    return src, tgt


def _cost(batch: list[int], src: np.ndarray, tgt: np.ndarray) -> int:
    return len(batch) * (int(src[batch].max()) + 1 + int(tgt[batch].max()) + 1)


def test_batches_respect_the_budget_and_cover_every_pair_once(lengths):
    src, tgt = lengths
    sampler = TokenBudgetBatchSampler(src, tgt, BUDGET, seed=0)
    batches = list(sampler)
    assert all(_cost(b, src, tgt) <= BUDGET for b in batches)
    flat = [i for b in batches for i in b]
    assert sorted(flat) == list(range(len(src)))


def test_same_seed_and_epoch_same_batches_new_epoch_new_order(lengths):
    src, tgt = lengths
    first, again = (TokenBudgetBatchSampler(src, tgt, BUDGET, seed=7) for _ in range(2))
    assert list(first) == list(again)
    first.set_epoch(1)
    assert list(first) != list(again)
    assert list(TokenBudgetBatchSampler(src, tgt, BUDGET, seed=8)) != list(again)
    # Lightning calls set_epoch on dataloader.batch_sampler.sampler: it must reach us.
    again.sampler.set_epoch(1)
    assert list(first) == list(again)


@pytest.mark.parametrize("epoch", [0, 1, 2])
def test_ddp_shards_are_disjoint_and_equal(lengths, epoch):
    src, tgt = lengths
    shards = []
    for rank in (0, 1):
        sampler = TokenBudgetBatchSampler(src, tgt, BUDGET, seed=3, rank=rank, world_size=2)
        sampler.set_epoch(epoch)
        shards.append(list(sampler))
        assert len(shards[-1]) == len(sampler)
    assert len(shards[0]) == len(shards[1]) > 0
    seen = [{i for batch in shard for i in batch} for shard in shards]
    assert not seen[0] & seen[1]
    assert len(seen[0] | seen[1]) > 0.95 * len(src)  # at most one batch dropped to keep the ranks even


def test_eval_batches_are_sorted_unshuffled_and_equal_per_rank(lengths):
    src, tgt = lengths
    whole = list(EvalBatchSampler(src, tgt, BUDGET))
    assert sorted(i for b in whole for i in b) == list(range(len(src)))
    assert [int(tgt[b].max()) for b in whole] == sorted(int(tgt[b].max()) for b in whole)
    for world in (2, 3):
        shards = [list(EvalBatchSampler(src, tgt, BUDGET, rank=r, world_size=world)) for r in range(world)]
        assert len({len(s) for s in shards}) == 1
        covered = {i for shard in shards for b in shard for i in b}
        assert covered == set(range(len(src)))  # repeats only duplicate, never lose, a pair


def test_bucketing_pads_far_less_than_random_batching(lengths):
    src, tgt = lengths
    ours = padding_overhead(src + 1, tgt + 1, [np.asarray(b) for b in TokenBudgetBatchSampler(src, tgt, 2048, seed=0)])
    order = np.random.default_rng(0).permutation(len(src))
    random = padding_overhead(src + 1, tgt + 1, plan_batches(src + 1, tgt + 1, order, 2048))
    assert ours < 0.1 and random > 3 * ours


def test_rank_outside_world_is_refused(lengths):
    with pytest.raises(ValueError):
        TokenBudgetBatchSampler(*lengths, BUDGET, seed=0, rank=2, world_size=2)


# ------------------------------------------------------------------------------------ fixed shapes (data.buckets)
@pytest.mark.parametrize("buckets", [1, 4, 8])
def test_fixed_shapes_give_a_whole_run_one_full_shape_a_bucket_and_every_pair_each_epoch(lengths, buckets):
    """Training batches are full (a bucket's last batch is topped up with pairs of its own that so train twice that
    epoch), so a run trains on at most one shape a bucket, each step on a full budget, every pair every epoch."""
    src, tgt = lengths
    shapes = plan_buckets(src + 1, tgt + 1, buckets, BUDGET)
    sampler = TokenBudgetBatchSampler(src, tgt, BUDGET, seed=0, shapes=shapes)
    seen, counts = set(), np.bincount(shapes.of_pair)
    for epoch in range(6):
        sampler.set_epoch(epoch)
        batches = list(sampler)
        flat = [i for b in batches for i in b]
        assert set(flat) == set(range(len(src)))
        twice = len(flat) - len(src)  # the top-ups: fewer than one batch a bucket
        assert twice == sum(-c % z for c, z in zip(counts, shapes.size, strict=True) if c > z)
        for b in batches:
            s, t = shapes.shape_of(b)
            assert len(set(b)) == len(b)  # never the same pair twice in one batch
            assert s >= src[b].max() + 1 and t >= tgt[b].max() + 1  # the bucket's lengths hold every pair
            assert len(b) * (s + t) <= BUDGET
            assert len(b) == min(shapes.size[shapes.of_pair[b[0]]], counts[shapes.of_pair[b[0]]])  # full
            seen.add((len(b), s, t))
    assert seen == shapes.shapes(every_pair=False) and len(seen) <= buckets


def test_fixed_shapes_pad_about_as_little_as_greedy_cuts_and_far_less_than_one_bucket(lengths):
    src, tgt = lengths
    greedy = padding_overhead(
        src + 1, tgt + 1, [np.asarray(b) for b in TokenBudgetBatchSampler(src, tgt, 2048, seed=0)]
    )
    padding = {k: plan_buckets(src + 1, tgt + 1, k, 2048).padding(src + 1, tgt + 1) for k in (1, 2, 8, 16)}
    assert padding[1] > padding[2] > padding[8] > padding[16]  # the cuts are optimal for each count: more pad less
    assert padding[8] <= 0.15 and padding[16] < greedy + 0.05 and padding[1] > 0.3  # 0.15: the cap of issue 41


def test_fixed_shape_batches_depend_on_seed_and_epoch_only_and_a_resumed_epoch_goes_on_where_it_stopped(lengths):
    src, tgt = lengths

    def sampler(epoch: int, seed: int = 5) -> TokenBudgetBatchSampler:
        made = TokenBudgetBatchSampler(src, tgt, BUDGET, seed=seed, shapes=plan_buckets(src + 1, tgt + 1, 6, BUDGET))
        made.set_epoch(epoch)
        return made

    whole = list(sampler(2))
    assert whole == list(sampler(2)) and whole != list(sampler(3)) and whole != list(sampler(2, seed=6))
    resumed = sampler(2)
    resumed.resume(2, 7)
    assert list(resumed) == whole[7:]
    assert list(resumed) == whole  # the skip applies to the interrupted epoch's first iteration only


def test_eval_batches_with_fixed_shapes_cover_each_pair_once_in_few_shapes(lengths):
    src, tgt = lengths
    shapes = plan_buckets(src + 1, tgt + 1, 4, BUDGET)
    batches = list(EvalBatchSampler(src, tgt, BUDGET, shapes=shapes))
    assert sorted(i for b in batches for i in b) == list(range(len(src)))
    assert {(len(b), *shapes.shape_of(b)) for b in batches} == shapes.shapes(every_pair=True)
