"""W&B mode resolution (the environment wins), a disabled run that writes nothing, and atomic local records."""

from __future__ import annotations

import json

import pytest

from ablations.config import TrackingConfig, build_run_config
from ablations.ledger import write_json_atomic
from ablations.tracking import wandb_mode


@pytest.mark.parametrize(
    ("env", "cfg_mode", "expected"),
    [
        ({}, None, "offline"),  # no account: offline, never a failing login
        ({"WANDB_API_KEY": "x" * 40}, None, "online"),
        ({"WANDB_API_KEY": "x" * 40, "WANDB_MODE": "offline"}, None, "offline"),
        ({"WANDB_MODE": "disabled"}, "offline", "disabled"),  # the environment beats the config
        ({"WANDB_MODE": "dryrun"}, None, "offline"),
        ({}, "online", "online"),
    ],
)
def test_wandb_mode_lets_the_environment_win(monkeypatch, env, cfg_mode, expected):
    for var in ("WANDB_MODE", "WANDB_API_KEY"):
        monkeypatch.delenv(var, raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    assert wandb_mode(TrackingConfig(mode=cfg_mode)) == expected


def tiny_run(tmp_path, **tracking):
    return build_run_config(
        {
            "model": {"n_layers": 1, "d_model": 16, "d_ff": 32, "n_heads": 2},
            "train": {"max_steps": 6, "warmup_steps": 2, "val_every": 3, "val_max_sentences": 5, "beam_size": 2},
            "data": {
                "vocab_size": 200,
                "tokens_per_batch": 512,
                "max_len": 40,
                "builtin_train": 300,
                "builtin_valid": 10,
                "builtin_test": 10,
                "builtin_lexicon": 0.05,
                "builtin_max_words": 12,
                "cache_dir": str(tmp_path / "cache"),
            },
            "hardware": {"accelerator": "cpu"},
            "tracking": {"progress": False, "log_every": 1, **tracking},
        }
    )


def test_disabled_wandb_trains_and_writes_no_run(tmp_path, monkeypatch):
    from ablations.train import train

    monkeypatch.setenv("WANDB_MODE", "disabled")
    result = train(tiny_run(tmp_path), tmp_path / "run", name="r")
    assert result is not None and result.metrics["steps"] == 6
    assert [p["step"] for p in result.curves["val"]] == [3, 6]
    assert not list((tmp_path / "run").glob("wandb/offline-run-*"))
    assert result.wandb == {}
    assert len(result.hypotheses) == len(result.references) == 10


def test_offline_wandb_run_holds_config_and_metrics(tmp_path, monkeypatch):
    from ablations.train import train
    from reports.wandb_log import read_offline_run

    monkeypatch.delenv("WANDB_MODE", raising=False)
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    result = train(tiny_run(tmp_path), tmp_path / "run", name="B1", group="mine", extra_config={"row": "B1"})
    run_dirs = list((tmp_path / "run").glob("wandb/offline-run-*"))
    assert len(run_dirs) == 1 and result.wandb["run_id"] in run_dirs[0].name
    import wandb

    wandb.teardown()  # flush the offline log of this process before reading it
    run = read_offline_run(run_dirs[0])
    assert run["config"]["model"]["d_model"] == 16 and run["config"]["row"] == "B1"
    steps = [h for h in run["history"] if "train/loss" in h]
    assert len(steps) >= 5
    assert any("val/ppl" in h for h in run["history"])
    assert run["summary"]["final/params"] == result.metrics["params"]


def test_atomic_json_keeps_the_old_file_when_writing_fails(tmp_path):
    path = tmp_path / "records" / "r.json"
    write_json_atomic(path, {"state": "complete"})
    circular: list = []
    circular.append(circular)  # json.dump fails half-way through this one
    with pytest.raises(ValueError, match="Circular"):
        write_json_atomic(path, {"state": "failed", "loop": circular})
    assert json.loads(path.read_text()) == {"state": "complete"}
    assert [p.name for p in path.parent.iterdir()] == ["r.json"]
