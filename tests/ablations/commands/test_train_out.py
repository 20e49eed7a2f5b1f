"""`ablate train --out` over a finished run (issue 72): it replaced that run's model.pt and result.json, even for
another row. Now it refuses in one line saying what is there, unless --replace (or --resume) says to go on."""

from __future__ import annotations

import json

import pytest
from ablate.ablations.cli import main as ablate


def _finished(out):
    out.mkdir(parents=True)
    (out / "result.json").write_text(json.dumps({"metrics": {"bleu": 23.456, "steps": 400}}))
    (out / "model.pt").write_bytes(b"weights")


def test_a_finished_run_is_not_trained_over(tmp_path, capsys):
    out = tmp_path / "run"
    _finished(out)
    assert ablate(["train", "--preset", "smoke", "--row", "B1", "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert f"{out} holds a finished run (result.json after 400 steps, dev BLEU 23.46)" in err and "--replace" in err
    assert (out / "model.pt").read_bytes() == b"weights" and not (out / "config.yaml").exists()


@pytest.mark.slow
def test_replace_trains_over_it(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("WANDB_MODE", "disabled")
    out = tmp_path / "run"
    _finished(out)
    argv = ["train", "--preset", "smoke", "--out", str(out), "--train.max_steps", "2", "--replace"]
    assert ablate(argv) == 0, capsys.readouterr().err
    assert json.loads((out / "result.json").read_text())["metrics"]["steps"] == 2
    assert (out / "model.pt").read_bytes() != b"weights"
