"""What a sweep says about its plan before it runs: study.json's `pipeline_check`, and the cost line of
`progress.cost_line` (the preset's measured base trial scaled by each row's steps and size)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from ablate.ablations.statistics.sequential import Sequential
from ablate.ablations.study.definition import load_study
from ablate.ablations.study.presets import PRESETS
from ablate.ablations.sweep.plan import Plan
from ablate.ablations.sweep.progress import CPU_SIZE_ALPHA, Work, cost_line

STUDIES = Path(__file__).resolve().parents[1] / "studies"


def plan(tmp_path, preset: str = "smoke") -> Plan:
    study = load_study(STUDIES / "sweep_rows.yaml")
    return Plan(study=study, preset=preset, seeds=[0, 1], out=tmp_path, storage="", name="t")


def test_study_json_says_when_the_preset_is_only_a_pipeline_check(tmp_path, monkeypatch):
    monkeypatch.setitem(PRESETS, "smoke", replace(PRESETS["smoke"], pipeline_check="60 steps: far from a plateau"))
    assert plan(tmp_path).describe()["pipeline_check"] == "60 steps: far from a plateau"
    assert plan(tmp_path, "tiny").describe()["pipeline_check"] is None


@pytest.fixture
def base() -> Work:
    """The work of the trial the smoke preset's measurement is of: Table 3's base row at that preset."""
    return Work.of(load_study("table3").run_config("base", "smoke"))


def test_the_cost_is_the_measured_base_trial_scaled_by_each_rows_steps_and_size(tmp_path, monkeypatch, base):
    monkeypatch.setitem(PRESETS, "smoke", replace(PRESETS["smoke"], base_trial_s=600.0, base_step_s=0.5))
    work = {
        "ok1": base,  # a base trial: 10 minutes
        "nan": Work(2 * base.total, base.params),  # twice the steps: 20 minutes
        "ok2": Work(base.steps, 3 * base.params, base.branches),  # three times the parameters: 3 ** 0.69 x 10 min
    }
    assert CPU_SIZE_ALPHA == 0.69  # 3 ** 0.69 = 2.134: 21m20s
    # Two seeds: 2 x (10 + 20 + 21.34) minutes, 1.7 core-hours; on 2 cores half that, never less than the longest.
    assert cost_line(plan(tmp_path), work, workers=2, cores=2) == (
        "cost: 6 trials, about 1.7 core-hours (base trial 10m00s on one core, measured); "
        "on this machine's 2 cores with 2 worker(s) about 51m20s"
    )
    assert cost_line(plan(tmp_path), work, workers=8, cores=2).endswith("with 8 worker(s) about 51m20s")
    assert cost_line(plan(tmp_path), work, workers=12, cores=16).endswith("about 21m20s")  # the longest trial
    assert cost_line(plan(tmp_path), work, workers=1, cores=None).endswith("; this machine's GPUs will differ")
    # One worker on 2 cores gets both as threads: from twice one core's speed (51m20s, the longest trial at 2x
    # being 10m40s) to one core's (1h42m40s, printed 1h42m).
    assert cost_line(plan(tmp_path), work, workers=1, cores=2).endswith(
        "with 1 worker(s) about 51m20s to 1h42m (each on 2 threads, as far as they speed it)"
    )


def test_a_step_time_alone_counts_the_training_steps(tmp_path, monkeypatch, base):
    monkeypatch.setitem(PRESETS, "smoke", replace(PRESETS["smoke"], base_trial_s=None, base_step_s=0.5))
    work = dict.fromkeys(("ok1", "nan", "ok2"), base)
    hours = 6 * 0.5 * base.total / 3600
    assert cost_line(plan(tmp_path), work, workers=1, cores=1).startswith(
        f"cost: 6 trials, about {hours:.1f} core-hours (base step 500 ms on one core, measured; training steps alone)"
    )


def test_a_preset_without_a_measurement_says_so_instead_of_guessing(tmp_path, monkeypatch, base):
    monkeypatch.setitem(PRESETS, "smoke", replace(PRESETS["smoke"], base_trial_s=None, base_step_s=None))
    assert cost_line(plan(tmp_path), {}, workers=2, cores=2) == (
        "cost: 6 trials; preset smoke has no measured step time, so no estimate of their cost"
    )


def test_a_resumed_sweeps_cost_leaves_out_the_trials_already_recorded(tmp_path, monkeypatch, base):
    from ablate.ablations.results import ledger
    from ablate.ablations.results.record import Record

    monkeypatch.setitem(PRESETS, "smoke", replace(PRESETS["smoke"], base_trial_s=600.0, base_step_s=0.5))
    the_plan = plan(tmp_path)
    work = dict.fromkeys(("ok1", "nan", "ok2"), base)
    for row, seed in (("ok1", 0), ("ok1", 1), ("nan", 0)):
        ledger.write_record(the_plan.out, Record(row=row, group=row, seed=seed))
    assert cost_line(the_plan, work, workers=1, cores=1, done=3) == (
        "cost: 6 trials, 3 done: the 3 left, about 0.5 core-hours (base trial 10m00s on one core, measured); "
        "on this machine's 1 core with 1 worker(s) about 30m00s"
    )


def test_trials_already_recorded_are_closed_when_the_sweep_starts_not_when_a_worker_reaches_them(tmp_path):
    """A study resumed from its records into a fresh storage (the archives in benchmarks/runs): the records' trials
    are finished before any worker runs, so the live counts and the ETA start right ("15 of 73 done", not "0")."""
    from ablate.ablations.results import ledger
    from ablate.ablations.results.record import Record
    from ablate.ablations.results.storage.queue import Queue
    from ablate.ablations.sweep.queueing import enqueue
    from ablate.ablations.sweep.trial import close_recorded

    the_plan = replace(plan(tmp_path), storage=f"journal:{tmp_path / 'optuna.journal'}")
    queue = Queue.open(the_plan.storage, the_plan.name)
    assert enqueue(the_plan, queue) == 6
    ledger.write_record(
        the_plan.out, Record(row="ok1", group="ok1", seed=1, state="complete", metrics={"bleu": 1.0, "ppl": 2.0})
    )
    ledger.write_record(the_plan.out, Record(row="nan", group="nan", seed=0, state="failed", reason="NaN loss"))
    assert close_recorded(the_plan, queue) == 2
    finished = {(t.user_attrs["row"], t.user_attrs["seed"]): t.state.name for t in queue.trials("COMPLETE", "FAIL")}
    assert finished == {("ok1", 1): "COMPLETE", ("nan", 0): "FAIL"}
    assert len(queue.trials("WAITING")) == 4 and close_recorded(the_plan, queue) == 0
    the_plan.retry_failed = True  # --retry_failed: a failed record is trained again, so it is not closed
    assert enqueue(the_plan, queue) == 1 and close_recorded(the_plan, queue) == 0


# --------------------------------------------------------------------------------------- the base's extra seeds
def test_the_base_gets_dunnetts_sqrt_k_seeds_by_default_and_a_study_can_set_them(tmp_path):
    study = load_study("table3")
    k = sum(row.group != "base" for row in study.rows)
    assert k == 20 and study.control_seeds == "auto"
    assert study.control_seed_count(2) == round(2 * 20**0.5) == 9  # Dunnett (1955): n_base / n_row = sqrt(k)
    assert study.control_seed_count(1) == 4
    assert replace(study, control_seeds=3).control_seed_count(2) == 3
    assert replace(study, control_seeds=1).control_seed_count(2) == 2  # never fewer than a row's
    no_base = load_study(STUDIES / "sweep_rows.yaml")  # no row in group 'base': nothing to give more seeds
    assert no_base.control_seed_count(2) == 2 and no_base.control_seed_counts(2) == {}
    modern = load_study("modern")  # the paper's base is the reference of the one-at-a-time rows' claims
    counts = modern.control_seed_counts(2)
    compared = modern.compared_with()["paper"]
    assert counts["paper"] == round(2 * len(compared) ** 0.5) and "M-swiglu" in compared
    assert modern.control_seed_counts(2, override=3) == dict.fromkeys(counts, 3)


def test_the_base_seeds_are_queued_once_seed_by_seed_longest_first_and_resume_like_any_trial(tmp_path):
    """Every row's seed 0 is queued before any seed 1 (a study stopped half-way has whole seeds to read), the big
    row first within a seed (its 3x steps must not start last), then the base's extra seeds. Queued again, nothing
    is added; a claimed extra seed that was never finished is still the one trial of its key."""
    from ablate.ablations.results.storage.queue import Queue
    from ablate.ablations.runtime.urls import storage_url
    from ablate.ablations.sweep.queueing import enqueue

    study = load_study("table3")
    only = ["base", "B1", "big"]
    out = tmp_path / "out"
    made = Plan(
        study=study,
        preset="smoke",
        seeds=[0, 1],
        control_seeds={"base": [0, 1, 2, 3]},
        out=out,
        storage=storage_url(None, out),
        name="ctl",
        only=only,
    )
    keys = [(row.name, seed) for row, seed in made.keys()]
    assert keys == [
        ("big", 0), ("base", 0), ("B1", 0), ("big", 1), ("base", 1), ("B1", 1), ("base", 2), ("base", 3)
    ]  # fmt: skip
    assert made.describe()["control_seeds"] == {"base": [0, 1, 2, 3]} and made.describe()["seeds"] == [0, 1]
    queue = Queue.open(made.storage, made.name)
    assert enqueue(made, queue) == 8
    assert enqueue(made, Queue.open(made.storage, made.name)) == 0  # a second coordinator adds nothing
    claimed = [queue.claim() for _ in range(7)]
    assert [(t.user_attrs["row"], t.user_attrs["seed"]) for t in claimed] == keys[:7]
    assert enqueue(made, Queue.open(made.storage, made.name)) == 0  # running trials are live: not queued again
    waiting = queue.trials("WAITING")
    assert [(t.user_attrs["row"], t.user_attrs["seed"]) for t in waiting] == [("base", 3)]
    assert waiting[0].params["seed"] == 3  # the seed axis spans the control seeds


def test_the_cost_line_names_what_the_base_s_extra_seeds_cost(tmp_path, monkeypatch, base):
    from ablate.ablations.sweep.progress import Eta

    monkeypatch.setitem(PRESETS, "smoke", replace(PRESETS["smoke"], base_trial_s=3600.0))
    study = load_study("table3")
    made = Plan(study=study, preset="smoke", seeds=[0, 1], control_seeds={"base": [0, 1, 2, 3, 4]}, out=tmp_path,
                storage="", name="t", only=["base", "B1"])  # fmt: skip
    line = cost_line(made, Eta.for_plan(made).work, workers=1, cores=1)
    assert line.startswith("cost: 7 trials, about ") and ", of which the controls' 3 extra seeds 3.0;" in line


def test_a_sweep_resumed_under_another_design_stops_with_one_line(tmp_path):
    """A preset that changed between versions (the tiny dev set grew from 1000 to 8000 sentences) must not mix the
    trials of two designs in one OUT; more seeds are no change of design."""
    import json

    from ablate.data.errors import AblateError

    first = plan(tmp_path)
    first.check_same_design()  # nothing there yet
    described = json.loads(json.dumps(first.describe(), default=str))
    (tmp_path / "study.json").write_text(json.dumps(described), encoding="utf-8")
    first.check_same_design()
    replace(first, seeds=[0, 1, 2]).check_same_design()  # a third seed extends the same design
    for row in described["rows"]:  # how a trial is computed is no change of design (a study run before, elsewhere)
        row["config"]["train"].update(compile=True, compile_scope="model", cudnn_attention=True, decoding="static")
    (tmp_path / "study.json").write_text(json.dumps(described), encoding="utf-8")
    first.check_same_design()
    for row in described["rows"]:
        row["config"]["data"]["builtin_valid"] = 123
    (tmp_path / "study.json").write_text(json.dumps(described), encoding="utf-8")
    with pytest.raises(AblateError) as err:
        first.check_same_design()
    message = str(err.value)
    now_valid = first.run_config(first.rows()[0], 0).data.builtin_valid
    assert "holds trials of another design" in message and f"data.builtin_valid 123 (now {now_valid})" in message
    assert message.endswith("pass --out for a new study, or --data.builtin_valid 123 to continue this one")


def test_a_preset_that_needs_more_seeds_than_the_study_asks_gets_them():
    """The tiny preset's seed noise needs 3 seeds a row for its intervals (docs/method/noise.md); table3 asks 2."""
    table3 = load_study("table3")
    assert table3.seeds == 2 and PRESETS["tiny"].seeds == 3
    assert table3.seed_count("tiny") == 3 and table3.control_seed_count(3) == 13  # round(3 sqrt(20))
    assert table3.seed_count("smoke") == 2  # a preset without its own: the study's
    assert replace(table3, seeds=5).seed_count("tiny") == 5  # a study asking for more keeps them
    assert table3.seed_count("tiny", 1) == 1  # --seeds decides


