"""`ablate sweep` on one machine, one worker: every row x seed is one Optuna trial with one local record and one
offline W&B run; a diverging row is recorded as failed and the sweep goes on; a rerun does nothing; a bad study
is refused before anything runs.

The sweeps are real processes (Optuna journal storage, W&B offline, SentencePiece, Lightning on the CPU) on
tests/ablations/studies/sweep_rows.yaml: rows ok1, nan (loss NaN at step 1) and ok2, in that order.
"""

from __future__ import annotations

import json
import math
import re
import shutil
import socket
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import torch
from ablate.ablations import cli
from ablate.ablations.study.definition import load_study
from ablate.data.errors import AblateError

STUDY = "sweep_rows.yaml"
OPTUNA_NAME = "sweep-rows-smoke"
ROWS = {"ok1": "A", "nan": "C", "ok2": "B"}  # row -> group
MAX_STEPS = 10


@dataclass
class Finished:
    """A sweep run to its end, then run again with the same command."""

    out: Path
    first: subprocess.CompletedProcess
    rerun: subprocess.CompletedProcess
    trials_before: list[Any]
    files_before: dict[str, int]
    records_before: dict[str, dict[str, Any]]
    journal_before: list[str]


@pytest.fixture(scope="module")
def finished(sweeps, tmp_path_factory) -> Finished:
    out = tmp_path_factory.mktemp("rows") / "out"
    first = sweeps.run(STUDY, out)
    assert first.returncode == 0, first.stderr[-3000:]
    trials, files, records = sweeps.trials(out, OPTUNA_NAME), sweeps.snapshot(out), sweeps.records(out)
    journal = (out / "optuna.journal").read_text(encoding="utf-8").splitlines()
    rerun = sweeps.run(STUDY, out)
    return Finished(out, first, rerun, trials, files, records, journal)


def by_key(trials) -> dict[str, list[Any]]:
    out: dict[str, list[Any]] = {}
    for t in trials:
        out.setdefault(f"{t.user_attrs['row']}__seed{t.user_attrs['seed']}", []).append(t)
    return out


# ---------------------------------------------------------------------------------------------- one record per trial
@pytest.mark.slow
def test_every_row_is_one_trial_with_one_record(finished, sweeps):
    from optuna.trial import TrialState

    records = finished.records_before
    assert sorted(records) == sorted(f"{row}__seed0" for row in ROWS)
    trials = by_key(finished.trials_before)
    assert {key: len(ts) for key, ts in trials.items()} == {key: 1 for key in records}
    for key, record in records.items():
        (trial,) = trials[key]
        assert record["row"] == trial.user_attrs["row"] and record["group"] == ROWS[record["row"]]
        assert record["optuna"] == {"study": OPTUNA_NAME, "trial_number": trial.number}
        if record["row"] == "nan":
            continue
        assert record["state"] == "complete" and record["reason"] is None
        assert trial.state == TrialState.COMPLETE
        # Named objectives: what optuna-dashboard plots and ranks.
        assert trial.values == pytest.approx([record["metrics"]["bleu"], record["metrics"]["ppl"]])
        assert record["metrics"]["steps"] == MAX_STEPS
        assert math.isfinite(record["metrics"]["ppl"]) and record["metrics"]["params"] > 0
        assert [p["step"] for p in record["curves"]["train"]] == [2, 4, 6, 8, 10]  # tracking.log_every: 2
        assert record["curves"]["val"][-1]["step"] == MAX_STEPS
        assert (finished.out / record["hypotheses"]).is_file()
        assert record["config"]["model"]["d_model"] == 16 and record["config"]["data"]["vocab_size"] == 300
        # The copy of the record in the storage (for coordinators on other machines) is the same record; it is a
        # system attribute, out of the user attributes that optuna-dashboard and `optuna trials` print.
        assert trial.system_attrs["ablate:record"]["metrics"] == record["metrics"]
        assert "record" not in trial.user_attrs and len(json.dumps(trial.user_attrs)) < 1000
    assert records["ok2__seed0"]["config"]["model"]["n_heads"] == 4


