"""What a long sweep meets after a crash, with real processes and real files: a file-size limit that fails a
checkpoint mid-save, Ctrl-C (to one process and to a sweep with two workers), an interrupted run resumed exactly,
a torn checkpoint, a finite blow-up, an unwritable output directory.

A file-size limit (RLIMIT_FSIZE, inherited by every process the sweep starts) stands in for a full disk: the write
fails with EFBIG at the same place ENOSPC would, and needs no root or mount on the CI machine.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
from pathlib import Path

import pytest

STUDY, NAME = "sweep_interrupt.yaml", "sweep-interrupt-smoke"
STEPS = 400
PAPER_SCHEDULE = ("--train.budgets", "[]", "--train.cooldown_frac", "0")
"""Equation (3) alone, one budget: a schedule that does not depend on max_steps (the smoke preset's cooldown does)."""
FILE_LIMIT = 100_000
"""Bytes: above every record, journal and W&B file of the study, below one checkpoint (about 175 KB)."""


def _complete_by_key(sweeps, out: Path) -> dict[str, int]:
    from optuna.trial import TrialState

    counts: dict[str, int] = {}
    for trial in sweeps.trials(out, NAME):
        if trial.state == TrialState.COMPLETE:
            key = f"{trial.user_attrs['row']}__seed{trial.user_attrs['seed']}"
            counts[key] = counts.get(key, 0) + 1
    return counts


def _limit_file_size() -> None:
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit then fails with EFBIG instead of a kill
    resource.setrlimit(resource.RLIMIT_FSIZE, (FILE_LIMIT, FILE_LIMIT))


def _one_line_error(stderr: str) -> str:
    assert "Traceback" not in stderr, stderr[-3000:]
    lines = [line for line in stderr.splitlines() if "error:" in line]
    assert len(lines) == 1, stderr[-3000:]
    return lines[0]


@pytest.mark.slow
def test_a_full_disk_mid_save_stops_the_sweep_in_one_line_and_the_rerun_finishes_every_row_once(sweeps, tmp_path):
    out = tmp_path / "out"
    first = sweeps.run(STUDY, out, "--train.max_steps", "40")  # seed 0 of both rows, finished before the disk fills
    assert first.returncode == 0, first.stderr[-3000:]
    finished = {p.name: p.stat().st_mtime_ns for p in (out / "records").glob("*.json")}
    assert sorted(finished) == ["long__seed0.json", "wide__seed0.json"]

    full = subprocess.run(
        sweeps.command(STUDY, out, "--train.max_steps", "40", "--seeds", "2"),
        cwd=Path(__file__).resolve().parents[3], env=sweeps.env, capture_output=True, text=True, timeout=300,
        preexec_fn=_limit_file_size,
    )  # fmt: skip

    assert full.returncode == 2, full.stderr[-3000:]
    line = _one_line_error(full.stderr)
    # The first checkpoint past the limit: the half budget's fork (smoke scores T/2) or last.ckpt.
    assert ".ckpt" in line and "file-size limit" in line and "rerun the same command" in line, line
    # Finished rows untouched, no record of the stopped one, no temp file or torn checkpoint left behind.
    assert {p.name: p.stat().st_mtime_ns for p in (out / "records").glob("*.json")} == finished
    assert not list(out.rglob("*.tmp")) and not list(out.rglob("*.corrupt"))

    rerun = sweeps.run(STUDY, out, "--train.max_steps", "40", "--seeds", "2")

    assert rerun.returncode == 0, rerun.stderr[-3000:]
    assert _complete_by_key(sweeps, out) == {f"{row}__seed{s}": 1 for row in ("long", "wide") for s in (0, 1)}
    assert {p.name: p.stat().st_mtime_ns for p in (out / "records").glob("*__seed0.json")} == finished
    stopped = [t for t in sweeps.trials(out, NAME) if str(t.user_attrs.get("reason", "")).startswith("stopped:")]
    assert len(stopped) == 1 and stopped[0].user_attrs["retried"], [t.user_attrs for t in sweeps.trials(out, NAME)]


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_ctrl_c_on_a_two_worker_sweep_saves_the_running_trials_prints_the_resume_line_and_exits_130(
    sweeps, tmp_path, sig
):
    """SIGINT: what a terminal's Ctrl-C sends to the sweep (its workers are in sessions of their own). SIGTERM: what
    `timeout` and `kill` send; it once ended the sweep at once and left both workers training, unseen."""
    out, log = tmp_path / "out", tmp_path / "sweep.log"
    proc = sweeps.start(STUDY, out, "--workers", "2", log=log)
    checkpoints = [out / "trials" / f"{row}__seed0" / "checkpoints" / "last.ckpt" for row in ("long", "wide")]
    assert sweeps.wait_for(lambda: all(c.exists() for c in checkpoints) or proc.poll() is not None, 240), (
        log.read_text()
    )
    os.kill(proc.pid, sig)
    proc.wait(timeout=120)

    text = log.read_text(encoding="utf-8")
    assert proc.returncode == 130, text[-3000:]
    assert not _workers_of(out), "a worker outlived its sweep"
    assert "Traceback" not in text, text[-3000:]
    (line,) = [line for line in text.splitlines() if line.startswith("ablate sweep: interrupted:")]
    assert "0 of 2 trials finished" in line and "2 unfinished trial(s) resume from their checkpoints" in line, line
    assert f"Resume with: ablate sweep {sweeps.study(STUDY)}" in line, line
    stopped_at = {c.parent.parent.name: _step(c) for c in checkpoints}
    assert all(0 < step < STEPS for step in stopped_at.values()), stopped_at
    # Status says where each stopped trial resumes: its checkpoint's step, not a bare 'pending'.
    status = subprocess.run([sys.executable, "-m", "ablate.ablations.cli", "status", str(out), "--json"],
                            env=sweeps.env, capture_output=True, text=True)  # fmt: skip
    assert status.returncode == 0, status.stderr
    shown = {f"{r['row']}__seed{r['seed']}": (r["state"], r["step"], r["reason"]) for r in json.loads(status.stdout)}
    for key, step in stopped_at.items():
        assert shown[key] == ("pending", step, f"resumes at step {step}"), shown

    rerun = sweeps.run(STUDY, out, "--workers", "2")

    assert rerun.returncode == 0, rerun.stderr[-3000:]
    assert _complete_by_key(sweeps, out) == {"long__seed0": 1, "wide__seed0": 1}
    for key, step in stopped_at.items():
        record = sweeps.records(out)[key]
        # The whole run is in the record: the curve from its first point, the restart noted, the times of both parts.
        assert record["metrics"]["resumed_at_steps"] == [step], record["metrics"]
        assert record["curves"]["train"][0]["step"] == 4 and record["curves"]["train"][-1]["step"] == STEPS
        assert record["metrics"]["wall_time_s"] > record["metrics"]["train_time_s"] > 0
    # The smoke preset keeps no checkpoint of a finished trial.
    assert not [p for p in (out / "trials").rglob("*.ckpt")]


def _workers_of(out: Path) -> list[int]:
    """The pids of worker processes of the sweep writing to `out` that are still running."""
    pids = []
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            argv = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:  # ended while we looked
            continue
        if b"--worker" in argv and str(out).encode() in argv:
            pids.append(int(proc.name))
    return pids


def _step(path: Path) -> int:
    import torch

    return int(torch.load(path, map_location="cpu", weights_only=False)["global_step"])


def _train(sweeps, out: Path, *args: str, **popen) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "ablate.ablations.cli", "train", "--study", str(sweeps.study(STUDY)), "--row", "long",
           "--preset", "smoke", "--out", str(out), "--train.keep_checkpoints", "last", *args]  # fmt: skip
    return subprocess.Popen(cmd, cwd=Path(__file__).resolve().parents[3], env=sweeps.env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, **popen)  # fmt: skip