def test_a_sweep_of_some_rows_gives_the_base_sqrt_k_of_the_rows_it_runs():
    """--rows base,B1,C1,C4,D1 --seeds 2 compares 4 rows with the base: sqrt(4) x 2 = 4 base seeds, not sqrt(20) x 2."""
    study = load_study("table3")
    assert study.control_seed_counts(2, rows=["base", "B1", "C1", "C4", "D1"]) == {"base": 4}
    assert study.control_seed_counts(2) == {"base": 9}


def test_a_sequential_studys_cost_runs_from_every_row_at_min_seeds_to_every_row_at_max_seeds():
    from ablate.ablations.sweep.progress import sequential_range

    rows = ["base", "B1", "C1", "C4", "D1"]
    low, high = sequential_range({"base": rows[1:]}, 2, 6, dict.fromkeys(rows, 100.0))
    assert (low, high) == (100.0 * (4 * 2 + 4), 100.0 * (4 * 6 + 12))  # the base: sqrt(4) x 2 and sqrt(4) x 6
    untested = sequential_range({"base": ["B1"]}, 2, 6, dict.fromkeys(["base", "B1", "A2"], 100.0))
    assert untested == (100.0 * (2 + 2 + 1), 100.0 * (6 + 6 + 1))  # A2, which no claim tests: one seed at both ends


