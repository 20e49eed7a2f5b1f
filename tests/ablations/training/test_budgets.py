"""Two budgets from one run (train.budgets, train.cooldown_frac): the cooldown's schedule, a branch that equals a
separate run trained to its budget, and a run stopped inside a branch that resumes it and finishes it once."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from ablate.lightning_modules.config import TrainConfig, cooldown_factor, fork_step, paper_lr

STUDY = "sweep_interrupt.yaml"
STEPS = 80
"""The whole run; its half budget is 40 steps, branched at step 32 (cooldown_frac 0.2 of 40 = 8 steps)."""
BUDGET = ["--train.budgets", "[0.5]", "--train.cooldown_frac", "0.2", "--train.val_every", "8"]


def test_the_cooldown_falls_linearly_to_zero_over_the_last_fraction_and_leaves_equation_3_before_it():
    assert [cooldown_factor(k, 100, 0.2) for k in (1, 50, 80)] == [1.0, 1.0, 1.0]
    assert [round(cooldown_factor(k, 100, 0.2), 6) for k in (81, 90, 100)] == [
        round(1 - 1 / 21, 6),
        round(1 - 10 / 21, 6),
        round(1 - 20 / 21, 6),
    ]
    assert cooldown_factor(101, 100, 0.2) == 0.0  # the update after the last would have a learning rate of zero
    assert all(cooldown_factor(k, 100, 0.0) == 1.0 for k in range(1, 101))  # the paper's schedule by default
    assert fork_step(100, 0.5, 0.2) == 40 and fork_step(3200, 0.5, 0.2) == 1280 and fork_step(100, 0.5, 0.0) == 50


def test_the_modules_scheduler_applies_the_cooldown_on_top_of_equation_3():
    import torch
    from ablate.lightning_modules.config import ModelConfig
    from ablate.lightning_modules.module import TranslationModule

    model = ModelConfig(vocab_size=50, n_layers=1, d_model=16, d_ff=32, n_heads=2, pad_id=0)
    train = TrainConfig(max_steps=100, warmup_steps=10, cooldown_frac=0.2)
    module = TranslationModule(model, train, bos_id=1, eos_id=2)
    config = module.configure_optimizers()
    optimizer, scheduler = config["optimizer"], config["lr_scheduler"]["scheduler"]
    rates = []
    for _ in range(100):
        rates.append(optimizer.param_groups[0]["lr"])  # the rate update k+1 uses
        optimizer.step()
        scheduler.step()
    assert rates[49] == pytest.approx(paper_lr(50, 16, 10))  # before the cooldown: equation (3) itself
    assert rates[80] == pytest.approx(paper_lr(81, 16, 10) * (1 - 1 / 21))
    assert rates[99] == pytest.approx(paper_lr(100, 16, 10) / 21)
    assert all(b < a for a, b in zip(rates[80:], rates[81:], strict=False))
    assert torch.is_tensor(next(module.parameters()))


def _train(sweeps, out: Path, steps: int, *args: str) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "ablate.ablations.cli", "train", "--study", str(sweeps.study(STUDY)), "--row", "long",
           "--preset", "smoke", "--out", str(out), "--train.max_steps", str(steps), "--train.cooldown_frac", "0.2",
           "--train.val_every", "8", *args]  # fmt: skip
    return subprocess.Popen(cmd, cwd=Path(__file__).resolve().parents[3], env=sweeps.env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip


def _result(out: Path) -> dict:
    return json.loads((out / "result.json").read_text(encoding="utf-8"))


def _same_model(a: dict, b: dict) -> None:
    """Same batches, dropout masks and schedule on one CPU thread: the same numbers to the last bit (the tolerance
    absorbs a float printed and parsed back; one update out of place moves the perplexity by far more)."""
    for key in ("ppl", "bleu", "test_bleu", "ppl_swapped"):
        assert b["metrics"][key] == pytest.approx(a["metrics"][key], rel=1e-9), key
    assert b["hypotheses"] == a["hypotheses"] and b["test_hypotheses"] == a["test_hypotheses"]


@pytest.fixture(scope="module")
def budget_runs(sweeps, tmp_path_factory) -> dict[str, Path]:
    """One run with a half budget, and a separate run trained to that half budget."""
    root = tmp_path_factory.mktemp("budgets")
    runs = {"whole": _train(sweeps, root / "whole", STEPS, "--train.budgets", "[0.5]"),
            "half": _train(sweeps, root / "half", STEPS // 2)}  # fmt: skip
    for name, proc in runs.items():
        assert proc.wait(timeout=300) == 0, (name, proc.stderr.read()[-3000:])
    return {name: root / name for name in runs}


@pytest.mark.slow
def test_a_branch_equals_a_separate_run_trained_to_its_budget(budget_runs):
    whole, half = _result(budget_runs["whole"]), _result(budget_runs["half"])
    (branch,) = whole["budgets"]
    assert branch["fraction"] == 0.5 and branch["steps"] == STEPS // 2 == half["metrics"]["steps"]
    _same_model(half, branch)
    assert whole["metrics"]["steps"] == STEPS and whole["metrics"]["ppl"] != pytest.approx(half["metrics"]["ppl"])
    assert branch["metrics"]["source_ppl_ratio"] > 0  # the final validation's source check ran on the branch too


@pytest.mark.slow
def test_a_run_stopped_inside_its_branch_resumes_the_branch_and_finishes_it_once(sweeps, budget_runs, tmp_path):
    out = tmp_path / "part"
    branch_ckpt = out / f"b{STEPS // 2}" / "checkpoints" / "last.ckpt"
    stopped = _train(sweeps, out, STEPS, "--train.budgets", "[0.5]")
    # The branch's own checkpoint appears at its first validation after the fork (step 40 is its last: stop earlier
    # by signalling as soon as the branch has begun; the branch's resume point is whichever checkpoint it wrote).
    assert sweeps.wait_for(lambda: branch_ckpt.exists() or stopped.poll() is not None, 240)
    stopped.send_signal(signal.SIGINT)
    _, err = stopped.communicate(timeout=120)
    if stopped.returncode == 0:  # the branch finished before the signal landed: nothing to test on this machine
        pytest.skip("the branch finished before Ctrl-C reached it")
    assert stopped.returncode == 130, err[-3000:]
    assert "Traceback" not in err and "--resume" in err, err[-3000:]
    resumed = _train(sweeps, out, STEPS, "--train.budgets", "[0.5]", "--resume")
    _, err = resumed.communicate(timeout=300)
    assert resumed.returncode == 0, err[-3000:]
    assert "[long-s0] step" not in err  # the main run had finished: only the branch trained again
    assert "[long-s0 T/2] step" in err  # its lines name the trial and the budget
    assert re.search(rf"\[long-s0 T/2\] resuming at step \d+ of {STEPS // 2} from ", err), err[-2000:]
    part, whole = _result(out), _result(budget_runs["whole"])
    _same_model(whole["budgets"][0], part["budgets"][0])
    _same_model(whole, part)
    resumed_at = part["budgets"][0]["metrics"]["resumed_at_steps"]
    assert len(resumed_at) == 1 and STEPS * 2 // 5 <= resumed_at[0] < STEPS // 2  # inside the branch, once
    assert part["metrics"]["steps"] == STEPS and part["budgets"][0]["steps"] == STEPS // 2


@pytest.mark.slow
def test_a_sweep_killed_inside_a_branch_resumes_it_and_records_the_trial_once(sweeps, budget_runs, tmp_path):
    """SIGKILL (no chance to save) while the half budget's branch trains; the rerun of the same sweep command finds
    the dead worker, resumes the branch from its own checkpoint (the main run is not trained again), and writes one
    record with both budgets, equal to the uninterrupted run's."""
    from optuna.trial import TrialState

    out, log = tmp_path / "out", tmp_path / "killed.log"
    args = ("--set", f"train.max_steps={STEPS}", "--set", "train.val_every=8", "--set", "train.budgets=[0.5]",
            "--set", "train.cooldown_frac=0.2", "--set", "train.keep_checkpoints=last")  # fmt: skip
    trial = out / "trials" / "long__seed0"
    branch_ckpt = trial / f"b{STEPS // 2}" / "checkpoints" / "last.ckpt"
    proc = sweeps.start(STUDY, out, *args, log=log)
    try:
        # The branch's first checkpoint past its fork (step 40 is the branch's end; it validates at 40 only, so wait
        # for its copy of the fork and then a little training).
        assert sweeps.wait_for(lambda: branch_ckpt.exists() or proc.poll() is not None, 240)
    finally:
        sweeps.kill(proc)
    if (out / "records" / "long__seed0.json").exists():
        pytest.skip("the trial finished before the kill reached it")
    assert (trial / "result.json").exists()  # the main run had finished: its result waits for the branch

    rerun = sweeps.run(STUDY, out, *args)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    records = sweeps.records(out)
    record = records["long__seed0"]
    assert record["metrics"]["steps"] == STEPS and record["metrics"]["resumed_at_steps"] in ([], [STEPS])
    (budget,) = record["budgets"]
    assert budget["steps"] == STEPS // 2 and (out / budget["hypotheses"]).is_file()
    whole = _result(budget_runs["whole"])
    assert budget["metrics"]["bleu"] == pytest.approx(whole["budgets"][0]["metrics"]["bleu"], rel=1e-9)
    assert budget["metrics"]["ppl"] == pytest.approx(whole["budgets"][0]["metrics"]["ppl"], rel=1e-9)
    trials = [t for t in sweeps.trials(out, "sweep-interrupt-smoke") if t.state == TrialState.COMPLETE]
    assert sorted(t.user_attrs["row"] for t in trials) == ["long", "wide"]  # each once
    # The live view named the branch's phase. The retried trial trained only the branch (the main run had finished
    # in the killed one), and the branch's BLEU at its end, step 40, a step of the main run's curve too, stayed off
    # Optuna's learning curve: that curve is the main run's alone.
    long = next(t for t in trials if t.user_attrs["row"] == "long")
    assert long.user_attrs["progress"]["budget"] == "T/2" and long.user_attrs["progress"]["max_steps"] == STEPS // 2
    assert long.intermediate_values == {}