@pytest.mark.slow
def test_trials_carry_row_seed_and_knobs_as_parameters(finished, sweeps):
    """optuna-dashboard's parallel coordinates, slice and importance plots read parameters: every trial has its row,
    seed and the value of every knob a row overrides, on distributions shared by the whole plan."""
    import optuna
    from ablate.ablations.results.storage.opening import open_existing

    study = optuna.load_study(study_name=OPTUNA_NAME, storage=open_existing("journal:optuna.journal", finished.out))
    assert study.metric_names == ["dev BLEU", "dev PPL"]
    assert [d.name for d in study.directions] == ["MAXIMIZE", "MINIMIZE"]
    trials = {key: ts[0] for key, ts in by_key(finished.trials_before).items()}
    for key, trial in trials.items():
        row = key.split("__seed")[0]
        assert trial.params["row"] == row and trial.params["seed"] == 0
        assert trial.params["model.n_heads"] == (4 if row == "ok2" else 2)
        config = finished.records_before[key]["config"]
        assert trial.params["train.lr_factor"] == config["train"]["lr_factor"]
        assert (trial.params["train.lr_factor"] == 1.0e30) == (row == "nan")
        assert trial.params["train.max_steps"] == MAX_STEPS
    distributions = {key: trial.distributions for key, trial in trials.items()}
    first = next(iter(distributions.values()))
    assert all(d == first for d in distributions.values())  # one axis per knob, shared by every trial
    assert first["row"].choices == tuple(ROWS)  # in the study's order
    assert (first["model.n_heads"].low, first["model.n_heads"].high) == (2, 4)
    assert first["train.lr_factor"].log  # 0.1 .. 1e30
    # Learning curves: the dev BLEU of each validation, at its step.
    ok1 = trials["ok1__seed0"]
    assert ok1.intermediate_values == {
        MAX_STEPS: pytest.approx(finished.records_before["ok1__seed0"]["metrics"]["bleu"])
    }


# ------------------------------------------------------------------------------------------------------ divergence
@pytest.mark.slow
def test_a_nan_trial_is_recorded_as_failed_and_the_sweep_goes_on(finished):
    from optuna.trial import TrialState

    assert finished.first.returncode == 0
    record = finished.records_before["nan__seed0"]
    assert record["state"] == "failed"
    assert record["reason"].startswith("diverged"), record["reason"]
    assert "nan" in record["reason"].lower()
    assert record["metrics"] == {}
    (trial,) = by_key(finished.trials_before)["nan__seed0"]
    assert trial.state == TrialState.FAIL
    assert trial.user_attrs["reason"] == record["reason"]
    assert (finished.out / "trials" / "nan__seed0" / "error.log").is_file()
    # ok2 comes after the NaN row in the study and still ran to the end.
    ok2 = finished.records_before["ok2__seed0"]
    assert ok2["state"] == "complete" and ok2["optuna"]["trial_number"] > trial.number


@pytest.mark.slow
def test_a_rerun_keeps_the_failed_row_failed_without_running_it(finished, sweeps):
    assert finished.rerun.returncode == 0, finished.rerun.stderr[-3000:]
    nan_trials = by_key(sweeps.trials(finished.out, OPTUNA_NAME))["nan__seed0"]
    assert [t.number for t in nan_trials] == [finished.records_before["nan__seed0"]["optuna"]["trial_number"]]
    assert sweeps.records(finished.out)["nan__seed0"] == finished.records_before["nan__seed0"]


@pytest.mark.slow
def test_retry_failed_runs_the_failed_row_again(finished, sweeps, tmp_path):
    from optuna.trial import TrialState

    out = tmp_path / "out"
    shutil.copytree(finished.out, out)  # the journal lives in OUT: the copy is the same sweep, untouched by others
    before = sweeps.records(out)
    error_log = out / "trials" / "nan__seed0" / "error.log"
    error_log_mtime = error_log.stat().st_mtime_ns

    result = sweeps.run(STUDY, out, "--retry_failed")

    assert result.returncode == 0, result.stderr[-3000:]
    trials = by_key(sweeps.trials(out, OPTUNA_NAME))
    assert [len(trials[k]) for k in ("ok1__seed0", "ok2__seed0")] == [1, 1]  # finished rows are not run again
    retry = trials["nan__seed0"][-1]
    assert len(trials["nan__seed0"]) == 2 and retry.state == TrialState.FAIL
    after = sweeps.records(out)
    assert after["ok1__seed0"] == before["ok1__seed0"]
    # The retry trained (and diverged) again: a fresh record from the retry trial, a fresh error log.
    assert after["nan__seed0"]["optuna"]["trial_number"] == retry.number
    assert after["nan__seed0"]["reason"].startswith("diverged")
    assert error_log.stat().st_mtime_ns != error_log_mtime