@pytest.mark.slow
def test_an_interrupted_and_resumed_run_ends_equal_to_an_uninterrupted_one(sweeps, tmp_path):
    whole = _train(sweeps, tmp_path / "whole")
    assert whole.wait(timeout=300) == 0, whole.stderr.read()[-3000:]
    part = tmp_path / "part"
    stopped = _train(sweeps, part)
    checkpoint = part / "checkpoints" / "last.ckpt"
    assert sweeps.wait_for(lambda: checkpoint.exists() or stopped.poll() is not None, 240)
    stopped.send_signal(signal.SIGINT)
    _, err = stopped.communicate(timeout=120)
    assert stopped.returncode == 130, err[-3000:]
    assert "Traceback" not in err and f"saved in {checkpoint}" in err and "--resume" in err, err[-3000:]
    step = _step(checkpoint)
    assert 0 < step < STEPS
    resumed = _train(sweeps, part, "--resume")
    assert resumed.wait(timeout=300) == 0, resumed.stderr.read()[-3000:]

    a = json.loads((tmp_path / "whole" / "result.json").read_text(encoding="utf-8"))
    b = json.loads((part / "result.json").read_text(encoding="utf-8"))
    # Same batches in the same order, same dropout masks, same schedule: on one CPU thread the arithmetic is the same
    # operations in the same order, so the numbers agree to the last bit. The tolerance only absorbs a float printed
    # and parsed back; one batch out of place or one different dropout mask moves the loss by more than 1e-3.
    assert b["metrics"]["resumed_at_steps"] == [step] and a["metrics"]["resumed_at_steps"] == []
    assert [p["step"] for p in b["curves"]["train"]] == [p["step"] for p in a["curves"]["train"]]
    for x, y in zip(a["curves"]["train"], b["curves"]["train"], strict=True):
        assert y["loss"] == pytest.approx(x["loss"], rel=1e-9, abs=1e-12), (x, y)
    assert [p["step"] for p in b["curves"]["val"]] == [p["step"] for p in a["curves"]["val"]]
    for key in ("ppl", "bleu", "loss"):
        assert b["metrics"][key] == pytest.approx(a["metrics"][key], rel=1e-9), key
    assert b["hypotheses"] == a["hypotheses"]