def test_the_cost_line_of_a_sequential_study_states_its_range(tmp_path, monkeypatch, base):
    monkeypatch.setitem(PRESETS, "smoke", replace(PRESETS["smoke"], base_trial_s=600.0, base_step_s=0.5))
    the_plan = plan(tmp_path)
    the_plan.study = replace(the_plan.study, allocation="sequential", min_seeds=2, max_seeds=4)
    the_plan.allocation = Sequential(2, 4)
    work = dict.fromkeys(["ok1", "nan", "ok2"], base)  # no base row: every row at 2 seeds, or at 4
    assert (
        "; sequential: from 1.0 (every row stopped at min_seeds 2), 1.5 (every row decided at 3 seeds) to 2.0 "
        "core-hours (every row open to " in (cost_line(the_plan, work, workers=2, cores=2))
    )
    the_plan.only = ["ok1"]  # a sweep over one of the rows of a study that began the others: the range is the study's
    (tmp_path / "records").mkdir()
    (tmp_path / "records" / "nan__seed0.json").write_text("{}")
    line = cost_line(the_plan, work, workers=2, cores=2)
    assert line.startswith("cost: 2 trials") and "; sequential: from 1.0" not in line
    assert "; sequential (the study's 2 rows): from 0.7 (every row stopped" in line  # ok1 and nan; ok2 never began


