"""The `ablate` command line as a user meets it: fast help, one-line errors with exit code 2, JSON outputs."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from ablations.cli import COMMANDS, main


def ablate(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ablations.cli", *args], capture_output=True, text=True, env=env)


def test_help_lists_every_command_without_importing_torch():
    code = "import sys; from ablations.cli import main; main(['--help']); print(sorted(m for m in sys.modules))"
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
    ],
)
def test_bad_input_is_one_line_and_exit_code_2(args, message, capsys):
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1 and "Traceback" not in err


@pytest.mark.parametrize("seen", ["missing journal", "unknown study"])
def test_status_reads_without_creating_anything(tmp_path, capsys, seen):
    """`ablate status` on a sweep directory whose storage lacks the study: one line, exit 2, no journal created."""
    out = tmp_path / "out"
    out.mkdir()
    journal = out / "optuna.journal"
    if seen == "unknown study":
        from ablations.storage import load_or_create, open_storage

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
