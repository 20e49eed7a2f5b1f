"""The LightningDataModule: batch layout, ranks from the trainer, and a real (tiny) Lightning fit."""

from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace

import pytest

pl = pytest.importorskip("pytorch_lightning")
torch = pytest.importorskip("torch")

from ablate.data.datamodule import TranslationDataModule  # noqa: E402
from ablate.data.tokenizer import BOS_ID, EOS_ID, PAD_ID  # noqa: E402


@pytest.fixture(params=[0, 4], ids=["greedy", "fixed-shapes"])
def datamodule(request, shared_cache, small_config):
    dm = TranslationDataModule(replace(small_config(shared_cache), buckets=request.param))
    dm.prepare_data()
    dm.setup("fit")
    return dm


def test_batch_layout_and_index_match_references(datamodule):
    refs = datamodule.references("valid")
    seen = []
    for batch in datamodule.val_dataloader():
        src, tgt_in, tgt_out, index = batch["src"], batch["tgt_in"], batch["tgt_out"], batch["index"]
        assert src.dtype == tgt_in.dtype == index.dtype == torch.long
        assert tgt_in.shape == tgt_out.shape and src.shape[0] == tgt_in.shape[0] == index.shape[0]
        assert (tgt_in[:, 0] == BOS_ID).all()
        words = (tgt_out[:, :-1] != PAD_ID) & (tgt_out[:, :-1] != EOS_ID)  # y, shifted right by one in tgt_in
        assert torch.equal(tgt_in[:, 1:][words], tgt_out[:, :-1][words])
        assert ((tgt_in != PAD_ID).sum(1) == (tgt_out != PAD_ID).sum(1)).all()
        assert ((src == EOS_ID).sum(1) == 1).all() and ((tgt_out == EOS_ID).sum(1) == 1).all()
        assert src.shape[0] * (src.shape[1] + tgt_in.shape[1]) <= datamodule.cfg.tokens_per_batch
        if datamodule.cfg.buckets:  # padded to the bucket's lengths, which its longest pair may not reach
            assert (src.shape[1], tgt_in.shape[1]) == datamodule.shapes("valid").shape_of(index.tolist())
        decoded = datamodule.tokenizer.decode(tgt_out.tolist())
        assert decoded == [refs[i] for i in index.tolist()]
        seen += index.tolist()
    assert sorted(seen) == list(range(len(refs)))


@pytest.mark.parametrize("world_size", [1, 2, 3])
def test_every_test_sentence_is_decoded_by_some_rank_with_equal_batch_counts(datamodule, world_size):
    """What the test decoding gathers across ranks: each rank's share of the test split, the same number of batches
    per rank (the collective calls line up), together every sentence, each batch's targets its references'."""
    refs = datamodule.references("test")
    assert refs != datamodule.references("valid")
    shards = []
    for rank in range(world_size):
        datamodule.trainer = SimpleNamespace(global_rank=rank, world_size=world_size)
        shards.append(list(datamodule.test_dataloader()))
    datamodule.trainer = None
    assert len({len(shard) for shard in shards}) == 1
    seen = set()
    for batch in (b for shard in shards for b in shard):
        index = batch["index"].tolist()
        assert datamodule.tokenizer.decode(batch["tgt_out"].tolist()) == [refs[i] for i in index]
        seen |= set(index)
    assert seen == set(range(len(refs)))


def test_ranks_come_from_the_trainer(datamodule):
    shards = []
    for rank in (0, 1):
        datamodule.trainer = SimpleNamespace(global_rank=rank, world_size=2)
        shards.append([b["index"].tolist() for b in datamodule.train_dataloader()])
    datamodule.trainer = None
    assert len(shards[0]) == len(shards[1])
    both = {i for b in shards[0] for i in b} & {i for b in shards[1] for i in b}
    # Disjoint, but for the pairs that top up a bucket's last batch (fixed shapes), which train twice in an epoch.
    shapes = datamodule.shapes("train")
    topped_up = 0 if shapes is None else sum(-len(shapes.members(k)) % n for k, n in enumerate(shapes.size.tolist()))
    assert len(both) <= topped_up
    assert datamodule.rank_and_world_size() == (0, 1)


class _Tiny(pl.LightningModule):
    """A bag-of-embeddings 'model': just enough to drive Lightning's loops over our batches."""

    def __init__(self, vocab: int) -> None:
        super().__init__()
        self.emb = torch.nn.Embedding(vocab, 8, padding_idx=PAD_ID)
        self.out = torch.nn.Linear(8, vocab)
        self.epochs_seen: list[list[int]] = []

    def training_step(self, batch, batch_idx):
        if batch_idx == 0:
            self.epochs_seen.append(batch["index"].tolist())
        logits = self.out(self.emb(batch["tgt_in"]))  # (B, T, V)
        return torch.nn.functional.cross_entropy(logits.transpose(1, 2), batch["tgt_out"], ignore_index=PAD_ID)

    def validation_step(self, batch, batch_idx):
        self.log("valid/loss", self.training_step(batch, 1), batch_size=batch["src"].shape[0])

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)


def test_lightning_fit_reshuffles_each_epoch(datamodule):
    model = _Tiny(datamodule.vocab_size)
    trainer = pl.Trainer(
        max_epochs=2, limit_train_batches=2, limit_val_batches=1, use_distributed_sampler=False, accelerator="cpu",
        logger=False, enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
    )  # fmt: skip
    trainer.fit(model, datamodule=datamodule)
    assert len(model.epochs_seen) == 2 and model.epochs_seen[0] != model.epochs_seen[1]