# ----------------------------------------------------------------------------------------------------------- rerun
@pytest.mark.slow
def test_rerunning_a_finished_sweep_does_nothing(finished, sweeps):
    assert finished.rerun.returncode == 0, finished.rerun.stderr[-3000:]
    assert "(0 newly queued)" in finished.rerun.stderr
    after = sweeps.trials(finished.out, OPTUNA_NAME)
    assert [(t.number, t.state) for t in after] == [(t.number, t.state) for t in finished.trials_before]
    assert sweeps.records(finished.out) == finished.records_before
    # No training, no new W&B run, no record or checkpoint rewritten: every file is as the first run left it
    # (study.json, the description reports read, is rewritten on every run and is not a result).
    # The journal only grows by Optuna's create_study(load_if_exists=True) attempts (op 0): no trial was touched.
    files, before = sweeps.snapshot(finished.out), dict(finished.files_before)
    for rewritten in ("study.json", "optuna.journal"):
        assert files.pop(rewritten) and before.pop(rewritten)
    assert files == before
    journal = (finished.out / "optuna.journal").read_text(encoding="utf-8").splitlines()
    assert journal[: len(finished.journal_before)] == finished.journal_before
    assert {json.loads(line)["op_code"] for line in journal[len(finished.journal_before) :]} <= {0}
    assert not re.search(r"^\[\w+\] step ", finished.rerun.stderr, re.M)  # no training progress line
    again = sweeps.run(STUDY, finished.out, "--workers", "2")  # nothing left: no worker process starts
    assert again.returncode == 0 and "worker process(es) started" not in again.stderr, again.stderr[-3000:]


@pytest.mark.slow
def test_a_sweep_resumed_on_another_torch_version_says_so_in_one_line_and_the_report_names_both(
    finished, sweeps, tmp_path, capsys
):
    """ok1's record names torch 2.99.0, as if the study began on another machine: resuming it here warns in one
    line and goes on; the report's method note lists the torch versions and devices its trials ran on."""
    out = tmp_path / "out"
    shutil.copytree(finished.out, out)
    path = out / "records" / "ok1__seed0.json"
    record = json.loads(path.read_text(encoding="utf-8"))
    assert record["metrics"]["kernels"]["torch"] == torch.__version__  # what a record names
    record["metrics"]["kernels"]["torch"] = record["metrics"]["path"]["torch"] = "2.99.0"
    path.write_text(json.dumps(record), encoding="utf-8")
    assert "warning" not in finished.rerun.stderr  # the same machine: nothing to say

    resumed = sweeps.run(STUDY, out)

    assert resumed.returncode == 0, resumed.stderr[-3000:]
    warned = [line for line in resumed.stderr.splitlines() if line.startswith("ablate sweep: warning:")]
    assert len(warned) == 1 and f"torch 2.99.0 (1 trial), here {torch.__version__}" in warned[0], warned
    assert cli.main(["report", str(out), "--format", "md", "--no_plots", "--samples", "50", "--quiet"]) == 0
    capsys.readouterr()
    legend = (out / "report" / f"{OPTUNA_NAME}.md").read_text(encoding="utf-8")
    trials_on = legend[legend.index("trials on ") :].split("; results from")[0]
    assert f"torch {torch.__version__}" in trials_on and "torch 2.99.0" in trials_on, trials_on
    assert trials_on.count("(1 trial)") == 2, trials_on


