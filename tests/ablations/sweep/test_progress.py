"""The sweep's ETA (`progress.Eta`): every remaining trial weighed by its steps and its row's cost per step, learnt
from finished and running trials, with a size model for rows not seen yet; and Lightning's `srun` hint kept out of
a local run's log.

The estimator is fed RowStatus lists as `progress.collect` builds them from a storage, with the clock given."""

from __future__ import annotations

import os
import shutil
import warnings

import pytest
from ablate.ablations.sweep.progress import Eta, RowStatus, Work, render, summary_line

P = 100_000  # parameters of a base-sized row


def done(row: str, seed: int = 0, steps: int = 60, wall: float = 60.0, startup: float = 0.0) -> RowStatus:
    return RowStatus(row, seed, "complete", step=steps, wall_s=wall, startup_s=startup, started_at=0.0)


def pending(row: str, seed: int = 0) -> RowStatus:
    return RowStatus(row, seed, "pending")


def running(row: str, step: int | None, started_at: float, seed: int = 0, max_steps: int = 60) -> RowStatus:
    return RowStatus(row, seed, "running", step=step, max_steps=max_steps, started_at=started_at)


def test_a_row_with_three_times_the_steps_weighs_three_times():
    eta = Eta({"base": Work(steps=60, size=P), "big": Work(steps=180, size=P)})
    rows = [done("base"), pending("base", 1), pending("big")]

    left = eta.estimate(rows, now=1000.0)

    assert left[("base", 1)] == pytest.approx(60.0)  # 1 s/step measured on base seed 0
    assert left[("big", 0)] == pytest.approx(3 * 60.0)
    assert eta.total(rows, workers=1, now=1000.0) == pytest.approx(240.0)


def test_without_the_rows_work_every_trial_counts_the_same_as_before():
    """What `ablate status` gives it (no steps or sizes per row): the median wall time of the finished trials."""
    rows = [done("base", wall=50.0), done("A1", wall=70.0), pending("big"), pending("C1")]
    assert Eta().total(rows, workers=1, now=0.0) == pytest.approx(120.0)


def test_the_start_up_of_a_workers_first_trial_is_not_a_cost_per_step():
    eta = Eta({"base": Work(60, P)})
    rows = [done("base", wall=80.0, startup=20.0), pending("base", 1)]
    assert eta.estimate(rows, now=0.0)[("base", 1)] == pytest.approx(60.0)


def test_a_row_not_measured_yet_is_scaled_by_its_parameter_count():
    eta = Eta({"base": Work(60, P), "A1": Work(60, int(1.2 * P)), "C3": Work(60, 2 * P)})
    rows = [done("base"), done("A1", wall=72.0), pending("C3")]

    # base and A1 span 1.2x < 1.5x in parameters: cost in proportion to parameters, c from both (1 s per P).
    assert eta.estimate(rows, now=0.0)[("C3", 0)] == pytest.approx(2 * 60.0)


def test_the_size_models_exponent_is_fitted_once_the_measured_rows_span_sizes():
    eta = Eta({"C1": Work(60, P), "base": Work(60, 4 * P), "big": Work(180, 16 * P)})
    # Four times the parameters took twice the time per step: alpha = 0.5, so 16x parameters take 4x.
    rows = [done("C1", wall=30.0), done("base", wall=60.0), pending("big")]

    assert eta.estimate(rows, now=0.0)[("big", 0)] == pytest.approx(180 * 0.5 * 4)


def test_the_fitted_exponent_never_makes_a_bigger_row_cheaper():
    eta = Eta({"C1": Work(60, P), "base": Work(60, 4 * P), "big": Work(60, 16 * P)})
    rows = [done("C1", wall=60.0), done("base", wall=40.0), pending("big")]  # noise: the bigger one was faster

    # alpha clipped to 0: the big row costs the (geometric) mean of the measured ones, not less.
    assert eta.estimate(rows, now=0.0)[("big", 0)] == pytest.approx((60.0 * 40.0) ** 0.5)


