"""Studies are data: Table 3 matches the paper at every preset, every row builds and trains, bad YAML is named."""

from __future__ import annotations

import csv
import math
from pathlib import Path

import pytest
import torch
from ablate.ablations.study.config import build_run_config
from ablate.ablations.study.definition import builtin_studies, load_study
from ablate.ablations.study.presets import PRESETS
from ablate.data.errors import AblateError, ConfigError
from ablate.lightning_modules.module import label_smoothed_nll
from ablate.lightning_modules.transformer import Transformer

PAPER_CSV = Path(__file__).parents[1] / "paper_table3.csv"  # an independent transcription of the paper's Table 3
TABLE3 = load_study("table3")
ROWS = [r.name for r in TABLE3.rows]


def paper_rows() -> dict[str, dict[str, str]]:
    lines = [line for line in PAPER_CSV.read_text(encoding="utf-8").splitlines() if not line.startswith("#")]
    return {r["row"]: r for r in csv.DictReader(lines)}


@pytest.mark.parametrize("row", [r for r in ROWS if r != "F1"])
def test_table3_rows_have_the_papers_values_at_the_paper_preset(row):
    paper, base = paper_rows()[row], paper_rows()["base"]
    cfg = TABLE3.run_config(row, "paper")
    model = cfg.model

    def expect(col: str) -> str:
        return paper[col] or base[col]

    assert model.n_layers == int(expect("N"))
    assert model.d_model == int(expect("d_model"))
    assert model.d_ff == int(expect("d_ff"))
    assert model.n_heads == int(expect("h"))
    assert model.head_dim_k == int(expect("d_k"))
    assert model.head_dim_v == int(expect("d_v"))
    assert model.p_drop == pytest.approx(float(expect("P_drop")))
    assert model.label_smoothing == pytest.approx(float(expect("eps_ls")))
    assert model.positions == expect("positions")
    assert cfg.train.max_steps == int(expect("train_steps"))
    study_row = TABLE3.row(row)
    assert study_row.paper["bleu"] == pytest.approx(float(paper["BLEU_dev"]))
    assert study_row.paper["ppl"] == pytest.approx(float(paper["PPL_dev"]))


@pytest.mark.parametrize("preset", ["tiny", "smoke"])
def test_scaled_presets_keep_the_papers_relations(preset):
    cfg = {r: TABLE3.run_config(r, preset).model for r in ROWS}
    base = cfg["base"]
    for r in ("A1", "A2", "A3", "A4"):  # h * d_k = d_model
        assert cfg[r].n_heads * cfg[r].head_dim_k == base.d_model
        assert cfg[r].n_heads * cfg[r].head_dim_v == base.d_model
    assert cfg["B1"].head_dim_k * 4 == base.head_dim_k and cfg["B2"].head_dim_k * 2 == base.head_dim_k
    assert cfg["B1"].head_dim_v == base.head_dim_v
    assert [cfg[r].n_layers * 3 for r in ("C1", "C2", "C3")] == [base.n_layers, 2 * base.n_layers, 4 * base.n_layers]
    assert cfg["C4"].d_model * 2 == base.d_model and cfg["C5"].d_model == 2 * base.d_model
    assert cfg["C6"].d_ff * 2 == base.d_ff and cfg["C7"].d_ff == 2 * base.d_ff
    big, base_steps = cfg["big"], TABLE3.run_config("base", preset).train.max_steps
    assert (big.d_model, big.d_ff, big.n_heads) == (2 * base.d_model, 2 * base.d_ff, 2 * base.n_heads)
    assert big.p_drop == 0.3 and TABLE3.run_config("big", preset).train.max_steps == 3 * base_steps
    assert cfg["F1"].norm == "pre" and cfg["E1"].positions == "learned"