# ------------------------------------------------------------------------------------------------------------ W&B
@pytest.mark.slow
@pytest.mark.parametrize(
    "row",
    [
        "ok1",
        "ok2",  # runs after the diverged row in the same worker: it must get a W&B run of its own
    ],
)
def test_each_trial_is_an_offline_wandb_run_holding_its_metrics(finished, sweeps, row):
    from ablate.reports.wandb_log import read_offline_run

    record = finished.records_before[f"{row}__seed0"]
    trial_dir = finished.out / "trials" / f"{row}__seed0"
    runs = sweeps.wandb_runs(trial_dir)
    assert len(runs) == 1 and Path(record["wandb"]["run_dir"]) == runs[0]
    run = read_offline_run(runs[0])

    assert run["finished"]
    assert run["run"]["id"] == record["wandb"]["run_id"] == (trial_dir / "wandb_id").read_text().strip()
    assert run["run"]["project"] == "ablate"
    assert run["run"]["group"] == "sweep-rows-smoke"  # group = study + preset
    assert run["run"]["name"] == f"{row}-s0"  # name = row and seed, one seed or many
    assert run["run"]["job_type"] == "train"
    assert {ROWS[row], "smoke"} <= set(run["run"]["tags"])  # tags: the row's group and the preset

    # Metrics per step: the training losses the record's curve holds, and the dev metrics.
    losses = [h["train/loss"] for h in run["history"] if "train/loss" in h]
    assert losses == pytest.approx([p["loss"] for p in record["curves"]["train"]], rel=1e-5)
    val = [h for h in run["history"] if "val/ppl" in h]
    assert val and val[-1]["val/ppl"] == pytest.approx(record["metrics"]["ppl"], rel=1e-5)
    assert val[-1]["val/bleu"] == pytest.approx(record["metrics"]["bleu"], abs=1e-4)

    # Summary: dev BLEU, dev PPL, params, tokens per second, wall time, device.
    summary = run["summary"]
    for name in ("bleu", "ppl", "params", "tokens_per_sec", "wall_time_s"):
        assert summary[f"final/{name}"] == pytest.approx(record["metrics"][name]), name
    assert summary["final/device"] == record["metrics"]["device"]
    # What the numbers ran on: "to the digit" holds only on the same kernels.
    kernels = record["metrics"]["kernels"]
    assert kernels["torch"] == torch.__version__
    assert kernels["cpu_capability"] == torch.backends.cpu.get_cpu_capability()
    assert kernels["cpu"] and kernels["threads"] >= 1 and kernels["gpu"] is None
    assert summary["final/kernels"]["cpu_capability"] == kernels["cpu_capability"]

    # Config: the row, the study, and the resolved sections that survive as mappings.
    config = run["config"]
    assert (config["study"], config["row"], config["row_group"], config["seed"]) == ("sweep-rows", row, ROWS[row], 0)
    assert config["data"]["vocab_size"] == 300 and config["hardware"]["accelerator"] == "cpu"


@pytest.mark.slow
def test_the_wandb_config_is_the_fully_resolved_config(finished, sweeps):
    from ablate.reports.wandb_log import read_offline_run

    record = finished.records_before["ok1__seed0"]
    config = read_offline_run(record["wandb"]["run_dir"])["config"]
    assert config["model"] == record["config"]["model"]
    assert config["train"] == record["config"]["train"]
    assert config["model"]["d_model"] == 16 and config["train"]["max_steps"] == MAX_STEPS


# ------------------------------------------------------------------------------------------- validation up front
INVALID = {
    "invalid_unknown_field.yaml": ["row 'r2'", "unknown field model.n_head"],
    "invalid_bad_value.yaml": ["row 'r2'", "model.norm", "'middle'"],
    "invalid_duplicate_row.yaml": ["row 'r1'", "duplicate row name"],
}


@pytest.mark.parametrize("name", sorted(INVALID))
def test_load_study_names_what_is_wrong(sweeps, name):
    with pytest.raises(AblateError) as err:
        load_study(sweeps.study(name))
    message = str(err.value)
    assert "\n" not in message
    assert name in message  # the file
    for part in INVALID[name]:
        assert part in message


@pytest.mark.parametrize(
    "args, expected",
    [
        *[([name], INVALID[name]) for name in sorted(INVALID)],
        (["sweep_rows.yaml", "--set", "model.n_heads=two"], ["model.n_heads", "'two'", "command-line settings"]),
        (["sweep_rows.yaml", "--set", "model.n_head=2"], ["unknown field model.n_head"]),
        (["sweep_rows.yaml", "--seeds", "-1"], ["--seeds must be >= 1, got -1"]),
    ],
    ids=["unknown-field", "bad-value", "duplicate-row", "set-bad-value", "set-unknown-field", "negative-seeds"],
)
def test_a_bad_study_or_setting_exits_2_with_one_line_before_anything_runs(sweeps, tmp_path, capsys, args, expected):
    out = tmp_path / "out"
    study, *rest = args
    rc = cli.main(["sweep", str(sweeps.study(study)), "--out", str(out), "--no_report", *rest])
    captured = capsys.readouterr()
    assert rc == 2
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ablate sweep: error: "), captured.err
    for part in expected:
        assert part in lines[0]
    assert not out.exists()  # nothing half-written


def test_zero_seeds_is_refused(sweeps, tmp_path):
    from ablate.ablations.commands.sweep import build_parser, make_plan

    args = build_parser().parse_args([str(sweeps.study(STUDY)), "--out", str(tmp_path / "out"), "--seeds", "0"])
    with pytest.raises(AblateError, match="--seeds must be >= 1, got 0"):
        make_plan(args)  # builds the plan only: nothing runs either way