def test_a_running_trials_pace_is_timed_between_validations_this_view_saw_land():
    eta = Eta({"base": Work(60, P), "A1": Work(60, P)})
    started = 0.0
    # Seen before its first validation, then steps 10 and 20 land 15 s apart: 1.5 s/step, whatever the start-up.
    for now, step in ((5.0, None), (20.0, 10), (35.0, 20)):
        eta.observe([running("base", step, started), pending("A1")], now=now)

    left = eta.estimate([running("base", 20, started), pending("A1")], now=40.0)

    assert left[("base", 0)] == pytest.approx(max(1.5 * 60 - 40.0, 1.5 * 40 - 5.0))
    assert left[("A1", 0)] == pytest.approx(1.5 * 60)  # same size: the running row's pace


def test_a_step_first_seen_mid_interval_is_timed_from_the_trials_start():
    """A view started while the trial ran (or `ablate status`) cannot tell when its step landed: the pace is taken
    from the trial's start, an upper bound."""
    eta = Eta({"base": Work(60, P)})
    left = eta.estimate([running("base", 30, started_at=0.0)], now=45.0)
    assert left[("base", 0)] == pytest.approx(1.5 * 30)


def test_a_resumed_trials_pace_counts_only_the_steps_it_trained_itself():
    """A trial stopped at step 40 and resumed from its checkpoint: 10 s later it validates at step 50. Its pace is
    10 steps in 10 s, not 50 in 10 (that once gave a five-times-too-early ETA on every study resumed across
    sessions); before its first validation it shows the step it resumed from."""
    eta = Eta({"base": Work(60, P)})
    earlier = RowStatus("base", 0, "stopped", step=40, max_steps=60)
    resumed = RowStatus("base", 0, "running", step=50, max_steps=60, started_at=100.0, resumed_from=earlier)
    assert eta.estimate([resumed], now=110.0)[("base", 0)] == pytest.approx(1.0 * 10)  # 1 s/step, 10 steps left

    fresh = Eta({"base": Work(60, P)})
    just_resumed = RowStatus("base", 0, "running", step=40, max_steps=60, started_at=100.0, resumed_from=earlier)
    left = fresh.estimate([done("base", 1, wall=120.0), just_resumed], now=105.0)  # 2 s/step from seed 1
    assert left[("base", 0)] == pytest.approx(2.0 * 20 - 5.0)  # its 20 steps left at the row's rate, less 5 s run


def test_a_trial_queued_again_after_a_stop_is_left_only_the_steps_after_its_checkpoint():
    eta = Eta({"base": Work(60, P)})
    queued = RowStatus("base", 1, "pending", step=40, resumed_from=RowStatus("base", 1, "stopped", step=40))
    assert eta.estimate([done("base"), queued], now=0.0)[("base", 1)] == pytest.approx(1.0 * 20)  # not 60


def test_a_step_is_timed_when_it_landed_where_the_worker_says_so():
    """`ablate status` looks once, long after the step landed: the worker's time of the validation gives the pace, not
    the look's. A trial resumed at step 40 validated step 50 at 10 s; looked at 15 s after its start, it paces at
    1 s/step, not 1.5 (on a live study, with the step landed a minute after the resume and looked at four minutes
    after, that read as 39 hours left of a 15-hour study)."""
    eta = Eta({"base": Work(60, P)})
    earlier = RowStatus("base", 0, "stopped", step=40, max_steps=60)
    resumed = RowStatus("base", 0, "running", step=50, max_steps=60, started_at=100.0, validated_at=110.0,
                        resumed_from=earlier)  # fmt: skip
    # 10 steps left at 1 s/step, less the 5 s since step 50 landed (timed by the look: 1.5 s/step, 15 s left).
    assert eta.estimate([resumed], now=115.0)[("base", 0)] == pytest.approx(1.0 * 10 - 5.0)


def test_what_a_trial_costs_after_its_last_step_is_learnt_from_the_trials_this_view_watched():
    eta = Eta({"base": Work(60, P), "A1": Work(60, P)})
    for now, step in ((0.0, None), (10.0, 10), (20.0, 20)):  # paced at 1 s/step
        eta.observe([running("base", step, 0.0), pending("A1")], now=now)
    # ... yet the whole trial took 90 s for 60 steps: the final full validation and the test set came after.
    eta.observe([RowStatus("base", 0, "complete", step=60, wall_s=90.0, started_at=0.0), pending("A1")], now=95.0)
    for now, step in ((100.0, None), (110.0, 10), (120.0, 20)):  # A1 runs at the same pace
        eta.observe([done("base", wall=90.0), running("A1", step, 100.0)], now=now)

    left = eta.estimate([done("base", wall=90.0), running("A1", 20, 100.0), pending("A1", 1)], now=120.0)

    assert left[("A1", 1)] == pytest.approx(90.0)  # base finished: its own whole time per step
    assert left[("A1", 0)] == pytest.approx(1.5 * 60 - 20.0)  # the pace x 1.5, less the 20 s it has run