def test_a_rows_subset_says_which_claims_it_leaves_untested_and_what_they_need(capsys):
    """`ablate studies STUDY --rows ...` (and a sweep's header): a claim is tested when every comparison's row and
    reference are in the subset; partly when some are; otherwise untested, with the rows it still needs."""
    from ablate.ablations.cli import main
    from ablate.ablations.study.definition import coverage_summary

    study = load_study("modern")
    coverage = {claim.id: (tested, missing) for claim, tested, missing in study.claim_coverage(["base", "E1"])}
    assert coverage["rope-matches-sinusoids"] == (1, ["M-rope", "paper"])  # E1 against the modern base: one of two
    assert coverage["gqa-matches-mha"] == (0, ["M-gqa2", "paper"])
    assert coverage_summary(study, [row.name for row in study.rows]) is None  # the whole study tests every claim

    assert main(["studies", "table3", "--rows", "base,B1"]) == 0
    out = capsys.readouterr().out
    assert "--rows base,B1 test 0 of 8 claims;" in out
    assert "B-small-dk (partly, needs B2)" in out and "big-better (needs big)" in out
    assert main(["studies", "table3", "--rows", "base,Z"]) == 2
    captured = capsys.readouterr()
    assert "--rows: the study has no row 'Z'; rows are base," in captured.err
    assert "ok" not in captured.out  # nothing half-printed


def test_a_changed_allocation_is_refused_like_a_changed_preset(tmp_path):
    """The seeds' design is part of a study's design: resumed at another max_seeds (its looks would spend another
    error) or with --seeds (it would become a fixed study), one line says what it ran with; more seeds of a fixed
    study, and the same sequential design, resume."""
    import json

    from ablate.ablations.statistics.sequential import Sequential
    from ablate.data.errors import AblateError

    sequential = replace(plan(tmp_path), allocation=Sequential(2, 3))
    (tmp_path / "study.json").write_text(json.dumps(json.loads(json.dumps(sequential.describe(), default=str))))
    sequential.check_same_design()
    for changed, said, keep in (
        (replace(sequential, allocation=Sequential(2, 5)), "min_seeds 2, max_seeds 3 (now 2, 5)", "--max_seeds 3"),
        (replace(sequential, allocation=None), "the sequential design (now a fixed one)", "--allocation sequential"),
    ):
        with pytest.raises(AblateError) as err:
            changed.check_same_design()
        assert f"holds a study of another design: its seeds were allocated by {said}" in str(err.value)
        assert keep in str(err.value) and "\n" not in str(err.value)
    fixed = plan(tmp_path)
    (tmp_path / "study.json").write_text(json.dumps(json.loads(json.dumps(fixed.describe(), default=str))))
    replace(fixed, seeds=[0, 1, 2]).check_same_design()  # more seeds: the same fixed design
    with pytest.raises(AblateError, match="allocated by the fixed design \\(now the sequential one\\)"):
        replace(fixed, allocation=Sequential(2, 3)).check_same_design()
