"""`ablate tune`: a search space written in the paper's units follows the preset, the objective is the study's
(BLEU, PPL or both) and a diverged trial is never the one picked. The end-to-end test runs the real command (TPE on
a journal storage, Lightning on the CPU, W&B offline) on tests/ablations/studies/tune_rows.yaml."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from ablate.ablations.study.definition import load_study
from ablate.ablations.sweep.tune import pick_best, search_space

REPO = Path(__file__).resolve().parents[3]
STUDY = Path(__file__).resolve().parents[1] / "studies" / "tune_rows.yaml"


def dims(study: str, preset: str) -> dict[str, tuple[float, float]]:
    return {d.name: (d.low, d.high) for d in search_space(load_study(study), preset)}


def test_table3_search_space_is_in_paper_units_and_follows_the_preset():
    # The paper's 4000 warmup steps and lr factor 1 are each preset's own warmup and factor: the ranges move with them.
    assert dims("table3", "paper") == {
        "train.lr_factor": (0.25, 4.0),
        "train.warmup_steps": (1000, 8000),
        "model.p_drop": (0.0, 0.4),
    }
    tiny = dims("table3", "tiny")
    assert tiny["train.warmup_steps"] == (200, 1600) and tiny["train.lr_factor"] == (0.25, 4.0)
    smoke = dims("table3", "smoke")
    assert smoke["train.warmup_steps"] == (5, 40)  # of 60 steps: never the 723-step warmup of a 60-step run
    assert smoke["train.lr_factor"] == pytest.approx((0.025, 0.4))
    assert smoke["model.p_drop"] == (0.0, 0.4)  # not a size or a preset's setting: as written
    for preset in ("paper", "tiny", "smoke"):
        steps = load_study("table3").run_config("base", preset).train.max_steps
        assert dims("table3", preset)["train.warmup_steps"][1] < steps


def test_a_study_written_as_is_keeps_its_ranges():
    study = load_study(str(STUDY))
    assert search_space(study, "smoke") == study.search_space


def frozen(number: int, values: list[float] | None, state: str = "COMPLETE"):
    from optuna.trial import FrozenTrial, TrialState

    return FrozenTrial(
        number=number,
        state=TrialState[state],
        value=None,
        values=values,
        datetime_start=None,
        datetime_complete=None,
        params={},
        distributions={},
        user_attrs={},
        system_attrs={},
        intermediate_values={},
        trial_id=number,
    )


def test_pick_best_by_one_objective_or_the_compromise_of_both():
    # The case: trial 0 wins BLEU by a hair (0.0135) with PPL 397; trial 1 has PPL 196 and BLEU 0.010.
    trials = [frozen(0, [0.0135, 397.0]), frozen(1, [0.010, 196.0]), frozen(2, [0.009, 210.0]), frozen(3, None, "FAIL")]
    assert pick_best(trials, ("bleu", "ppl")).number == 1
    assert (
        pick_best(
            [frozen(t.number, t.values[:1] if t.values else None, t.state.name) for t in trials], ("bleu",)
        ).number
        == 0
    )
    assert (
        pick_best([frozen(t.number, t.values[1:] if t.values else None, t.state.name) for t in trials], ("ppl",)).number
        == 1
    )
    assert pick_best([frozen(0, None, "FAIL"), frozen(1, None, "PRUNED")], ("bleu",)) is None
    # Within 10% of the best PPL, BLEU decides.
    assert (
        pick_best([frozen(0, [20.0, 5.0]), frozen(1, [22.0, 5.4]), frozen(2, [30.0, 6.0])], ("bleu", "ppl")).number == 1
    )


@pytest.mark.slow
def test_tune_runs_both_objectives_and_never_picks_a_diverged_trial(tmp_path):
    import optuna
    from ablate.ablations.results.storage.opening import open_existing

    out = tmp_path / "tune"
    env = {**os.environ, "WANDB_MODE": "offline", "WANDB_SILENT": "true", "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "ablate.ablations.cli", "tune", str(STUDY), "--trials", "4", "--out", str(out)]
    done = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "objective both" in done.stderr and "train.lr_factor [1e+30, 0.5]" in done.stderr

    study = optuna.load_study(
        study_name="tune-rows-smoke-tune-base", storage=open_existing("journal:optuna.journal", out)
    )
    assert study.metric_names == ["dev BLEU", "dev PPL"]
    trials = study.get_trials(deepcopy=False)
    diverged = [t for t in trials if t.params["train.lr_factor"] == 1.0e30]
    healthy = [t for t in trials if t.params["train.lr_factor"] == 0.5]
    assert diverged and healthy, "the seeded sampler drew both learning-rate choices"
    assert all(t.state.name == "FAIL" for t in diverged)
    assert all(t.state.name == "COMPLETE" and len(t.values) == 2 for t in healthy)
    assert all(t.values == [t.user_attrs["bleu"], t.user_attrs["ppl"]] for t in healthy)
    results = [json.loads(p.read_text()) for p in out.glob("trials/*/result.json")]
    assert len(results) >= len(healthy)
    assert not any(
        "test_bleu" in r["metrics"] for r in results
    )  # a search chooses on dev: the test split is left alone

    best = json.loads((out / "best.json").read_text(encoding="utf-8"))
    assert best["objective"] == "both" and best["failed"] == len(diverged)
    assert best["best"] in {t.number for t in healthy}
    best_yaml = (out / "best.yaml").read_text(encoding="utf-8")
    assert yaml.safe_load(best_yaml)["train"]["lr_factor"] == 0.5
    recipe = next(line for line in best_yaml.splitlines() if line.startswith("#   recipes: "))  # as a base's recipe
    assert yaml.safe_load(recipe.removeprefix("#   "))["recipes"]["NAME"]["smoke"] == yaml.safe_load(best_yaml)
    assert f"trial {best['best']}" in done.stdout

    # Each trial is a W&B run of its own job type, grouped with the other trials of this search.
    from ablate.reports.wandb_log import read_offline_run

    (run_dir,) = (out / "trials" / f"trial{healthy[0].number:04d}" / "wandb").glob("offline-run-*")
    run = read_offline_run(run_dir)["run"]
    assert (run["job_type"], run["group"]) == ("tune", "tune-rows-smoke-tune-base")

    # The search continues with the objective it began with, and refuses another in one line.
    other = subprocess.run(
        [*cmd, "--objective", "bleu"], cwd=REPO, env=env, capture_output=True, text=True, check=False
    )
    assert other.returncode == 2 and "--objective both" in other.stderr and "Traceback" not in other.stderr


@pytest.mark.slow
def test_a_search_begun_by_an_older_ablate_continues_on_its_bleu_objective(tmp_path):
    """Before objectives were named, tune made one unnamed maximised (BLEU) objective. Resuming it with the study's
    `both` is refused in one line that says how to continue; `--objective bleu` continues it."""
    import optuna
    from ablate.ablations.results.storage.opening import open_storage

    out = tmp_path / "tune"
    out.mkdir()
    old = optuna.create_study(  # as the previous ablate tune made it
        study_name="tune-rows-smoke-tune-base",
        storage=open_storage(f"journal:{out / 'optuna.journal'}"),
        direction="maximize",
    )
    assert old.metric_names is None and len(old.directions) == 1
    env = {**os.environ, "WANDB_MODE": "offline", "WANDB_SILENT": "true", "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "ablate.ablations.cli", "tune", str(STUDY), "--trials", "1", "--out", str(out)]

    refused = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    (line,) = [ln for ln in refused.stderr.splitlines() if "error" in ln]
    assert "optimises dev BLEU, not dev BLEU and dev PPL" in line and "--objective bleu" in line

    resumed = subprocess.run(
        [*cmd, "--objective", "bleu"], cwd=REPO, env=env, capture_output=True, text=True, timeout=300, check=False
    )
    assert resumed.returncode in (0, 1), resumed.stderr[-2000:]  # 1: its one trial drew the diverging rate
    trials = optuna.load_study(
        study_name="tune-rows-smoke-tune-base", storage=open_storage(f"journal:{out / 'optuna.journal'}")
    ).trials
    assert len(trials) == 1 and trials[0].state.name in ("COMPLETE", "FAIL")
    if trials[0].state.name == "COMPLETE":
        assert trials[0].values == [trials[0].user_attrs["bleu"]]
