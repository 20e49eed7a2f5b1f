"""One command line for every command: --config, --print_config and --SECTION.FIELD (ablations/commands/options.py).

Runs the real dispatcher in-process; nothing here trains.
"""

from __future__ import annotations

import pytest
import yaml
from ablate.ablations import cli

COMMANDS = {
    "train": ["train", "--preset", "smoke", "--row", "B1", "--model.d_ff", "96", "--train.max_steps", "7"],
    "sweep": ["sweep", "table3", "--preset", "smoke", "--seeds", "3", "--model.d_ff", "96", "--out", "elsewhere"],
    "tune": ["tune", "table3", "--row", "C1", "--trials", "4", "--train.warmup_steps", "30"],
    "report": ["report", "runs/x", "--format", "md,csv", "--no_plots"],
    "compare": ["compare", "A1", "base", "--out", "runs/x", "--samples", "50"],
    "status": ["status", "runs/x", "--watch", "5"],
    "studies": ["studies", "my.yaml"],
    "params": ["params", "table3", "--preset", "tiny", "--data.vocab_size", "2000"],
    "data": ["data", "prepare", "--data.vocab_size", "300", "--data.corpus", "gettext:de"],
    "bench": ["bench", "--row", "C1", "--repeats", "3", "--vs", "torch", "--lightning", "false"],
}


def printed(capsys, argv: list[str]) -> dict:
    assert cli.main([*argv, "--print_config"]) == 0
    return yaml.safe_load(capsys.readouterr().out)


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_command_prints_a_config_that_config_reads_back(name, tmp_path, capsys):
    first = printed(capsys, COMMANDS[name])
    saved = tmp_path / "saved.yaml"
    saved.write_text(yaml.safe_dump(first), encoding="utf-8")
    # The positional arguments and options travel in the file too: the command name alone rebuilds the command.
    assert printed(capsys, [name, "--config", str(saved)]) == first
    given = {a.lstrip("-"): b for a, b in zip(COMMANDS[name][1:], COMMANDS[name][2:], strict=False)}
    for key, value in given.items():  # every option given shows up with its value
        section, _, field = key.partition(".")
        if field and section in first:
            assert first[section][field] == yaml.safe_load(value), (key, first)
        elif key in first:
            assert first[key] == yaml.safe_load(value), (key, first)


def test_train_prints_the_resolved_row_and_reruns_it_exactly(tmp_path, capsys):
    resolved = printed(capsys, COMMANDS["train"])
    assert resolved["row"] == "B1" and resolved["model"]["d_k"] == 1  # B1: d_k 16 at the paper's size, /16 at smoke
    assert resolved["model"]["d_ff"] == 96 and resolved["train"]["max_steps"] == 7
    base = printed(capsys, ["train", "--preset", "smoke"])
    assert base["model"]["d_ff"] != 96 and base["train"]["max_steps"] != 7
    assert set(resolved["model"]) == set(base["model"])  # every field, so the file pins the run down
    saved = tmp_path / "b1.yaml"
    saved.write_text(yaml.safe_dump(resolved), encoding="utf-8")
    again = printed(capsys, ["train", "--config", str(saved), "--train.max_steps", "9"])
    assert again["train"]["max_steps"] == 9  # the command line wins over the file
    assert {k: v for k, v in again["model"].items()} == resolved["model"]