def test_a_trial_counts_its_main_run_and_its_budgets_branches():
    """Budget T/2 with a cooldown of 0.2 at T = 60: the branch leaves the main run at step 24 and ends at 30, so a
    trial trains 66 steps, and a trial in its branch at step 27 has trained 63 of them."""
    eta = Eta({"base": Work(60, P, branches=((24, 30),))})
    assert eta.work["base"].total == 66
    rows = [done("base", wall=66.0), pending("base", 1)]
    assert eta.estimate(rows, now=0.0)[("base", 1)] == pytest.approx(66.0)  # 1 s per step trained

    branch = RowStatus("base", 2, "running", step=27, max_steps=30, started_at=0.0, budget="T/2")
    assert eta.estimate([branch], now=126.0)[("base", 2)] == pytest.approx(2 * 3)  # paced at 2 s/step: 3 left
    assert eta.estimate([*rows, branch], now=126.0)[("base", 2)] == pytest.approx(2 * 3)


def test_the_live_view_names_the_branch_a_trial_is_in():
    eta = Eta({"base": Work(3200, P, branches=((1280, 1600),))})
    rows = [
        RowStatus("base", 0, "running", step=1550, max_steps=1600, started_at=0.0, budget="T/2"),
        running("base", 800, started_at=0.0, seed=1, max_steps=3200),
    ]
    steps = next(c for c in render(rows, 1, "t", eta).columns if c.header == "step")
    assert list(steps.cells) == ["T/2 1550/1600", "800/3200"]


def test_the_time_left_is_spread_over_the_workers_but_never_below_the_longest_trial():
    eta = Eta({"base": Work(60, P), "big": Work(300, P)})
    base = [done("base", seed=9)] + [pending("base", s) for s in range(4)]
    assert eta.total(base, workers=2, now=0.0) == pytest.approx(4 * 60 / 2)
    assert eta.total([*base, pending("big")], workers=8, now=0.0) == pytest.approx(300.0)


def test_no_eta_before_anything_was_measured_and_none_once_all_is_done():
    eta = Eta({"base": Work(60, P)})
    assert eta.total([pending("base"), running("base", None, 0.0, seed=1)], workers=1, now=5.0) is None
    assert summary_line([pending("base")], 1, eta) == "0/1 done, 0 running, 1 pending, 0 failed"
    assert summary_line([done("base"), pending("base", 1)], 1, eta).endswith(", ETA 1m00s")
    assert summary_line([done("base")], 1, eta) == "1/1 done, 0 running, 0 pending, 0 failed"


def test_table3s_big_row_weighs_three_times_the_steps_and_its_size(tmp_path):
    """The rows' work as the sweep builds it from the plan: the big row has 3x the base's steps and more
    parameters, so a pending big trial counts 3 x (its parameters / the base's) base trials."""
    from ablate.ablations.study.definition import load_study
    from ablate.ablations.sweep.plan import Plan

    plan = Plan(study=load_study("table3"), preset="smoke", seeds=[0, 1], out=tmp_path, storage="", name="t")
    eta = Eta.for_plan(plan)
    base, big = eta.work["base"], eta.work["big"]
    assert big.steps == 3 * base.steps and big.params > 3 * base.params

    left = eta.estimate([done("base", steps=base.steps), pending("base", 1), pending("big")], now=0.0)

    assert left[("big", 0)] / left[("base", 1)] == pytest.approx(3 * big.params / base.params)


