"""The `ablate` command line as a user meets it: fast help, one-line errors with exit code 2, JSON outputs."""

from __future__ import annotations

import itertools
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from ablate.ablations.cli import COMMANDS, main
from ablate.ablations.study.config import SECTIONS


def ablate(*args: str, env: dict | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "ablate.ablations.cli", *args], capture_output=True, text=True, env=env, cwd=cwd
    )


def test_help_lists_every_command_without_importing_torch():
    code = "import sys; from ablate.ablations.cli import main; main(['--help']); print(sorted(m for m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    for name in COMMANDS:
        assert f"  {name} " in out
    loaded = out.strip().splitlines()[-1]
    for heavy in ("'torch'", "'lightning'", "'pytorch_lightning'", "'wandb'", "'optuna'"):
        assert heavy not in loaded


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["frobnicate"], "unknown command 'frobnicate'"),
        (["train", "--row", "Z9"], "has no row 'Z9'"),
        (["train", "--model.norm", "sandwich"], "model.norm"),
        (["sweep", "table3", "--set", "model.d_model=-1"], "model.d_model: must be a positive integer"),
        (["sweep", "nosuchstudy"], "no study 'nosuchstudy'"),
        (["params", "table3", "--preset", "paper", "--data.vocab_size", "0"], "vocab_size"),
        (["data", "prepare", "--data.corpus", "/nonexistent/dir"], "/nonexistent/dir"),
        (["report", "/nonexistent/out"], "/nonexistent/out"),
        (["sweep", "table3", "--timeout", "2 weeks"], "--timeout: '2 weeks' is not a duration"),
        (["sweep", "table3", "--workers", "0"], "--workers must be at least 1 (trials at once on this machine), got 0"),
        (["sweep", "table3", "--workers", "-3"], "--workers must be at least 1"),
        (["train", "--train.seed", "-1"], "train.seed: must be in [0, 2^32)"),
        (["swep", "table3"], "unknown command 'swep' (did you mean 'sweep'?)"),
        (["train", "--row", "bsae"], "has no row 'bsae' (did you mean 'base'?)"),
        (["sweep", "table3", "--rows", "base,D11", "--dry_run"], "the study has no row 'D11' (did you mean 'D1'?)"),
        (["studies", "table3", "--rows", "base,bsae"], "--rows: the study has no row 'bsae' (did you mean 'base'?)"),
        (["sweep", "table3", "--rows", " , ", "--dry_run"], "--rows: no row given"),
        (["train", "--set", "model.n_head=2"], "unknown field model.n_head (did you mean 'n_heads'?)"),
        # a prefix of an option is not read as the option (argparse's abbreviations): it names the one meant
        (["train", "--model.n_layer", "2"], "--model.n_layer 2 (did you mean '--model.n_layers'?)"),
        (["sweep", "table3", "--work", "2", "--dry_run"], "--work 2 (did you mean '--workers'?)"),
        (["train", "--set", "model.p_drop=null"], "model.p_drop: must be a number, got None"),
        (["train", "--train.lr_factor", "null"], "train.lr_factor: must be a number, got"),
        (["report", "/nonexistent/out", "--samples", "-1"], "--samples -1: the bootstrap needs at least 1 resample"),
        (
            ["sweep", "table3", "--preset", "smoke", "--data.corpus", "/nonexistent/corpus", "--dry_run"],
            "--data.corpus /nonexistent/corpus: no such directory",
        ),  # the dry run opens the corpus as the sweep does
        (["status", "/nonexistent/out", "--watch", "-1"], "--watch -1: give the seconds between refreshes"),
        (
            ["train", "--row", "B1", "--model.d_ff", "0"],
            "the command line (on row 'B1' of table3 at preset tiny): model.d_ff: must be a positive integer, got 0",
        ),
        (
            ["sweep", "table3", "--preset", "smoke", "--model.d_model", "-3", "--dry_run"],
            "the command line (on row 'base' of table3 at preset smoke): model.d_model: must be a positive integer",
        ),
        (["report", "/nonexistent/out", "--samples", "0"], "--samples 0: the bootstrap needs at least 1 resample"),
    ],
)
def test_bad_input_is_one_line_and_exit_code_2(args, message, capsys):
    assert main(args) == 2, capsys.readouterr().err
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1 and "Traceback" not in err


