"""Recipe pieces: checkpoint averaging, gradient accumulation to a token target, corpus difficulty knobs."""

from __future__ import annotations

import pytest
import torch
from ablate.ablations.config import build_run_config
from ablate.ablations.train import accumulation
from ablate.data.corpus import generate
from ablate.lightning_modules.module import average_checkpoints, average_state_dicts


def test_average_state_dicts_is_the_elementwise_mean():
    a = {"w": torch.tensor([1.0, 2.0]), "steps": torch.tensor(3)}
    b = {"w": torch.tensor([3.0, 6.0]), "steps": torch.tensor(5)}
    avg = average_state_dicts([a, b])
    torch.testing.assert_close(avg["w"], torch.tensor([2.0, 4.0]))
    assert avg["steps"].item() == 5  # integer buffers are not averaged


def test_average_checkpoints_reads_lightning_files(tmp_path):
    paths = []
    for i, value in enumerate((1.0, 2.0, 6.0)):
        path = tmp_path / f"c{i}.ckpt"
        torch.save({"state_dict": {"model.w": torch.full((2,), value)}}, path)
        paths.append(str(path))
    torch.testing.assert_close(average_checkpoints(paths)["model.w"], torch.full((2,), 3.0))


@pytest.mark.parametrize(
    ("tokens_per_update", "tokens_per_batch", "world", "expected"),
    [(None, 4096, 1, 1), (50000, 4096, 1, 13), (50000, 4096, 8, 2), (4096, 4096, 1, 1), (25000, 25000, 8, 1)],
)
def test_gradient_accumulation_reaches_the_token_target(tokens_per_update, tokens_per_batch, world, expected):
    run = build_run_config(
        {"train": {"tokens_per_update": tokens_per_update}, "data": {"tokens_per_batch": tokens_per_batch}}
    )
    assert accumulation(run, world) == expected


def test_corpus_difficulty_knobs():
    full = generate(seed=1, sizes={"train": 1500})["train"]
    easy = generate(seed=1, sizes={"train": 1500}, lexicon_scale=0.05, max_words=12)["train"]
    words = lambda side: {w for sentence in side for w in sentence.split()}  # noqa: E731
    assert len(words(easy[0])) < len(words(full[0])) / 2
    assert max(len(s.split()) for s in easy[0] + easy[1]) <= 12
    assert generate(seed=1, sizes={"train": 50}, lexicon_scale=0.05, max_words=12)["train"] == (
        easy[0][:50],
        easy[1][:50],
    )