@pytest.mark.parametrize("preset", list(PRESETS))
@pytest.mark.parametrize("row", ROWS)
def test_every_row_of_every_preset_builds_and_trains(row, preset):
    """Forward and backward on a short batch at the row's real shape and vocabulary."""
    torch.manual_seed(0)
    model_cfg = TABLE3.run_config(row, preset).model
    model = Transformer(model_cfg)
    src = torch.randint(4, model_cfg.vocab_size, (2, 5))
    tgt = torch.randint(4, model_cfg.vocab_size, (2, 4))
    logits = model(src, tgt[:, :-1])
    loss, _ = label_smoothed_nll(logits.flatten(0, 1), tgt[:, 1:].flatten(), model_cfg.label_smoothing, 0)
    loss.mean().backward()
    assert math.isfinite(loss.mean().item())
    grads = [p.grad for p in model.parameters() if p.requires_grad]
    assert all(g is not None for g in grads[:-1])


def test_paper_parameter_counts_differ_from_the_paper_by_the_vocabulary_only():
    """At vocab 37000 each row is ~3.9k x d_model below the paper; at 41000 every row but big is within rounding."""
    from ablate.ablations.commands.params import parameter_table

    rows = parameter_table("table3", "paper", 41000)
    off = {r["row"]: abs(r["params"] / 1e6 - r["paper_params_m"]) for r in rows if r["paper_params_m"]}
    assert all(v <= 0.5 for k, v in off.items() if k != "big"), off
    base = next(r for r in rows if r["row"] == "base")["params"]
    b1 = next(r for r in rows if r["row"] == "B1")["params"]
    assert base - b1 == 6 * 3 * 2 * 512 * (512 - 128) + 6 * 3 * 2 * (512 - 128)  # W_Q, W_K (+ biases) in 18 attentions


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "study.yaml"
    path.write_text(text, encoding="utf-8")
    return path


GOOD = """
name: mine
preset: smoke
scale: none
rows:
  - {name: base, group: base}
  - {name: wide, group: W, model: {d_ff: 256}}
"""


def test_study_base_overrides_the_preset(tmp_path):
    study = load_study(
        write(tmp_path, GOOD.replace("rows:", "base: {data: {vocab_size: 300}, model: {d_ff: 64}}\nrows:"))
    )
    base, wide = study.run_config("base", "smoke"), study.run_config("wide", "smoke")
    assert base.data.vocab_size == 300 and base.model.vocab_size == 300 and base.model.d_ff == 64
    assert wide.model.d_ff == 256  # the row wins over the study's base


def test_user_study_loads_and_overrides_apply(tmp_path):
    study = load_study(write(tmp_path, GOOD))
    assert [r.name for r in study.rows] == ["base", "wide"]
    assert study.run_config("wide", "smoke").model.d_ff == 256
    base = study.run_config("base", "smoke")
    assert base.model.d_ff == 128 and base.model.d_model == 32  # the preset supplies the base at its size
    assert base.train.max_steps == 60 and base.data.vocab_size == 500


RECIPES = (
    GOOD.replace(
        "{name: wide, group: W, model: {d_ff: 256}}",
        """{name: wide, group: W, model: {d_ff: 256}}
  - {name: faster, group: W, train: {lr_factor: 2.0}}
  - {name: paper, group: P, recipe: preset}""",
    )
    + """recipes:
  modern: {smoke: {train: {warmup_steps: 7, lr_factor: 0.5}}}
recipe: modern
"""
)


def test_each_row_trains_with_its_bases_recipe_at_the_presets_it_names(tmp_path):
    """A study of two bases: rows without a recipe take the study's (`recipe: modern`), the paper row the preset's
    own; a recipe applies at the presets it names, between the study's base and the row (the row wins)."""
    study = load_study(write(tmp_path, RECIPES))
    smoke = {name: study.run_config(name, "smoke").train for name in ("base", "wide", "faster", "paper")}
    assert (smoke["base"].warmup_steps, smoke["base"].lr_factor) == (7, 0.5)
    assert (smoke["wide"].warmup_steps, smoke["wide"].lr_factor) == (7, 0.5)
    assert (smoke["faster"].warmup_steps, smoke["faster"].lr_factor) == (7, 2.0)  # the row's own value wins
    preset = PRESETS["smoke"].train
    assert (smoke["paper"].warmup_steps, smoke["paper"].lr_factor) == (preset["warmup_steps"], preset["lr_factor"])
    tiny = study.run_config("base", "tiny").train  # the recipe names no tiny: the preset's own settings
    assert (tiny.warmup_steps, tiny.lr_factor) == (
        PRESETS["tiny"].train["warmup_steps"],
        PRESETS["tiny"].train["lr_factor"],
    )


