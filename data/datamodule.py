"""The LightningDataModule: `prepare` once per machine, then token-budget batches on every rank.

The trainer is built with `use_distributed_sampler=False`, because a token-budget batch sampler cannot be wrapped in
Lightning's DistributedSampler; the samplers here shard by rank themselves (see `data.batching`).
"""

from __future__ import annotations

import sys

import numpy as np
import pytorch_lightning as pl
import torch
from ablate.data.batching import EvalBatchSampler, ShapeBuckets, TokenBudgetBatchSampler, plan_buckets
from ablate.data.config import DataConfig
from ablate.data.prepare import EncodedSplit, PreparedCorpus, prepare
from ablate.data.stats import filtered
from ablate.data.tokenizer import BOS_ID, EOS_ID, PAD_ID, Tokenizer
from torch.utils.data import DataLoader, Dataset


class _Positions(Dataset):
    """Item i is just i: the collate function gathers a whole batch from the memory-mapped arrays at once."""

    def __init__(self, size: int) -> None:
        self.size = size

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, i: int) -> int:
        return i


class PadCollate:
    """Index lists -> {'src', 'tgt_in', 'tgt_out', 'index'}: src = x + eos, tgt_in = bos + y, tgt_out = y + eos.

    Holds the cache directory rather than the arrays, so DataLoader workers open their own memory maps instead of
    receiving a pickled copy of the split. With `shapes` (data.buckets) a batch is padded to its bucket's lengths,
    else to its longest pair's.
    """

    def __init__(self, corpus: PreparedCorpus, split: str, shapes: ShapeBuckets | None = None) -> None:
        self.directory, self.split_name, self.shapes = corpus.directory, split, shapes
        self._split: EncodedSplit | None = corpus.split(split)

    def __getstate__(self) -> dict:
        return {**self.__dict__, "_split": None}

    def __call__(self, indices: list[int]) -> dict[str, torch.Tensor]:
        if self._split is None:
            self._split = EncodedSplit(self.directory, self.split_name)
        split = self._split
        index = np.asarray(indices, dtype=np.int64)
        if self.shapes is not None:
            length_s, length_t = self.shapes.shape_of(indices)
        else:
            length_s, length_t = int(split.src_len[index].max()) + 1, int(split.tgt_len[index].max()) + 1
        src = np.full((len(index), length_s), PAD_ID, dtype=np.int64)  # (B, S)
        tgt_in = np.full((len(index), length_t), PAD_ID, dtype=np.int64)  # (B, T)
        tgt_out = tgt_in.copy()
        for row, i in enumerate(indices):
            x, y = split.pair(i)
            src[row, : len(x)], src[row, len(x)] = x, EOS_ID
            tgt_in[row, 0], tgt_in[row, 1 : len(y) + 1] = BOS_ID, y
            tgt_out[row, : len(y)], tgt_out[row, len(y)] = y, EOS_ID
        return {
            "src": torch.from_numpy(src),
            "tgt_in": torch.from_numpy(tgt_in),
            "tgt_out": torch.from_numpy(tgt_out),
            "index": torch.from_numpy(index),
        }


class TranslationDataModule(pl.LightningDataModule):
    """Parallel text -> batches for train ('train'), validation ('valid') and test ('test')."""

    def __init__(self, cfg: DataConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self._corpus: PreparedCorpus | None = None
        self._told = False
        """Whether `prepare_data` has said what the corpus leaves out (once: Lightning and the trainer call it too)."""
        self.resume_at: tuple[int, int] | None = None
        """(epoch, batches already trained in it) of a run resuming mid-epoch; the next train loader starts there."""

    def prepare_data(self) -> None:
        """Build the caches (Lightning runs this on one process per node before `setup`). `ablate data prepare`'s
        progress goes to stderr while a corpus is built; the first call also says there, in one line, how many pairs
        the corpus leaves out and why (`data.stats.filtered`), built or found in the cache."""
        self._corpus = prepare(self.cfg, progress=True)
        if not self._told:
            self._told = True
            if note := filtered(self._corpus.manifest["stats"]):
                print(f"ablate data: {note}", file=sys.stderr, flush=True)

    def setup(self, stage: str | None = None) -> None:
        """Load the caches on every rank (a warm `prepare`: keys, manifest, memory maps)."""
        self._corpus = prepare(self.cfg)

    @property
    def corpus(self) -> PreparedCorpus:
        """The prepared corpus; prepared on first use, so `vocab_size` can be read before the trainer exists."""
        if self._corpus is None:
            self._corpus = prepare(self.cfg)
        return self._corpus

    @property
    def tokenizer(self) -> Tokenizer:
        return self.corpus.tokenizer

    @property
    def vocab_size(self) -> int:
        return self.corpus.vocab_size

    def references(self, split: str) -> list[str]:
        """Raw target sentences of 'valid' or 'test', indexed by the batches' `index`."""
        return self.corpus.references(split)

    def sources(self, split: str) -> list[str]:
        return self.corpus.sources(split)

    def rank_and_world_size(self) -> tuple[int, int]:
        """From the attached trainer, else from torch.distributed if initialised, else a single process."""
        if self.trainer is not None:
            return self.trainer.global_rank, self.trainer.world_size
        if torch.distributed.is_available() and torch.distributed.is_initialized():
            return torch.distributed.get_rank(), torch.distributed.get_world_size()
        return 0, 1

    def train_dataloader(self) -> DataLoader:
        split = self.corpus.split("train")
        rank, world_size = self.rank_and_world_size()
        sampler = TokenBudgetBatchSampler(
            split.src_len, split.tgt_len, self.cfg.tokens_per_batch, seed=self.cfg.seed, rank=rank,
            world_size=world_size, shapes=self.shapes("train"),
        )  # fmt: skip
        if self.resume_at is not None:  # set from a checkpoint by ablations.training.checkpoints.ResumeState
            sampler.resume(*self.resume_at)
            self.resume_at = None
        return self._loader("train", sampler)

    def shapes(self, split: str) -> ShapeBuckets | None:
        """A split's fixed batch shapes (data.buckets), None when batches are cut greedily. The same lengths give the
        same buckets: planned again for each loader (milliseconds), never stored."""
        if not self.cfg.buckets:
            return None
        lengths = self.corpus.split(split)
        return plan_buckets(lengths.src_len + 1, lengths.tgt_len + 1, self.cfg.buckets, self.cfg.tokens_per_batch)

    def val_dataloader(self) -> DataLoader:
        return self._eval_loader("valid")

    def test_dataloader(self) -> DataLoader:
        return self._eval_loader("test")

    def _eval_loader(self, name: str) -> DataLoader:
        split = self.corpus.split(name)
        rank, world_size = self.rank_and_world_size()
        sampler = EvalBatchSampler(
            split.src_len, split.tgt_len, self.cfg.tokens_per_batch, rank=rank, world_size=world_size,
            shapes=self.shapes(name),
        )  # fmt: skip
        return self._loader(name, sampler)

    def _loader(self, name: str, sampler: TokenBudgetBatchSampler | EvalBatchSampler) -> DataLoader:
        return DataLoader(
            _Positions(len(self.corpus.split(name))),
            batch_sampler=sampler,
            collate_fn=PadCollate(self.corpus, name, sampler.shapes),
            num_workers=self.cfg.num_workers,
            persistent_workers=self.cfg.num_workers > 0,
            # Its own generator: a DataLoader otherwise draws its workers' base seed from the global RNG at every
            # iteration (each validation), which would shift dropout after an exact resume (see
            # ablations.training.checkpoints).
            generator=torch.Generator().manual_seed(self.cfg.seed),
        )