@pytest.mark.parametrize("seen", ["missing journal", "unknown study"])
def test_status_reads_without_creating_anything(tmp_path, capsys, seen):
    """`ablate status` on a sweep directory whose storage lacks the study: one line, exit 2, no journal created."""
    out = tmp_path / "out"
    out.mkdir()
    journal = out / "optuna.journal"
    if seen == "unknown study":
        from ablate.ablations.results.storage.opening import load_or_create, open_storage

        load_or_create(open_storage(f"journal:{journal}"), "another")
    spec = {"study": "table3", "preset": "smoke", "rows": [{"name": "base"}], "seeds": [0]}
    (out / "study.json").write_text(json.dumps({**spec, "storage": f"journal:{journal}", "optuna_study": "t3"}))
    assert main(["status", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert "no study 't3'" in err and "--storage" in err and len(err.splitlines()) == 1
    assert journal.exists() == (seen == "unknown study")


def test_params_json_has_every_row():
    result = ablate("params", "table3", "--preset", "paper", "--data.vocab_size", "37000", "--json")
    rows = json.loads(result.stdout)
    assert [r["row"] for r in rows][:2] == ["base", "A1"] and len(rows) == 21
    assert next(r for r in rows if r["row"] == "base")["params"] == 63_082_496


def test_data_prepare_json_with_every_kind_of_flag(tmp_path):
    args = ["data", "prepare", "--data.cache_dir", str(tmp_path), "--data.vocab_size", "300"]
    args += ["--data.builtin_lexicon", "0.05", "--data.builtin_max_words", "12", "--data.builtin_train", "800"]
    args += ["--data.builtin_valid", "20", "--data.builtin_test", "20"]
    result = ablate(*args, "--data.truncate", "true", "--json")
    assert result.returncode == 0, result.stderr
    stats = json.loads(result.stdout)
    assert stats["splits"]["train"]["pairs"] == 800 and stats["vocab_size"] == 300 and stats["truncate"] is True
    assert stats["padding"]["bucketed"]["overhead"] < stats["padding"]["random"]["overhead"]


# ---------------------------------------------------------------------------------------------------------- train
QUICK = [  # the smoke preset cut to seconds: 4 steps on 300 short pairs, a 200-piece vocabulary, 10 dev sentences
    *("--train.max_steps", "4", "--train.val_every", "2", "--train.val_max_sentences", "5", "--train.beam_size", "2"),
    *("--data.vocab_size", "200", "--data.builtin_train", "300", "--data.builtin_valid", "10"),
    *("--data.builtin_test", "10", "--data.builtin_max_words", "12", "--data.max_len", "40"),
    *("--data.builtin_lexicon", "0.05", "--hardware.accelerator", "cpu", "--tracking.progress", "false"),
]


@pytest.mark.slow
def test_train_config_reruns_the_files_row_seed_and_output_directory(tmp_path):
    from ablate.reports.wandb_log import read_offline_run

    printed = ablate("train", "--row", "B1", "--preset", "smoke", *QUICK, "--print_config", cwd=tmp_path)
    assert printed.returncode == 0, printed.stderr
    config = yaml.safe_load(printed.stdout)
    assert (config["row"], config["preset"], config["seed"]) == ("B1", "smoke", 0)
    config["out"] = str(tmp_path / "mine")  # the user moves the run in the file; the command line says nothing
    saved = tmp_path / "b1.yaml"
    saved.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")

    env = {**os.environ, "OMP_NUM_THREADS": "1", "WANDB_MODE": "offline", "WANDB_SILENT": "true"}
    done = ablate("train", "--config", str(saved), cwd=tmp_path, env=env)  # nothing but the file
    assert done.returncode == 0, done.stderr[-3000:]
    out = tmp_path / "mine"
    assert not (tmp_path / "runs").exists()  # not the default directory of base (or of B1)
    assert yaml.safe_load((out / "config.yaml").read_text()) == {s: config[s] for s in SECTIONS}  # every field
    metrics = json.loads((out / "result.json").read_text())["metrics"]
    line = done.stdout.splitlines()[0]
    assert line.startswith(f"B1-s0: dev BLEU {metrics['bleu']:.2f}  dev PPL {metrics['ppl']:.2f}  "), line
    assert f"  test BLEU {metrics['test_bleu']:.2f}  " in line  # test-set BLEU, labelled apart from dev

    [run_dir] = sorted((out / "wandb").glob("offline-run-*"))
    run = read_offline_run(run_dir)
    assert (run["run"]["name"], run["run"]["group"], run["run"]["job_type"]) == ("B1-s0", "table3-smoke", "train")
    keys = ("study", "row", "row_group", "seed", "preset", "label")
    assert {k: run["config"][k] for k in keys} == dict(zip(keys, ["table3", "B1", "B", 0, "smoke", None], strict=True))
    assert run["config"]["model"]["d_k"] == config["model"]["d_k"] == 1  # B1's d_k (16 / 16 at smoke)
    assert run["run"]["tags"] == ["table3", "smoke", "B1", "B"]


def _help_default(help_text: str, option: str) -> str:
    """The default that --help shows for an option: its entry runs from its line to the next option's."""
    lines = help_text.splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith(f"  {option} "))
    entry = [lines[first], *itertools.takewhile(lambda line: line.startswith("   "), lines[first + 1 :])]
    found = re.search(r"default: ([^)]+)\)", " ".join(" ".join(entry).split()))
    assert found, entry
    return found.group(1)


def test_train_help_shows_the_values_the_run_starts_from_without_importing_torch():
    from ablate.ablations.study.definition import load_study
    from ablate.lightning_modules.config import ModelConfig, TrainConfig

    code = (
        "import sys\nfrom ablate.ablations.cli import main\ntry:\n    main(['train', '--help'])\nexcept SystemExit:\n"
        "    pass\nprint(sorted(sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    help_text, _, loaded = out.strip().rpartition("\n")
    for heavy in ("'torch'", "'lightning'", "'pytorch_lightning'", "'wandb'", "'optuna'"):
        assert heavy not in loaded
    start = load_study("table3").run_config("base", "tiny")
    assert start.model.d_model != ModelConfig().d_model and start.train.max_steps != TrainConfig().max_steps
    assert _help_default(help_text, "--model.d_model") == str(start.model.d_model)  # 64, not the dataclass's 512
    assert _help_default(help_text, "--train.max_steps") == str(start.train.max_steps)
    assert _help_default(help_text, "--model.d_k") == str(start.model.resolved()["d_k"])
    assert _help_default(help_text, "--seed") == "0"
    assert "table3 base at the tiny preset" in " ".join(help_text.split())
    assert "Width of every sub-layer output" in " ".join(help_text.split())  # the field's docstring


@pytest.mark.parametrize("command", ["data", "params", "train"])
def test_every_commands_help_documents_the_data_fields(command):
    done = subprocess.run([sys.executable, "-m", "ablate.ablations.cli", command, "--help"], capture_output=True,
                          text=True, check=True)  # fmt: skip
    help_text = " ".join(done.stdout.split())
    assert "--data.vocab_size VOCAB_SIZE Joint SentencePiece vocabulary size" in help_text


@pytest.mark.parametrize("hardware", [["--hardware.accelerator", "gpu"], ["--hardware.devices", "0"]])
def test_a_machine_that_cannot_run_the_hardware_settings_is_one_line(hardware, tmp_path, capsys):
    """Lightning's own configuration errors (no GPU here, zero devices), wrapped: one line naming the settings."""
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    assert main(["train", "--preset", "smoke", *hardware, "--out", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("ablate train: error: hardware.accelerator ") and "Traceback" not in "\n".join(err)
    assert err[-1].endswith("Set --hardware.accelerator cpu (or auto), or devices this machine has"), err[-1]


def test_ctrl_c_inside_an_import_is_an_interruption_not_a_traceback(monkeypatch, capsys):
    """SIGINT to `ablate report` while scipy imported: scipy raised ImportError during the KeyboardInterrupt, and
    the report printed its traceback."""
    from ablate.ablations import cli

    def interrupted_import(name, argv):
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt:
            raise ImportError("cannot import name '_stats' from partially initialized module") from None

    monkeypatch.setattr(cli, "run_command", interrupted_import)
    assert cli.main(["report", "runs/x"]) == 130
    err = capsys.readouterr().err.strip()
    assert err.startswith("ablate report: interrupted: nothing was left half-written") and "Traceback" not in err
    assert len(err.splitlines()) == 1 and "Resume with: ablate report runs/x" in err


@pytest.mark.slow
def test_ctrl_c_ends_wandb_before_its_atexit_hook_can_print(tmp_path):
    """`ablate` as a process, with a run open when Ctrl-C lands: the command finishes W&B itself, quietly, and its
    atexit hook has nothing left to reach (its service got the same SIGINT; the hook's ConnectionResetError printed 31
    lines after ours). A subprocess: a W&B torn down cannot be set up again in the same process."""
    import subprocess
    import sys

    script = f"""
import sys, wandb
from ablate.ablations import cli
from wandb.sdk import wandb_setup
run = wandb.init(project="ablate-test", dir={str(tmp_path)!r})
run.log({{"loss": 1.0}})
def ctrl_c(name, argv):
    raise KeyboardInterrupt
cli.run_command = ctrl_c
sys.argv = ["ablate", "sweep", "table3"]
code = cli.main()
print("torn down" if wandb_setup._singleton is None else "still set up")
sys.exit(code)
"""
    env = {**os.environ, "WANDB_MODE": "offline", "WANDB_SILENT": "true"}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 130, done.stderr[-3000:]
    err = done.stderr.strip()
    assert len(err.splitlines()) == 1 and "interrupted: no run was training" in err, err
    assert done.stdout.strip() == "torn down"
    assert list(tmp_path.glob("wandb/offline-run-*/run-*.wandb"))
