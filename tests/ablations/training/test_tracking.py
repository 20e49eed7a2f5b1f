"""W&B: mode resolution (the environment wins), a disabled run that writes nothing, and what a sweep's runs say,
read back from their offline logs: names (row and seed), one group per study + preset + label shared with the report
run, job types, config keys, and steps equal to the records' (optimizer steps done). Also atomic local records."""

from __future__ import annotations

import json
import runpy
from pathlib import Path

import pytest
from ablate.ablations.study.config import TrackingConfig, build_run_config
from ablate.ablations.tracking import run_group, run_name, wandb_mode
from ablate.data.atomic import write_json_atomic


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
    from ablate.ablations.training.train import train

    monkeypatch.setenv("WANDB_MODE", "disabled")
    result = train(tiny_run(tmp_path), tmp_path / "run", name="r")
    assert result is not None and result.metrics["steps"] == 6
    assert [p["step"] for p in result.curves["val"]] == [3, 6]
    assert not list((tmp_path / "run").glob("wandb/offline-run-*"))
    assert result.wandb == {}
    assert len(result.hypotheses) == len(result.references) == 10


def test_offline_wandb_run_holds_config_and_metrics(tmp_path, monkeypatch):
    from ablate.ablations.training.train import train
    from ablate.reports.wandb_log import read_offline_run

    monkeypatch.delenv("WANDB_MODE", raising=False)
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    result = train(tiny_run(tmp_path), tmp_path / "run", name="B1", group="mine", extra_config={"row": "B1"})
    run_dirs = list((tmp_path / "run").glob("wandb/offline-run-*"))
    assert len(run_dirs) == 1 and result.wandb["run_id"] in run_dirs[0].name
    import wandb

    wandb.teardown()  # flush the offline log of this process before reading it
    run = read_offline_run(run_dirs[0])
    assert run["run"]["job_type"] == "train" and (run["run"]["name"], run["run"]["group"]) == ("B1", "mine")
    assert run["config"]["model"]["d_model"] == 16 and run["config"]["row"] == "B1"
    assert logged(run, "train/loss") == points(result.curves["train"], "loss")
    assert [s for s, _ in logged(run, "train/loss")] == [1, 2, 3, 4, 5, 6]  # log_every 1: every optimizer step
    assert logged(run, "val/ppl") == points(result.curves["val"], "ppl") and result.curves["val"][0]["step"] == 3
    assert run["summary"]["final/params"] == result.metrics["params"]


def logged(run: dict, key: str) -> list[tuple[int, float]]:
    """(W&B step axis, value) of every history row of an offline run that holds `key`."""
    return [(h["trainer/global_step"], pytest.approx(h[key], rel=1e-6)) for h in run["history"] if key in h]


def points(curve: list[dict], key: str) -> list[tuple[int, float]]:
    """(step, value) of a record's curve."""
    return [(p["step"], p[key]) for p in curve]


def test_run_groups_keep_studies_presets_and_labels_apart():
    groups = {run_group("table3", p, label) for p in ("smoke", "tiny", "paper") for label in (None, "rerun2")}
    assert len(groups) == 6
    assert run_group("table3", "tiny") == "table3-tiny"
    assert run_group("table3", "tiny", "rerun2") == "table3-tiny-rerun2"
    assert run_name("B1", 0) == "B1-s0" != run_name("B1", 1)


# --------------------------------------------------------------------------------- a labelled sweep and its report
LABEL = "rerun2"
GROUP = "sweep-split-smoke-rerun2"  # study + preset + label
ROW_GROUPS = {"s1": "A", "s2": "B"}


@pytest.fixture(scope="module")
def labelled(sweeps, tmp_path_factory) -> Path:
    """sweep_split.yaml with one seed and `--tracking.label rerun2` (validating every 5 of its 10 steps, logging
    every 2), then its report logged to W&B as `ablate report OUT --wandb` does; every run offline."""
    import wandb
    from ablate.reports.build import build_report

    out = tmp_path_factory.mktemp("labelled") / "out"
    done = sweeps.run("sweep_split.yaml", out, "--seeds", "1", "--tracking.label", LABEL, "--train.val_every", "5")
    assert done.returncode == 0, done.stderr[-3000:]
    with pytest.MonkeyPatch.context() as mp:
        for name in ("WANDB_MODE", "WANDB_API_KEY", "WANDB_DIR", "WANDB_PROJECT", "WANDB_RUN_GROUP", "WANDB_JOB_TYPE"):
            mp.delenv(name, raising=False)
        mp.setenv("WANDB_CONFIG_DIR", str(out.parent / "wandb-config"))
        written = build_report(out, ["md"], wandb=True, plots=False, n_samples=100)
    wandb.teardown()  # as at process exit: W&B's service flushes the report run's log
    assert written["wandb"].parent == out / "wandb"
    return out


