"""A trial's result.json, read and written by `TrainResult` only: what it writes reads back the same, in its one
place in the run's folder."""

from __future__ import annotations

import json

import pytest
from ablate.ablations.training.result import RESULT_FILE, TrainResult


def test_a_result_written_reads_back_the_same(tmp_path):
    result = TrainResult(
        metrics={"bleu": 12.5, "ppl": 3.25, "resumed_at_steps": [4]},
        curves={"train": [{"step": 1, "loss": 2.0, "lr": 0.1}], "val": []},
        hypotheses=["a b", ""],
        references=["a b c", "d"],
        sentences={"nll": [1.5, 2.0], "ntok": [3, 1]},
        budgets=[{"fraction": 0.5, "steps": 4, "metrics": {"bleu": 1.0}, "hypotheses": [], "sentences": {},
                  "test_hypotheses": []}],
    )  # fmt: skip
    result.write(tmp_path)
    assert TrainResult.path(tmp_path) == tmp_path / RESULT_FILE == tmp_path / "result.json"
    assert json.loads((tmp_path / "result.json").read_text(encoding="utf-8"))["metrics"]["bleu"] == 12.5
    assert TrainResult.read(tmp_path) == result


def test_reading_a_missing_or_damaged_result_raises(tmp_path):
    with pytest.raises(OSError):
        TrainResult.read(tmp_path)
    (tmp_path / "result.json").write_text("{not json", encoding="utf-8")
    with pytest.raises(ValueError):
        TrainResult.read(tmp_path)