def test_a_later_seed_row_or_preset_changes_a_printed_train_config_and_keeps_its_edits(tmp_path, capsys):
    resolved = printed(capsys, COMMANDS["train"])
    saved = tmp_path / "b1.yaml"
    saved.write_text(yaml.safe_dump(resolved), encoding="utf-8")
    reseeded = printed(capsys, ["train", "--config", str(saved), "--seed", "3"])
    assert reseeded["seed"] == reseeded["train"]["seed"] == 3  # not the file's train.seed 0
    assert reseeded["out"] == "runs/train/table3-B1-smoke-s3"  # the default directory follows the seed
    assert {**reseeded, "seed": 0, "out": resolved["out"], "train": {**reseeded["train"], "seed": 0}} == resolved
    again = tmp_path / "b1-s3.yaml"
    again.write_text(yaml.safe_dump(reseeded), encoding="utf-8")
    assert printed(capsys, ["train", "--config", str(again)]) == reseeded  # the printed file reruns the seed-3 run

    # A field edited in the file wins over its row (it was written after resolution), and stays under a later
    # --preset, which changes every field the file left as the row had it at its own preset.
    edited = tmp_path / "edited.yaml"
    edited.write_text(yaml.safe_dump({**resolved, "model": {**resolved["model"], "d_k": 64}}), encoding="utf-8")
    assert printed(capsys, ["train", "--config", str(edited)])["model"]["d_k"] == 64
    tiny = printed(capsys, ["train", "--config", str(edited), "--preset", "tiny"])
    plain_tiny = printed(capsys, ["train", "--row", "B1", "--preset", "tiny"])
    assert tiny["model"] == {**plain_tiny["model"], "d_k": 64, "d_ff": 96}  # the file's edits: d_k and d_ff
    assert tiny["train"] == {**plain_tiny["train"], "max_steps": 7}
    assert tiny["data"] == plain_tiny["data"] and tiny["out"] == "runs/train/table3-B1-tiny-s0"
    row = printed(capsys, ["train", "--config", str(saved), "--row", "B2"])
    assert row["model"]["d_k"] == printed(capsys, ["train", "--row", "B2", "--preset", "smoke"])["model"]["d_k"] == 2

    # An output directory the user chose stays, whatever the seed.
    moved = tmp_path / "moved.yaml"
    moved.write_text(yaml.safe_dump({**resolved, "out": str(tmp_path / "mine")}), encoding="utf-8")
    assert printed(capsys, ["train", "--config", str(moved), "--seed", "3"])["out"] == str(tmp_path / "mine")

    # train.seed is the seed written out: set in a file it is the run's seed (and name), and a later --seed wins.
    seeded = tmp_path / "seeded.yaml"
    seeded.write_text("seed: 0\ntrain: {seed: 5}\n", encoding="utf-8")
    assert printed(capsys, ["train", "--config", str(seeded)])["seed"] == 5
    assert printed(capsys, ["train", "--config", str(seeded), "--seed", "3"])["train"]["seed"] == 3

    gone = tmp_path / "gone.yaml"  # a file whose row the study no longer has: one line naming the file and the row
    gone.write_text(yaml.safe_dump({**resolved, "row": "B9"}), encoding="utf-8")
    assert cli.main(["train", "--config", str(gone), "--row", "B1"]) == 2
    err = capsys.readouterr().err.strip()
    assert f"--config {gone}: " in err and "no row 'B9'" in err and "\n" not in err


def test_set_is_the_same_override_as_section_field(capsys):
    long = printed(capsys, ["sweep", "table3", "--preset", "smoke", "--model.d_ff", "96", "--train.lr_factor", "2"])
    short = printed(
        capsys, ["sweep", "table3", "--preset", "smoke", "--set", "model.d_ff=96", "--set", "train.lr_factor=2"]
    )
    assert long == short
    assert long["model"] == {"d_ff": 96} and long["train"] == {"lr_factor": 2.0}


def test_sweep_takes_the_sections_of_a_tuned_best_yaml_as_config(tmp_path, capsys):
    best = tmp_path / "best.yaml"
    best.write_text("# dev BLEU 12.3 (trial 4)\ntrain:\n  lr_factor: 0.5\n  warmup_steps: 300\n", encoding="utf-8")
    config = printed(capsys, ["sweep", "table3", "--preset", "smoke", "--config", str(best)])
    assert config["train"] == {"lr_factor": 0.5, "warmup_steps": 300} and config["study"] == "table3"


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["train", "--model.d_ff", "wide"], "model.d_ff: must be an integer, got 'wide'"),
        (["train", "--model.norm", "sandwich"], "model.norm"),
        (["sweep", "table3", "--set", "model.d_ff=wide"], "model.d_ff: must be an integer, got 'wide'"),
        (["sweep", "table3", "--set", "d_ff=64"], "write SECTION.FIELD=VALUE"),
        (["sweep", "table3", "--model.dff", "64"], "model.dff"),
        (["train", "--config", "missing.yaml"], "--config missing.yaml: no such file"),
        (["data", "prepare", "--data.vocab_size", "-3"], "data.vocab_size"),
        (["bench", "--repeats", "0"], "--repeats must be >= 1"),
        (["report"], "study_or_out"),
    ],
)
def test_bad_options_are_one_line_and_exit_2(argv, expected, capsys):
    assert cli.main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert expected in err and "\n" not in err and "Traceback" not in err


def test_a_broken_config_file_is_named(tmp_path, capsys):
    bad = tmp_path / "run.yaml"
    bad.write_text("model: {d_ff: [}\n", encoding="utf-8")
    assert cli.main(["train", "--config", str(bad)]) == 2
    err = capsys.readouterr().err
    assert str(bad) in err and "line 1" in err and "<unicode string>" not in err
    wrong = tmp_path / "wrong.yaml"
    wrong.write_text("model:\n  d_ff: wide\n", encoding="utf-8")
    assert cli.main(["train", "--config", str(wrong)]) == 2
    assert "model.d_ff: must be an integer, got 'wide'" in capsys.readouterr().err