def test_a_torn_checkpoint_is_set_aside_and_the_run_starts_over(tmp_path, capsys):
    import torch
    from ablate.ablations.training.checkpoints import AtomicCheckpointIO, usable

    path = tmp_path / "checkpoints" / "last.ckpt"
    AtomicCheckpointIO().save_checkpoint({"state_dict": {"w": torch.ones(1000)}, "global_step": 7}, path)
    assert usable(path)
    with open(path, "r+b") as fh:  # what a crash mid-write used to leave
        fh.truncate(path.stat().st_size // 2)

    assert not usable(path)

    assert not path.exists() and (tmp_path / "checkpoints" / "last.ckpt.corrupt").exists()
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith(f"warning: checkpoint {path} cannot be read") and "starts over" in line


def test_a_checkpoint_saved_before_the_rename_to_one_namespace_still_resumes(tmp_path, monkeypatch):
    """A sweep started before every folder became `ablate.*` left checkpoints whose configs are pickled as
    `lightning_modules.config.ModelConfig`; the upgraded code must read them weights-only (it failed the trial)."""
    import sys
    import types

    import torch
    from ablate.ablations.training.checkpoints import AtomicCheckpointIO, usable
    from ablate.lightning_modules.config import ModelConfig, TrainConfig
    from ablate.lightning_modules.module import LEGACY_MODULE

    model, train = ModelConfig(n_heads=1), TrainConfig()
    old = types.ModuleType(LEGACY_MODULE)
    old.ModelConfig, old.TrainConfig = ModelConfig, TrainConfig
    monkeypatch.setitem(sys.modules, LEGACY_MODULE, old)
    for cls in (ModelConfig, TrainConfig):  # pickle names a class by its __module__: write it as the old code did
        monkeypatch.setattr(cls, "__module__", LEGACY_MODULE)
    path = tmp_path / "last.ckpt"
    checkpoint = {"state_dict": {}, "global_step": 9, "hyper_parameters": {"model": model, "train": train}}
    AtomicCheckpointIO().save_checkpoint(checkpoint, path)
    monkeypatch.undo()
    assert f"{LEGACY_MODULE}\nModelConfig".encode() in path.read_bytes()  # the old name, as pickle wrote it

    assert usable(path)
    loaded = torch.load(path, map_location="cpu", weights_only=True)
    assert type(loaded["hyper_parameters"]["model"]) is ModelConfig and loaded["hyper_parameters"]["model"] == model


def test_a_checkpoint_write_that_fails_midway_leaves_the_previous_one_whole(tmp_path):
    import torch
    from ablate.ablations.training.checkpoints import AtomicCheckpointIO, checkpoint_step

    path = tmp_path / "last.ckpt"
    io = AtomicCheckpointIO()
    io.save_checkpoint({"state_dict": {"w": torch.ones(10)}, "global_step": 1}, path)
    with pytest.raises(Exception):  # noqa: B017 - whichever error pickling a lambda raises
        io.save_checkpoint({"state_dict": {"w": torch.ones(10)}, "global_step": 2, "bad": lambda: None}, path)
    assert checkpoint_step(path) == 1
    assert [p.name for p in tmp_path.iterdir()] == ["last.ckpt"]  # and no temp file


@pytest.mark.slow
def test_a_finite_blow_up_fails_the_trial_as_diverged(sweeps, tmp_path):
    out = tmp_path / "out"
    run = sweeps.run(STUDY, out, "--train.lr_factor", "1000", "--train.max_steps", "60")
    # A failed trial never stops the sweep: both rows ran. Neither succeeded, so the sweep says so and exits 1.
    assert run.returncode == 1, run.stderr[-3000:]
    last = run.stderr.strip().splitlines()[-1]
    assert last.startswith("ablate sweep: no trial succeeded (2 failed); the first, long seed 0: diverged: "), last
    for key, record in sweeps.records(out).items():
        assert record["state"] == "failed", (key, record.get("metrics"))
        assert record["reason"].startswith("diverged:"), record["reason"]
        assert "3x its first value" in record["reason"] or "above the vocabulary size" in record["reason"]


def test_an_unwritable_output_directory_is_one_line_and_exit_2(sweeps, tmp_path):
    if os.geteuid() == 0:  # root writes through permission bits: /sys refuses everyone
        out = Path("/sys/ablate-test-out")
    else:
        locked = tmp_path / "locked"
        locked.mkdir()
        locked.chmod(0o555)
        out = locked / "out"
    run = sweeps.run(STUDY, out)
    assert run.returncode == 2, run.stderr[-3000:]
    line = _one_line_error(run.stderr)
    assert f"cannot write {out}" in line and "writable" in line, line


def test_a_second_ctrl_c_stops_at_once_with_exit_130(tmp_path):
    script = (
        "import os, signal, sys, time\n"
        "from ablate.ablations.runtime import interrupt\n"
        "with interrupt.graceful():\n"
        "    os.kill(os.getpid(), signal.SIGINT)\n"
        "    time.sleep(0.5)\n"
        "    assert interrupt.requested()\n"
        "    print('first handled', flush=True)\n"
        "    os.kill(os.getpid(), signal.SIGINT)\n"
        "    time.sleep(30)\n"
        "print('not stopped', flush=True)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], cwd=Path(__file__).resolve().parents[3], capture_output=True,
                          text=True, timeout=60)  # fmt: skip
    assert done.returncode == 130, done.stderr
    assert done.stdout == "first handled\n"
    assert "Ctrl-C: saving a checkpoint" in done.stderr and "Ctrl-C again: stopping at once" in done.stderr


def test_a_stopped_trial_is_claimed_before_trials_that_have_not_started(tmp_path):
    from ablate.ablations.results.storage.queue import Queue

    queue = Queue.open(f"journal:{tmp_path / 'optuna.journal'}", "order")
    for row in ("A", "B"):
        queue.enqueue(row, 0, row)
    queue.enqueue("base", 0, "base", retry_of=7)  # what _retry_later queues after Ctrl-C or preemption
    claimed = [queue.claim().user_attrs["row"] for _ in range(3)]
    assert claimed == ["base", "A", "B"]


def test_a_sweep_under_rows_claims_only_its_rows_and_stops_when_they_are_done(tmp_path):
    """--rows limits what a sweep's workers train, not only what it queues: another sweep's queued rows stay queued
    (a worker of `--rows B` once trained base seeds an earlier `--rows base` sweep had left), and a worker whose rows
    are done stops instead of waiting for them."""
    from ablate.ablations.results.storage.queue import Queue
    from ablate.ablations.study.definition import load_study
    from ablate.ablations.sweep.plan import Plan
    from ablate.ablations.sweep.worker import work
    from optuna.trial import TrialState

    storage = f"journal:{tmp_path / 'optuna.journal'}"
    queue = Queue.open(storage, "rows")
    for row in ("base", "A1", "B1"):
        queue.enqueue(row, 0, row)
    assert queue.claim(rows={"B1"}).user_attrs["row"] == "B1"
    assert queue.claim(rows={"B1"}) is None
    assert [t.user_attrs["row"] for t in queue.trials("WAITING")] == ["base", "A1"]
    plan = Plan(study=load_study("table3"), preset="smoke", seeds=[0], out=tmp_path / "out", storage=storage,
                name="rows", only=["B1"])  # fmt: skip
    queue.study.tell(queue.trials("RUNNING")[0].number, state=TrialState.FAIL)  # B1 finished (its outcome aside)
    assert work(plan, poll_s=0.01) == {}  # B1 done: base and A1 are not this sweep's to train
    assert [t.user_attrs["row"] for t in queue.trials("WAITING")] == ["base", "A1"]


@pytest.mark.parametrize(("text", "seconds"), [("2h30m", 9000), ("90m", 5400), ("45s", 45), ("3600", 3600)])
def test_after_its_timeout_a_worker_starts_no_trial_and_leaves_the_rest_queued(tmp_path, text, seconds):
    """--timeout (Optuna's optimize(timeout=...)): the coordinator's end travels to its workers as a time, so a
    worker started later does not get a fresh allowance; past it a worker claims nothing and stops."""
    import time

    from ablate.ablations.commands.sweep import build_parser, make_plan
    from ablate.ablations.results.storage.queue import Queue
    from ablate.ablations.sweep.runner import worker_argv
    from ablate.ablations.sweep.worker import work

    out = tmp_path / "out"
    ns = build_parser().parse_args(["table3", "--preset", "smoke", "--timeout", text, "--out", str(out)])
    plan = make_plan(ns)
    assert plan.stop_at - time.time() == pytest.approx(seconds, abs=5)
    argv = worker_argv(plan)
    assert float(argv[argv.index("--stop_at") + 1]) == plan.stop_at
    assert make_plan(build_parser().parse_args(["table3", "--preset", "smoke", *argv[1:]])).stop_at == plan.stop_at
    queue = Queue.open(plan.storage, plan.name)
    queue.enqueue("base", 0, "base")
    plan.stop_at = time.time() - 1
    assert work(plan, poll_s=0.01) == {}
    assert [t.user_attrs["row"] for t in queue.trials("WAITING")] == ["base"]


def _epoch_batches(sweeps, monkeypatch) -> int:
    from ablate.ablations.study.definition import load_study
    from ablate.data.batching import TokenBudgetBatchSampler
    from ablate.data.prepare import prepare

    monkeypatch.setenv("ABLATE_CACHE", sweeps.env["ABLATE_CACHE"])
    cfg = load_study(sweeps.study(STUDY)).run_config("long", "smoke").data
    split = prepare(cfg).split("train")
    return len(TokenBudgetBatchSampler(split.src_len, split.tgt_len, cfg.tokens_per_batch, seed=cfg.seed))


@pytest.mark.slow
def test_resuming_several_times_across_epoch_ends_ends_equal_to_one_run(sweeps, tmp_path, monkeypatch):
    epoch = _epoch_batches(sweeps, monkeypatch)
    last = 2 * epoch + 6
    whole = _train(sweeps, tmp_path / "whole", "--train.max_steps", str(last), *PAPER_SCHEDULE)
    assert whole.wait(timeout=300) == 0, whole.stderr.read()[-3000:]
    part = tmp_path / "part"
    # Stopped mid-epoch, then exactly at the first epoch's end, then in the second epoch: three resumes.
    for stop, resume in ((5, ()), (epoch, ("--resume",)), (epoch + 7, ("--resume",)), (last, ("--resume",))):
        # The paper's schedule, no budgets: a cooldown ends where max_steps is, and each stop here changes it.
        run = _train(sweeps, part, "--train.max_steps", str(stop), *PAPER_SCHEDULE, *resume)
        assert run.wait(timeout=300) == 0, run.stderr.read()[-3000:]

    a = json.loads((tmp_path / "whole" / "result.json").read_text(encoding="utf-8"))
    b = json.loads((part / "result.json").read_text(encoding="utf-8"))
    assert b["metrics"]["resumed_at_steps"] == [5, epoch, epoch + 7]
    assert [p["step"] for p in b["curves"]["train"]] == [p["step"] for p in a["curves"]["train"]]
    for x, y in zip(a["curves"]["train"], b["curves"]["train"], strict=True):
        assert y["loss"] == pytest.approx(x["loss"], rel=1e-9, abs=1e-12), (x, y)
    assert b["metrics"]["ppl"] == pytest.approx(a["metrics"]["ppl"], rel=1e-9)
