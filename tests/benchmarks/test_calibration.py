"""The calibration grids of benchmarks/calibration/ (docs/method/presets.md): each trains its study's base (a study file
cannot include another, so the base is copied, and a copy drifts), its `base` row is the preset's own recipe, and
the recipe a study names for that base is a point of the grid that chose it."""

from __future__ import annotations

from pathlib import Path

import pytest
from ablate.ablations.study.definition import PRESET_RECIPE, load_study

GRIDS = Path(__file__).resolve().parents[2] / "benchmarks" / "calibration"
RECIPE = ("warmup_steps", "lr_factor")


def _without(config: dict, section: str, keys: tuple[str, ...]) -> dict:
    return {k: v for k, v in config[section].items() if k not in keys}


@pytest.mark.parametrize(
    ("grid", "study", "row"),
    [("modern-base-tiny.yaml", "modern", "base"), ("paper-base-tiny.yaml", "table3", "base"),
     ("paper-base-tiny.yaml", "modern", "paper")],
)  # fmt: skip
def test_a_calibration_grid_trains_its_study_s_base_under_the_recipes_of_the_grid(grid, study, row):
    calibration, target = load_study(GRIDS / grid), load_study(study)
    preset = load_study("table3").run_config("base", "tiny").train
    ours, theirs = calibration.run_config("base", "tiny").to_dict(), target.run_config(row, "tiny").to_dict()
    assert ours["model"] == theirs["model"] and ours["data"] == theirs["data"]
    assert _without(ours, "train", RECIPE) == _without(theirs, "train", RECIPE)
    assert (ours["train"]["warmup_steps"], ours["train"]["lr_factor"]) == (preset.warmup_steps, preset.lr_factor)
    # Every other grid row is the same base under one recipe of the grid, and differs in nothing else.
    points = set()
    for other in calibration.rows[1:]:
        config = calibration.run_config(other, "tiny").to_dict()
        assert config["model"] == ours["model"] and _without(config, "train", RECIPE) == _without(ours, "train", RECIPE)
        points.add(tuple(config["train"][k] for k in RECIPE))
    # The recipe the study trains this base with at tiny is the preset's or a point of this grid.
    chosen = tuple(theirs["train"][k] for k in RECIPE)
    assert chosen in points | {(preset.warmup_steps, preset.lr_factor)}
    if target.recipe_of(target.row(row)) != PRESET_RECIPE:
        assert chosen in points


def test_the_modern_study_trains_each_base_on_its_own_recipe_and_every_row_on_its_base_s():
    study = load_study("modern")
    modern = study.run_config("base", "tiny").train
    paper = study.run_config("paper", "tiny").train
    assert (modern.lr_factor, paper.lr_factor) == (3.0, 1.0)  # docs/method/presets.md's choice, and the preset's
    for row in study.rows:
        base = "paper" if row.group in ("paper", "M") else "base"
        assert study.recipe_of(row) == study.recipe_of(study.row(base)), row.name
    # Presets the recipe does not name train the modern base with their own recipe.
    assert study.run_config("base", "small").train.lr_factor == study.run_config("paper", "small").train.lr_factor
