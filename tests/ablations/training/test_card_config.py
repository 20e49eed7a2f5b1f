"""The card's configuration on the CPU: every `auto` resolved as a card would (ABLATE_CARD=all: bf16 autocast, the
reference kernels, static decoding, the loss watch on the device, the padding mask always passed), with the paper
preset's card settings (fixed batch shapes, the fused loss), through `ablate train`, `translate`, `bench` and a
sweep to its report; the training step trapped for every read from the device; and the check before step 1."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from ablate.ablations.cli import main

REPO = Path(__file__).resolve().parents[3]
CARD_ARGS = ("--data.buckets", "8", "--train.fused_loss", "true")
"""What the paper preset (the card's) turns on besides the `auto`s: fixed batch shapes and the fused loss."""
QUICK = ("--train.max_steps", "12", "--train.val_every", "6", "--train.budgets", "[]", "--train.test_eval", "false")


def _env(**extra: str) -> dict[str, str]:
    return {**os.environ, "WANDB_MODE": "offline", "WANDB_SILENT": "true", "OMP_NUM_THREADS": "1", **extra}


def ablate(*args: str, card: bool = True, timeout: float = 600) -> subprocess.CompletedProcess:
    env = _env(ABLATE_CARD="all") if card else _env()
    cli = [sys.executable, "-m", "ablate.ablations.cli", *args]
    return subprocess.run(cli, capture_output=True, text=True, env=env, cwd=REPO, timeout=timeout, check=False)


@pytest.fixture(scope="module")
def card_run(tmp_path_factory) -> Path:
    """`ablate train --preset smoke` on the card's path, whole: both budgets, the test decoding, the final weights."""
    out = tmp_path_factory.mktemp("card") / "run"
    done = ablate("train", "--preset", "smoke", *CARD_ARGS, "--out", str(out))
    assert done.returncode == 0, done.stderr[-3000:]
    return out


@pytest.mark.slow
def test_ablate_train_on_the_cards_path_finishes_and_says_which_path_it_took(card_run):
    result = json.loads((card_run / "result.json").read_text())
    path = result["metrics"]["path"]
    assert path == {
        "decoding": "static",
        "kernels": "reference",
        "compile": None,
        "cuda_graphs": False,
        "replay_step": None,
        "precision": "bf16-mixed",
        "torch": torch.__version__,
        "card": "all",
    }
    assert result["metrics"]["bleu"] is not None and result["metrics"]["test_bleu"] is not None
    assert result["budgets"], "the T/2 branch was scored on the card's path too"


@pytest.mark.slow
def test_translate_decodes_on_the_cards_path(card_run, tmp_path):
    source = tmp_path / "src.txt"
    source.write_text("the house is small\nthe cat sleeps on the mat\n")
    done = ablate("translate", str(card_run), "--input", str(source))
    assert done.returncode == 0, done.stderr[-2000:]
    assert len(done.stdout.splitlines()) == 2


@pytest.mark.slow
def test_bench_on_the_cards_path_writes_its_figures(tmp_path):
    args = ("--preset", "smoke", "--vs", "none", "--overhead", "false", "--lightning", "false", "--repeats", "2")
    done = ablate("bench", *args, "--warmup", "1", "--decode_repeats", "1", "--json")
    assert done.returncode == 0, done.stderr[-3000:]
    figures = json.loads(done.stdout)
    assert figures["config"]["precision"] == "bf16-mixed", figures["config"]
    assert "ours_beam_static" in json.dumps(figures["decoding"])


@pytest.mark.slow
def test_a_tiny_trials_first_validation_on_the_cards_path(tmp_path):
    """The tiny preset (the default study's) to its first validation, the whole dev loss and a decode, as a card's
    first trial would run it at step 400."""
    limit = ("--train.val_max_sentences", "64", "--train.final_full_validation", "false")
    done = ablate("train", "--preset", "tiny", *QUICK[:2], "--train.val_every", "12", *QUICK[4:], *limit,
                  "--out", str(tmp_path / "tiny"))  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    metrics = json.loads((tmp_path / "tiny" / "result.json").read_text())["metrics"]
    assert metrics["path"]["decoding"] == "static" and metrics["bleu_sentences"] == 64


@pytest.mark.slow
def test_a_smoke_sweep_on_the_cards_path_reaches_its_report(tmp_path):
    out = tmp_path / "sweep"
    done = ablate("sweep", "table3", "--preset", "smoke", "--rows", "base,B1", "--seeds", "1", "--workers", "1",
                  "--out", str(out), *CARD_ARGS, timeout=900)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert list((out / "report").glob("*.md")), sorted(p.name for p in out.iterdir())
    records = [json.loads(p.read_text()) for p in sorted((out / "records").rglob("*.json"))]
    paths = [r["metrics"]["path"] for r in records if r.get("metrics", {}).get("path")]
    assert len(paths) == 2 and all(p["decoding"] == "static" and p["precision"] == "bf16-mixed" for p in paths)


# -------------------------------------------------------------------------------- no host sync in the step
READS = ("item", "tolist", "__bool__", "__float__", "__int__", "cpu", "numpy")


def test_the_training_step_on_the_cards_path_reads_nothing_from_the_device(monkeypatch, tmp_path):
    """Inside `training_step` every read of a tensor into Python, and every tensor made from a Python number (a
    host-to-device copy on a card), is counted with its step. On the card's path the only reads are the loss
    watch's, at its first step; from step 1 on, nothing. (Before this issue: the loss was read every step, the
    padding mask was checked with bool(), and the learning rate and step were logged as Python floats.)"""
    from ablate.lightning_modules.module import TranslationModule

    monkeypatch.setenv("ABLATE_CARD", "all")
    monkeypatch.setenv("WANDB_MODE", "offline")
    seen: list[tuple[int, str]] = []
    state = {"step": None}

    def trap(name, original):
        def read(self, *args, **kwargs):
            if state["step"] is not None:
                seen.append((state["step"], name))
            return original(self, *args, **kwargs)

        return read

    for name in READS:
        monkeypatch.setattr(torch.Tensor, name, trap(name, getattr(torch.Tensor, name)))
    made = torch.tensor

    def tensor(data, *args, **kwargs):
        if state["step"] is not None and isinstance(data, (int, float, bool)):
            seen.append((state["step"], "torch.tensor(number)"))
        return made(data, *args, **kwargs)

    monkeypatch.setattr(torch, "tensor", tensor)
    step = TranslationModule.training_step

    def trapped(self, batch, batch_idx):
        state["step"] = self.global_step
        try:
            return step(self, batch, batch_idx)
        finally:
            state["step"] = None

    monkeypatch.setattr(TranslationModule, "training_step", trapped)
    args = ("--preset", "smoke", *CARD_ARGS, "--train.max_steps", "8", "--train.val_every", "8")
    assert main(["train", *args, "--train.budgets", "[]", "--train.test_eval", "false", "--out", str(tmp_path)]) == 0
    assert all(at == 0 for at, _ in seen), f"reads from the device inside training steps 1-7: {seen}"
    reads = [name for _, name in seen if name != "torch.tensor(number)"]  # Lightning registers its metrics at step 0
    assert reads == ["__float__"], seen  # the loss watch's first read, and nothing else


# ---------------------------------------------------------------------------------------- before step 1
def test_a_static_cache_broken_on_purpose_stops_before_step_1_in_one_line(monkeypatch, tmp_path, capsys):
    from ablate.lightning_modules import static_decoding

    def broken(self, k, v, start):
        raise RuntimeError("planted: the static cache is broken")

    monkeypatch.setattr(static_decoding.StaticSelfAttentionCache, "append", broken)
    code = main(["train", "--preset", "smoke", "--train.decoding", "static", "--out", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == 2, err
    lines = [line for line in err.splitlines() if line.strip()]
    assert lines[-1].startswith("ablate train: error: decoding one dev batch (static beam search, beam 4")
    assert "before step 1" in lines[-1] and lines[-1].endswith("set --train.decoding dynamic")
    assert "planted: the static cache is broken" in lines[-1] and "Traceback" not in err
    assert "step 1/" not in err and "step 10/" not in err  # not one training step was taken
    assert not (tmp_path / "checkpoints" / "last.ckpt").exists() and not (tmp_path / "result.json").exists()


def test_a_largest_batch_that_does_not_fit_names_tokens_per_batch(monkeypatch, tmp_path, capsys):
    from ablate.lightning_modules.module import TranslationModule

    losses = TranslationModule._losses

    def out_of_memory(self, batch):
        if self.training:
            raise torch.OutOfMemoryError("planted: CUDA out of memory. Tried to allocate 9.00 GiB")
        return losses(self, batch)

    monkeypatch.setattr(TranslationModule, "_losses", out_of_memory)
    assert main(["train", "--preset", "smoke", "--out", str(tmp_path)]) == 2
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert last.startswith("ablate train: error: one training step of the largest batch (")
    assert last.endswith("lower --data.tokens_per_batch (train.tokens_per_update keeps the tokens an update sees)")


def test_the_check_before_step_1_leaves_a_run_to_the_same_digits(monkeypatch, tmp_path):
    """It draws no random number that training would see (dropout), steps no optimizer and keeps no gradient."""
    from ablate.lightning_modules.preflight import Preflight

    monkeypatch.setenv("WANDB_MODE", "offline")
    args = ["train", "--preset", "smoke", *QUICK]
    assert main([*args, "--out", str(tmp_path / "checked")]) == 0
    monkeypatch.setattr(Preflight, "on_train_start", lambda *a: None)
    assert main([*args, "--out", str(tmp_path / "unchecked")]) == 0
    checked, unchecked = (json.loads((tmp_path / n / "result.json").read_text()) for n in ("checked", "unchecked"))
    assert checked["curves"] == unchecked["curves"]
    assert checked["metrics"]["ppl"] == unchecked["metrics"]["ppl"]


def test_an_unexpected_error_in_train_is_one_line_and_the_saved_traceback(monkeypatch, tmp_path, capsys):
    from ablate.ablations.training import train

    def planted(*args, **kwargs):
        raise RuntimeError("planted: something nobody foresaw\nsecond line")

    monkeypatch.setattr(train, "make_trainer", planted)
    monkeypatch.delenv("ABLATE_TRACEBACK", raising=False)
    assert main(["train", "--preset", "smoke", "--out", str(tmp_path / "run")]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) >= 1 and "Traceback" not in "\n".join(err)
    head, _, saved = err[-1].partition("; traceback in ")
    assert head == "ablate train: unexpected error: RuntimeError: planted: something nobody foresaw"
    text = Path(saved).read_text()
    assert "Traceback (most recent call last)" in text and "planted" in text and "--preset smoke" in text
