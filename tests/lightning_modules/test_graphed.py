"""The replayed training step (`train.replay_step`, lightning_modules/graphed.py) on the CPU: the same step code a card
records as a CUDA graph, run through its fixed buffers with a device-tensor learning rate and a capturable Adam,
minus the capture. It must equal the ordinary step to float rounding over 50 steps (fp32 and bf16 autocast): the
loss curve, the T/2 branch, the dev perplexity, and a run stopped at step 30 and resumed. On a card the recording and
the replay are the only other lines (`-m gpu`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from ablate.ablations.cli import main
from ablate.ablations.runtime import interrupt
from ablate.lightning_modules.module import TranslationModule

STEPS = ("--train.max_steps", "50", "--train.val_every", "25", "--train.test_eval", "false")


def _train(out: Path, *args: str) -> dict:
    code = main(["train", "--preset", "smoke", *STEPS, "--tracking.log_every", "5", "--out", str(out), *args])
    assert code == 0, code
    return json.loads((out / "result.json").read_text())


def _same(a: dict, b: dict, rel: float) -> None:
    assert [p["step"] for p in a["curves"]["train"]] == [p["step"] for p in b["curves"]["train"]]
    for x, y in zip(a["curves"]["train"], b["curves"]["train"], strict=True):
        assert x["loss"] == pytest.approx(y["loss"], rel=rel), (x, y)
        assert x["lr"] == pytest.approx(y["lr"], rel=1e-6), (x, y)
    assert a["metrics"]["ppl"] == pytest.approx(b["metrics"]["ppl"], rel=rel)
    assert [v["ppl"] for v in a["curves"]["val"]] == pytest.approx([v["ppl"] for v in b["curves"]["val"]], rel=rel)
    t2, t2_ordinary = a["budgets"][0]["metrics"], b["budgets"][0]["metrics"]  # the T/2 branch
    assert t2["steps"] == t2_ordinary["steps"] and t2["ppl"] == pytest.approx(t2_ordinary["ppl"], rel=rel)


@pytest.fixture(scope="module")
def ordinary(tmp_path_factory) -> dict[str, dict]:
    root = tmp_path_factory.mktemp("ordinary")
    return {p: _train(root / p, "--train.precision", p) for p in ("32-true", "bf16-mixed")}


@pytest.mark.slow
@pytest.mark.parametrize("precision", ["32-true", "bf16-mixed"])
def test_the_replayed_step_equals_the_ordinary_one_over_50_steps_and_the_t2_branch(ordinary, tmp_path, precision):
    replayed = _train(tmp_path / "replayed", "--train.precision", precision, "--train.replay_step", "true")
    assert replayed["metrics"]["path"]["replay_step"] == "eager"  # on a CPU: the same step, no graph
    # Capturable Adam computes its bias correction in float32 on the device, where the ordinary one uses Python's
    # doubles: its updates differ in the last bit (2e-7 of a weight). In fp32 that stays below 1e-5 over 50 steps; bf16
    # autocast rounds activations to 8 bits of mantissa (4e-3), where a last-bit difference in a weight can flip a
    # rounding: 1.2e-4 in the dev perplexity, measured.
    _same(replayed, ordinary[precision], rel=1e-3 if precision == "bf16-mixed" else 1e-5)


@pytest.mark.slow
def test_a_replayed_run_stopped_at_step_30_and_resumed_equals_the_ordinary_run(ordinary, tmp_path, monkeypatch):
    step = TranslationModule.training_step

    def stop_at_30(self, batch, batch_idx):
        out = step(self, batch, batch_idx)
        if self.global_step == 30:  # the stop is read at the end of this step: last.ckpt at step 30
            interrupt.request("the test")
        return out

    out = tmp_path / "run"
    with monkeypatch.context() as patch:
        patch.setattr(TranslationModule, "training_step", stop_at_30)
        code = main(["train", "--preset", "smoke", *STEPS, "--tracking.log_every", "5", "--out", str(out),
                     "--train.replay_step", "true"])  # fmt: skip
    assert code == 130
    interrupt._requested.clear()
    saved = torch.load(out / "checkpoints" / "last.ckpt", map_location="cpu", weights_only=False)
    assert saved["global_step"] == 30
    resumed = _train(out, "--train.replay_step", "true", "--resume")
    assert resumed["metrics"]["resumed_at_steps"] == [30]
    _same(resumed, ordinary["32-true"], rel=1e-5)


def test_the_replayed_step_refuses_what_it_cannot_record(tmp_path, capsys):
    code = main(["train", "--preset", "smoke", "--train.replay_step", "true", "--train.compile", "true",
                 "--out", str(tmp_path)])  # fmt: skip
    assert code == 2
    assert "train.replay_step: records the eager step itself" in capsys.readouterr().err


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_on_a_card_the_step_is_recorded_once_per_shape_and_replayed(tmp_path):
    result = _train(tmp_path / "card", "--train.replay_step", "true", "--data.buckets", "4")
    assert result["metrics"]["path"]["replay_step"] == "graphs"
    assert result["metrics"]["ppl"] < 1000
