"""Did the model learn to translate? Its dev perplexity with every source swapped for another sentence's tells a
translation model (predicts much worse from the wrong source) from a language model of the target (does not notice),
the check the report's 'no source use' mark and its withheld verdicts rest on (ablations.statistics.convergence)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from ablate.ablations.statistics.convergence import SOURCE_RATIO_MIN
from ablate.ablations.study.config import build_run_config
from ablate.ablations.training.train import train
from ablate.data.corpus import generate
from ablate.lightning_modules.module import source_use


def write_corpus(directory: Path, *, shuffled: bool, n: int = 60) -> None:
    """n pairs as train, dev and test. Shuffled: each training target is seen with 4 sources drawn at random, so
    the source says nothing about the target and the best a model can do is a language model of the targets."""
    src, tgt = generate(seed=11, sizes={"train": n}, lexicon_scale=0.05, max_words=8)["train"]
    train_src, train_tgt = list(src), list(tgt)
    if shuffled:
        rng = random.Random(0)
        train_src = [rng.choice(src) for _ in range(4) for _ in tgt]
        train_tgt = [t for _ in range(4) for t in tgt]
    directory.mkdir(parents=True, exist_ok=True)
    for split, (s, t) in {"train": (train_src, train_tgt), "valid": (src, tgt), "test": (src, tgt)}.items():
        (directory / f"{split}.xx").write_text("\n".join(s) + "\n", encoding="utf-8")
        (directory / f"{split}.yy").write_text("\n".join(t) + "\n", encoding="utf-8")


def _train(tmp_path: Path, shuffled: bool) -> dict:
    corpus = tmp_path / ("shuffled" if shuffled else "pairs")
    write_corpus(corpus, shuffled=shuffled)
    run = build_run_config(
        {
            "model": {"n_layers": 2, "d_model": 64, "d_ff": 256, "n_heads": 4, "p_drop": 0.0, "label_smoothing": 0.0},
            "train": {
                "max_steps": 250,
                "warmup_steps": 30,
                "lr_factor": 0.5,
                "val_every": 250,
                "beam_size": 1,
                "test_eval": False,
            },  # fmt: skip
            "data": {
                "corpus": str(corpus),
                "src": "xx",
                "tgt": "yy",
                "vocab_size": 200,
                "tokens_per_batch": 1024,
                "cache_dir": str(tmp_path / "cache"),
            },  # fmt: skip
            "hardware": {"accelerator": "cpu"},
            "tracking": {"progress": False},
        }
    )
    result = train(run, tmp_path / ("run-shuffled" if shuffled else "run"))
    assert result is not None
    return result.metrics


def test_source_use_compares_the_same_sentences_and_leaves_out_those_without_a_partner():
    nll, ntok = {0: 2.0, 1: 4.0, 2: 100.0}, {0: 2, 1: 2, 2: 1}
    use = source_use({0: 6.0, 1: 8.0}, nll, ntok)  # sentence 2 was alone in its batch: not swapped, not counted
    assert use["ppl_swapped"] == pytest.approx(2.718281828**3.5, rel=1e-6)
    assert use["source_ppl_ratio"] == pytest.approx(2.718281828**2, rel=1e-6)


@pytest.mark.slow
def test_a_model_trained_on_shuffled_sources_is_told_from_one_that_translates(tmp_path, monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "disabled")
    translates, ignores = _train(tmp_path, shuffled=False), _train(tmp_path, shuffled=True)
    assert translates["bleu"] > 50, translates  # it learnt the pairs
    # Measured: 2.9 for this model, which knows 60 sentences by heart (their first words name the rest, so the
    # source matters only at the start); the same recipe on shuffled sources: 1.00001.
    assert translates["source_ppl_ratio"] > SOURCE_RATIO_MIN, translates
    # The language model of the targets: the right source helps it no more than a wrong one.
    assert ignores["source_ppl_ratio"] < SOURCE_RATIO_MIN, ignores
    assert ignores["ppl_swapped"] == pytest.approx(ignores["ppl"], rel=0.25)
