"""`ablate replay OUT`: a finished fixed-design study fed to the sequential policy (`reports.replay`)."""

from __future__ import annotations

import reports_fixtures as fx
from ablate.reports.replay import replay, summary

CLAIMS = [
    {
        "id": "shallow-hurts",
        "text": "One layer is worse",
        "compare": [{"row": "C1", "metric": "bleu", "expect": "lower"}],
    },
    {"id": "same-pos", "text": "Learned positions", "compare": [{"row": "E1", "metric": "bleu", "expect": "lower"}]},
]


def test_a_replay_decides_a_row_on_its_third_seed_and_reports_its_cost_and_verdicts(tmp_path):
    """Two seeds give a row's own spread one degree of freedom, so no row is decided on them (`DECIDING_SEEDS`): the
    first look only stops rows for futility, and a large effect is decided at the second."""
    rows = [r for r in fx.TABLE3_ROWS if r[0] in ("base", "C1", "E1")]
    seed_rates = {("E1", s): 0.30 + 0.02 * s for s in range(3)}  # E1: no effect; C1 (0.60 against 0.30): a large one
    out = fx.make_study(tmp_path / "out", rows=rows, seeds=(0, 1, 2), meta={"claims": CLAIMS}, seed_rates=seed_rates,
                        storage=None)  # fmt: skip
    result = replay(out, min_seeds=2, n_samples=100)
    first = result.looks[0]
    assert first.seeds == {"base": 3, "C1": 2, "E1": 2}  # every row at min_seeds, the base at round(sqrt(2) x 2)
    assert first.rows["C1"].state == "open" and "conditional power" in first.rows["C1"].why
    second = result.looks[1]
    assert second.seeds["C1"] == 3 and second.rows["C1"].state == "decided"
    assert result.full_trials == 9 and len(result.trials) <= 9 and result.hours <= result.full_hours
    assert result.verdicts["shallow-hurts/C1/bleu"] == ("reproduced", "reproduced")
    text = summary(result)
    assert "O'Brien-Fleming" in text and f"{len(result.trials)} of 9 trials" in text


def test_two_readers_of_the_same_trials_take_the_same_decisions(tmp_path):
    """What two workers on one storage rely on: the looks are a function of the records alone (the bootstrap's
    resamples are fixed), so whoever looks first, every worker asks the policy for the same seeds."""
    rows = [r for r in fx.TABLE3_ROWS if r[0] in ("base", "C1", "E1")]
    out = fx.make_study(tmp_path / "out", rows=rows, seeds=(0, 1, 2), meta={"claims": CLAIMS}, storage=None)
    first, second = replay(out, min_seeds=2, n_samples=100), replay(out, min_seeds=2, n_samples=100)
    assert first.looks == second.looks and first.trials == second.trials


def test_a_replay_takes_each_comparisons_reference_row_as_a_control(tmp_path):
    """A claim against another row than the base (the modern study's E2 against E1) makes that row a control, as a
    sweep makes it: the replay gives it its share, and max_seeds comes from the tested rows, not a control's."""
    rows = [r for r in fx.TABLE3_ROWS if r[0] in ("base", "C1", "E1", "D1")]
    claims = [*CLAIMS[:1], {"id": "e", "text": "e", "compare": [{"row": "D1", "against": "E1", "metric": "bleu",
                                                                   "expect": "lower"}]}]  # fmt: skip
    out = fx.make_study(tmp_path / "out", rows=rows, seeds=(0, 1, 2), meta={"claims": claims}, storage=None)
    result = replay(out, min_seeds=2, n_samples=100)
    assert result.max_seeds == 3 and result.looks[0].seeds == {"base": 2, "C1": 2, "E1": 2, "D1": 2}