# ------------------------------------------------------------------------------------------- Lightning's srun hint
def test_lightnings_srun_hint_is_kept_out_of_a_local_run_but_not_out_of_a_slurm_job(tmp_path, monkeypatch):
    """Lightning warns whenever an `srun` command exists and this process is not an srun task. A local run (no
    SLURM job) is local on purpose; inside a job a missing srun is the mistake the hint is for. The hint is
    Lightning's own (SLURMEnvironment.detect), checked with an `srun` on PATH (Lightning looks for nothing more)."""
    from ablate.ablations.training.trainer import quiet_libraries
    from lightning_fabric.plugins.environments import SLURMEnvironment

    if shutil.which("srun") is None:
        fake = tmp_path / "srun"
        fake.write_text("#!/bin/sh\nexit 0\n")
        fake.chmod(0o755)
        monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    for var in [v for v in os.environ if v.startswith("SLURM_")]:
        monkeypatch.delenv(var)

    def hints() -> list[str]:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            quiet_libraries()
            SLURMEnvironment.detect()
        return [str(w.message) for w in caught if "srun" in str(w.message)]

    assert hints() == []
    monkeypatch.setenv("SLURM_JOB_ID", "123")  # inside an allocation, not started by srun
    (hint,) = hints()
    assert hint.startswith("The `srun` command is available on your system but is not used")


# ----------------------------------------------------------------------------------------- what a trial publishes
def test_a_trials_progress_names_the_branch_it_trains_and_keeps_it_off_the_learning_curve():
    """ProgressToStorage as train.py drives it: `budget` set on the instance before a branch's fit. The branch's
    steps are the main run's too, so only the main run's BLEU goes into Optuna's intermediate values."""
    from types import SimpleNamespace

    from ablate.ablations.training.callbacks import ProgressToStorage

    class Storage:
        def __init__(self) -> None:
            self.attrs, self.curve = [], {}

        def set_trial_user_attr(self, trial_id, key, value):
            self.attrs.append(value)

        def set_trial_intermediate_value(self, trial_id, step, value):
            self.curve[step] = value

    callback = ProgressToStorage("journal:unused", "t", 0)
    callback._study = storage = Storage()
    for budget, max_steps, bleu in ((None, 60, 10.0), ("T/2", 30, 12.0)):
        trainer = SimpleNamespace(is_global_zero=True, sanity_checking=False, max_steps=max_steps)
        module = SimpleNamespace(last_validation={"step": 30, "bleu": bleu, "ppl": 5.0}, budget=budget)
        callback.on_validation_end(trainer, module)

    assert [(p["budget"], p["max_steps"], p["bleu"]) for p in storage.attrs] == [(None, 60, 10.0), ("T/2", 30, 12.0)]
    assert storage.curve == {30: 10.0}


def test_the_view_reads_the_branch_of_a_running_trial_only():
    from datetime import datetime
    from types import SimpleNamespace

    from ablate.ablations.sweep.progress import collect

    def trial(number: int, state: str, seed: int):
        progress = {"step": 27, "max_steps": 30, "bleu": 1.0, "budget": "T/2"}
        return SimpleNamespace(number=number, state=SimpleNamespace(name=state), system_attrs={},
                               user_attrs={"row": "base", "seed": seed, "progress": progress},
                               datetime_start=datetime.fromtimestamp(0.0), datetime_complete=None)  # fmt: skip

    rows = collect([trial(0, "RUNNING", 0), trial(1, "COMPLETE", 1)], [("base", 0), ("base", 1)])
    assert [(r.state, r.budget, r.max_steps) for r in rows] == [("running", "T/2", 30), ("complete", None, 30)]


def test_a_rows_parameters_are_counted_only_for_a_row_not_measured_yet():
    """Counting builds the model (seconds with torch's import): `ablate status` on a study whose rows all ran must
    not pay it, and a row not measured yet is still sized by its count."""

    def never() -> int:
        raise AssertionError("counted the parameters of a row already measured")

    measured = Eta({"base": Work(60, never), "A1": Work(60, never)})
    assert measured.estimate([done("base"), done("A1"), pending("A1", 1)], now=0.0)[("A1", 1)] == pytest.approx(60.0)

    counted = []
    sized = Eta(
        {"base": Work(60, lambda: counted.append("base") or P), "C3": Work(60, lambda: counted.append("C3") or 2 * P)}
    )
    assert sized.estimate([done("base"), pending("C3")], now=0.0)[("C3", 0)] == pytest.approx(120.0)
    assert sorted(counted) == ["C3", "base"]  # each counted once, though asked for at every poll
    sized.estimate([done("base"), pending("C3")], now=0.0)
    assert sorted(counted) == ["C3", "base"]
