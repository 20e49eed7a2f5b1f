"""Recipe pieces: checkpoint averaging, gradient accumulation to a token target, corpus difficulty knobs."""

from __future__ import annotations

import pytest
import torch
from ablate.ablations.study.config import build_run_config
from ablate.ablations.training.train import accumulation
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


def test_the_blow_up_check_reads_the_loss_every_step_on_a_cpu_and_every_few_on_a_gpu():
    """On a GPU (`every_step` False) the worst loss between reads is kept on the device: a NaN or a blow-up between
    two reads is still caught, at the next read, and nothing is read in between."""
    from ablate.lightning_modules.module import LOSS_READ_EVERY, LossWatch

    cpu = LossWatch()
    assert cpu.observe(torch.tensor(6.0), 0, 10, True) is None and cpu.first == 6.0
    assert "became nan at step 1" in cpu.observe(torch.tensor(float("nan")), 1, 10, True)
    assert cpu.observe(torch.tensor(30.0), 5, 10, True) is None  # during warmup a high loss is allowed
    assert "above 3x its first value 6" in cpu.observe(torch.tensor(30.0), 11, 10, True)

    gpu = LossWatch()
    assert gpu.observe(torch.tensor(6.0), 0, 10, False) is None and gpu.first == 6.0  # the first loss is read at once
    losses = [5.0, float("nan"), 4.0] + [3.0] * (LOSS_READ_EVERY - 5)  # steps 1 .. LOSS_READ_EVERY - 2
    said = [gpu.observe(torch.tensor(v), step, 10, False) for step, v in enumerate(losses, start=1)]
    assert said == [None] * len(losses) and gpu.worst is not None  # not read yet: kept on the device
    caught = gpu.observe(torch.tensor(3.0), LOSS_READ_EVERY - 1, 10, False)
    assert caught is not None and "became nan" in caught
    gpu.worst = None
    for step in range(LOSS_READ_EVERY, 2 * LOSS_READ_EVERY - 1):
        assert gpu.observe(torch.tensor(20.0 if step == LOSS_READ_EVERY + 3 else 2.0), step, 10, False) is None
    assert "20 at step" in gpu.observe(torch.tensor(2.0), 2 * LOSS_READ_EVERY - 1, 10, False)


@pytest.mark.parametrize("seed", [-1, 2**32])
def test_a_seed_no_generator_takes_is_refused_with_the_field_named(seed):
    """Before any data is prepared or folder written (Lightning's own check came after both)."""
    from ablate.data.errors import AblateError
    from ablate.lightning_modules.config import TrainConfig

    with pytest.raises(AblateError, match=r"train\.seed: must be in \[0, 2\^32\)"):
        TrainConfig(seed=seed)