def test_the_sweep_command_refuses_an_invalid_study_file(sweeps, tmp_path):
    out = tmp_path / "out"
    study = sweeps.study("invalid_unknown_field.yaml")
    result = sweeps.run(study, out, timeout=120)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    said = f"ablate sweep: error: {study}: row 'r2': unknown field model.n_head (did you mean 'n_heads'?); model fields"
    assert lines[0].startswith(said)
    assert result.stdout == ""
    assert not out.exists()


# --------------------------------------------------------------------------------------- a record outlives its worker
@pytest.mark.slow
def test_a_trial_whose_record_was_written_is_closed_from_it_not_trained_again(finished, sweeps, tmp_path):
    """A worker that died after writing a trial's record but before telling Optuna: the rerun fails the dead trial,
    and its retry is closed from the record on disk, without training."""
    import optuna
    from optuna.trial import TrialState

    out = tmp_path / "out"
    out.mkdir()
    for part in ("records", "hyps", "refs"):
        shutil.copytree(finished.out / part, out / part)
    records = sweeps.records(out)
    mtimes = {k: (out / "records" / f"{k}.json").stat().st_mtime_ns for k in records}
    dead = subprocess.Popen(["true"])  # a finished, reaped process: its pid is gone
    dead.wait()
    study = optuna.create_study(
        study_name=OPTUNA_NAME, storage=sweeps.storage(f"journal:{out / 'optuna.journal'}"), direction="maximize"
    )
    for row, group in ROWS.items():
        study.enqueue_trial({}, user_attrs={"row": row, "seed": 0, "group": group})
        trial = study.ask()  # WAITING -> RUNNING, as a worker's claim leaves it
        for name, value in (("host", socket.gethostname()), ("pid", dead.pid), ("heartbeat", 0.0)):
            study._storage.set_trial_user_attr(trial._trial_id, name, value)

    result = sweeps.run(STUDY, out)

    assert result.returncode == 0, result.stderr[-3000:]
    assert not (out / "trials").exists()  # nothing trained
    assert not re.search(r"^\[\w+\] step ", result.stderr, re.M)
    trials = by_key(sweeps.trials(out, OPTUNA_NAME))
    for k, record in records.items():
        died, retry = trials[k]
        assert died.state == TrialState.FAIL and died.user_attrs["reason"].startswith("worker died")
        assert retry.user_attrs["retry_of"] == died.number
        assert retry.params == died.params  # (none here: a study made as by an older ablate, one objective)
        if record["state"] == "complete":
            assert retry.state == TrialState.COMPLETE and retry.values[0] == pytest.approx(record["metrics"]["bleu"])
        else:
            assert retry.state == TrialState.FAIL and retry.user_attrs["reason"] == record["reason"]
        assert (out / "records" / f"{k}.json").stat().st_mtime_ns == mtimes[k]
    assert sweeps.records(out) == records


# ---------------------------------------------------------------------------------------------------- progress view
@pytest.mark.slow
def test_the_progress_view_shows_each_rows_state_and_dev_bleu(finished, sweeps):
    import optuna
    from ablate.ablations.sweep import progress

    assert "[sweep] 2/3 done, 0 running, 0 pending, 1 failed" in finished.first.stderr
    study = optuna.load_study(
        study_name=OPTUNA_NAME, storage=sweeps.storage(f"journal:{finished.out / 'optuna.journal'}")
    )
    rows = progress.collect(study.get_trials(), [(row, 0) for row in ROWS])
    assert [(r.row, r.state) for r in rows] == [("ok1", "complete"), ("nan", "failed"), ("ok2", "complete")]
    for r in rows:
        record = finished.records_before[f"{r.row}__seed0"]
        if r.state == "complete":
            assert r.bleu == pytest.approx(record["metrics"]["bleu"]) and r.step == MAX_STEPS
        else:
            assert r.reason == record["reason"]
    nan = next(r for r in rows if r.row == "nan")
    assert (
        progress.summary_line(rows, 1)
        == f"2/3 done, 0 running, 0 pending, 1 failed; last failure nan seed 0: {nan.reason}"
    )


def test_a_failed_trials_reason_is_one_plain_line():
    """torch's weights-only error has newlines and terminal colour codes; the record's reason goes into tables."""
    from ablate.ablations.sweep.trial import _reason

    err = RuntimeError("Weights only load failed.\n\n(1) \x1b[1mdo those steps only if you trust\x1b[0m the source")
    assert _reason(err) == "RuntimeError: Weights only load failed. (1) do those steps only if you trust the source"
    assert len(_reason(RuntimeError("x" * 2000))) == 500
