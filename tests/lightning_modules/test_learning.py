"""End to end on real files: the whole pipeline (SentencePiece, batching, Lightning, beam search, sacrebleu) can learn
a few dozen sentence pairs by heart, and the finished model's test decoding says so."""

from __future__ import annotations

from pathlib import Path

import pytest
import sacrebleu
from ablate.ablations.results.record import Layout
from ablate.ablations.study.config import build_run_config
from ablate.ablations.training.train import train, write_outputs
from ablate.data.corpus import generate


def write_pairs(directory: Path, n: int = 40) -> None:
    pairs = generate(seed=7, sizes={"train": n}, lexicon_scale=0.05, max_words=8)["train"]
    directory.mkdir(parents=True, exist_ok=True)
    for split in ("train", "valid", "test"):  # dev = train: the model must reproduce what it has seen
        (directory / f"{split}.xx").write_text("\n".join(pairs[0]) + "\n", encoding="utf-8")
        (directory / f"{split}.yy").write_text("\n".join(pairs[1]) + "\n", encoding="utf-8")


@pytest.mark.slow
def test_tiny_model_learns_few_dozen_pairs_by_heart(tmp_path, monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "disabled")
    write_pairs(tmp_path / "corpus")
    run = build_run_config(
        {
            "model": {"n_layers": 2, "d_model": 64, "d_ff": 256, "n_heads": 4, "p_drop": 0.0, "label_smoothing": 0.0},
            "train": {"max_steps": 300, "warmup_steps": 30, "lr_factor": 0.5, "val_every": 300, "beam_size": 4},
            "data": {
                "corpus": str(tmp_path / "corpus"),
                "src": "xx",
                "tgt": "yy",
                "vocab_size": 200,
                "tokens_per_batch": 1024,
                "cache_dir": str(tmp_path / "cache"),
            },
            "hardware": {"accelerator": "cpu"},
            "tracking": {"progress": False},
        }
    )
    result = train(run, tmp_path / "run")
    assert result is not None
    assert result.metrics["bleu"] >= 90, result.metrics
    assert result.metrics["ppl"] < 1.5
    assert result.metrics["bleu_signature"].startswith("nrefs:1|case:mixed|eff:no|tok:13a")
    assert result.hypotheses[0] == result.references[0]
    # The test split (the same pairs here) decoded after training with beam search: as well learnt as dev, and the
    # recorded score is sacreBLEU's of the files written beside the record.
    assert result.metrics["test_bleu"] >= 90 and result.test_hypotheses[0] == result.test_references[0]
    files = write_outputs(result, Layout(tmp_path / "out"), "run")
    hyps, refs = (files[k].read_text(encoding="utf-8").splitlines() for k in ("test_hypotheses", "test_references"))
    assert len(hyps) == len(refs) == result.metrics["test_sentences"] == 40
    assert result.metrics["test_bleu"] == pytest.approx(sacrebleu.corpus_bleu(hyps, [refs]).score, abs=1e-9)
    assert result.metrics["test_bleu_signature"] == result.metrics["bleu_signature"]  # same metric as dev