def test_a_report_of_two_recipes_says_which_rows_take_which():
    from ablate.ablations.results.load import recipes_note

    rows = [
        {"name": "base", "recipe": "modern"},
        {"name": "A1", "recipe": "modern"},
        {"name": "paper", "recipe": "preset"},
    ]
    note = recipes_note({"rows": rows})
    assert note is not None and "2 recipes" in note and "modern: base, A1; preset: paper" in note
    assert recipes_note({"rows": rows[:2]}) is None and recipes_note({"rows": [{"name": "base"}]}) is None


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (GOOD.replace("d_ff: 256", "d_fff: 256"), "row 'wide': unknown field model.d_fff"),
        (GOOD.replace("d_ff: 256", "d_ff: -3"), "row 'wide': model.d_ff: must be a positive integer"),
        (GOOD.replace("d_ff: 256", "norm: sandwich"), "row 'wide': model.norm: must be one of 'post', 'pre'"),
        (GOOD.replace("name: wide", "name: base"), "row 'base': duplicate row name"),
        (GOOD.replace("group: W,", "group: W, colour: red,"), "row 'wide': unknown field 'colour'"),
        (GOOD + "seeds: 0\n", "seeds must be a positive integer"),
        (GOOD.replace("preset: smoke", "preset: huge"), "unknown preset 'huge'"),
        ("rows: [\n", "not valid YAML"),
        (GOOD.replace("group: W,", "group: W, recipe: tuned,"), "row 'wide': recipe 'tuned' is not in recipes"),
        (GOOD + "recipes: {tuned: {huge: {train: {warmup_steps: 5}}}}\n", "recipes.tuned: unknown preset 'huge'"),
        (GOOD + "recipes: {preset: {smoke: {}}}\n", "recipes.preset: 'preset' names the preset's own settings"),
        (GOOD + "recipes: {tuned: {smoke: {train: {warmup: 5}}}}\n", "unknown field train.warmup"),
        (  # a paper-unit value the preset cannot scale to a whole number: the row, not only the field
            GOOD.replace("scale: none", "scale: paper").replace("d_ff: 256", "d_k: 12"),
            "row 'wide': preset 'smoke' scales model.d_k=12 to",
        ),
    ],
)
def test_bad_study_files_are_named_in_one_line(tmp_path, text, message):
    path = write(tmp_path, text)
    with pytest.raises(AblateError) as err:
        load_study(path)
    assert message in str(err.value)
    assert str(path) in str(err.value)
    assert "\n" not in str(err.value)


def test_unknown_study_lists_the_builtin_ones():
    with pytest.raises(AblateError, match="table3"):
        load_study("table4")


def test_build_run_config_checks_types_and_ties_the_vocabulary():
    run = build_run_config({"data": {"vocab_size": 1234}, "train": {"adam_betas": [0.9, 0.99]}})
    assert run.model.vocab_size == 1234 and run.train.adam_betas == (0.9, 0.99)
    with pytest.raises(ConfigError, match="train.max_steps: must be an integer"):
        build_run_config({"train": {"max_steps": "many"}})
    with pytest.raises(ConfigError, match="unknown field model.heads"):
        build_run_config({"model": {"heads": 4}})


@pytest.mark.parametrize("name", builtin_studies())
def test_every_builtin_study_validates_at_every_preset_with_its_claims(name):
    assert name in builtin_studies() and {"table3", "modern"} <= set(builtin_studies())
    study = load_study(name)  # every row built at every preset, the claims checked against the rows
    assert study.claims and all(study.row(c.row) for claim in study.claims for c in claim.compare)