def _trial_runs(sweeps, out: Path) -> dict[str, tuple[dict, dict]]:
    """key -> (record, its offline W&B run read back)."""
    from ablate.reports.wandb_log import read_offline_run

    runs = {}
    for key, record in sweeps.records(out).items():
        run_dirs = sweeps.wandb_runs(out / "trials" / key)
        assert len(run_dirs) == 1 and Path(record["wandb"]["run_dir"]) == run_dirs[0]
        runs[key] = (record, read_offline_run(run_dirs[0]))
    return runs


@pytest.mark.slow
def test_trial_runs_say_row_and_seed_and_share_the_sweeps_group(labelled, sweeps):
    runs = _trial_runs(sweeps, labelled)
    assert sorted(runs) == ["s1__seed0", "s2__seed0"]
    for record, run in runs.values():
        row = record["row"]
        assert run["finished"] and record["state"] == "complete"
        assert run["run"]["name"] == f"{row}-s0"  # the seed is named with one seed too
        assert (run["run"]["group"], run["run"]["job_type"]) == (GROUP, "train")
        config = run["config"]
        assert {k: config[k] for k in ("study", "row", "row_group", "seed", "preset", "label")} == {
            "study": "sweep-split",
            "row": row,
            "row_group": ROW_GROUPS[row],
            "seed": 0,
            "preset": "smoke",
            "label": LABEL,
        }
        assert "group" not in config  # W&B's group is the sweep; the row's group is row_group
        assert config["tracking"]["label"] == LABEL


@pytest.mark.slow
def test_logged_steps_are_the_records_steps(labelled, sweeps):
    """W&B's step axis counts optimizer steps done, as the records do: 2, 4, ..., 10 and dev points at 5 and 10
    (Lightning's own step would say 1, 3, ..., 9 and 4, 9)."""
    for record, run in _trial_runs(sweeps, labelled).values():
        train, val = record["curves"]["train"], record["curves"]["val"]
        assert [p["step"] for p in train] == [2, 4, 6, 8, 10] and [p["step"] for p in val] == [5, 10]
        assert logged(run, "train/loss") == points(train, "loss")
        assert logged(run, "train/lr") == points(train, "lr")
        assert logged(run, "val/ppl") == points(val, "ppl")
        assert logged(run, "val/bleu") == points(val, "bleu")


@pytest.mark.slow
def test_the_report_run_joins_the_sweeps_group(labelled):
    from ablate.reports.wandb_log import read_offline_run

    (run_dir,) = sorted((labelled / "wandb").glob("offline-run-*"))
    run = read_offline_run(run_dir)
    assert run["finished"]
    assert run["run"]["group"] == GROUP and run["run"]["job_type"] == "report"
    assert run["run"]["name"] == f"report-{GROUP}"
    assert (run["config"]["study"], run["config"]["preset"], run["config"]["label"]) == ("sweep-split", "smoke", LABEL)


@pytest.mark.slow
def test_the_written_view_shows_this_sweeps_runs(labelled, sweeps):
    """The script the report wrote holds a view of this sweep's group, whose knobs are what its rows change."""
    from ablate.reports.wandb_log import build_view

    definition = runpy.run_path(str(labelled / "wandb" / "workspace_view.py"))["DEFINITION"]
    assert definition["group"] == GROUP and definition["project"] == "ablate"
    assert definition["knobs"] == ["model.d_ff"]  # s2 sets d_ff 48; nothing else differs between the rows
    spec = build_view(definition, entity="someone")._to_model().model_dump(by_alias=True, exclude_none=True)
    runset = spec["spec"]["section"]["runSets"][0]
    assert json.dumps(runset["filters"]).count(GROUP) == 1
    (knobs,) = [p for s in spec["spec"]["section"]["panelBankConfig"]["sections"] for p in s["panels"]
                if p["viewType"] == "Parallel Coordinates Plot"]  # fmt: skip
    assert [c["accessor"] for c in knobs["config"]["columns"]][0] == "config:model.value.d_ff"
    trial = _trial_runs(sweeps, labelled)["s2__seed0"][1]
    assert trial["config"]["model"]["d_ff"] == 48  # the accessor's path exists in the logged config


def test_atomic_json_keeps_the_old_file_when_writing_fails(tmp_path):
    path = tmp_path / "records" / "r.json"
    write_json_atomic(path, {"state": "complete"})
    circular: list = []
    circular.append(circular)  # json.dump fails half-way through this one
    with pytest.raises(ValueError, match="Circular"):
        write_json_atomic(path, {"state": "failed", "loop": circular})
    assert json.loads(path.read_text()) == {"state": "complete"}
    assert [p.name for p in path.parent.iterdir()] == ["r.json"]
