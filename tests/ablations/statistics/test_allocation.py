"""The sequential policy (`ablations.statistics.sequential.policy`): seeds only for open rows, the control's sqrt(k)
share, and nothing queued twice when asked again."""

from __future__ import annotations

import pytest
from ablate.ablations.statistics.sequential import policy
from ablate.ablations.study.definition import parse_study
from ablate.data.errors import AblateError

CONTROLS = {"base": ["B1", "C1", "C4", "D1"]}
START = dict.fromkeys(["base", "B1", "C1", "C4", "D1"], 0)


def test_every_row_starts_at_min_seeds_and_the_base_at_sqrt_k_of_them():
    assert policy(START, {}, CONTROLS, min_seeds=2, max_seeds=6) == {"B1": 2, "C1": 2, "C4": 2, "D1": 2, "base": 4}


def test_only_an_open_row_gets_a_seed_and_a_decided_or_out_of_reach_row_gets_none():
    seeds = {"B1": 2, "C1": 2, "C4": 2, "D1": 2, "base": 4}
    states = {"B1": "decided", "C1": "open", "C4": "out_of_reach", "D1": "decided"}
    after = policy(seeds, states, CONTROLS, min_seeds=2, max_seeds=6)
    assert after == {"B1": 2, "C1": 3, "C4": 2, "D1": 2, "base": 4}  # the base keeps its 4 (sqrt(1) x 3 is fewer)
    assert policy(seeds, dict.fromkeys(states, "open"), CONTROLS, min_seeds=2, max_seeds=6)["base"] == 6  # sqrt(4) 3


def test_asked_again_at_the_same_look_the_policy_asks_for_nothing_new():
    """A resumed sweep (or a second worker) that reads the same looks asks for the same seeds: the queue, which
    enqueues a (row, seed) key once, then adds nothing."""
    seeds = {"B1": 2, "C1": 3, "C4": 2, "D1": 2, "base": 4}
    states = {"B1": "decided", "C1": "decided", "C4": "out_of_reach", "D1": "decided"}
    assert policy(seeds, states, CONTROLS, min_seeds=2, max_seeds=6) == seeds
    at_max = {"B1": 6, "C1": 6, "C4": 6, "D1": 6, "base": 12}
    assert policy(at_max, dict.fromkeys(CONTROLS["base"], "open"), CONTROLS, min_seeds=2, max_seeds=6) == at_max


def test_the_study_fields_default_to_the_fixed_design_and_are_checked():
    rows = [{"name": "base", "group": "base"}, {"name": "B1", "model": {"d_k": 8}}]
    study = parse_study({"name": "s", "rows": rows})
    assert (study.allocation, study.min_seeds, study.max_seeds) == ("fixed", 2, 6)
    study = parse_study({"name": "s", "rows": rows, "allocation": "sequential", "min_seeds": 1, "max_seeds": 4})
    assert (study.allocation, study.min_seeds, study.max_seeds) == ("sequential", 1, 4)
    bad_fields = (
        ({"allocation": "adaptive"}, "allocation must be one of fixed, sequential"),
        ({"min_seeds": 0}, "min_seeds must be a positive integer"),
        ({"min_seeds": 3, "max_seeds": 2}, r"max_seeds \(2\) must be at least min_seeds \(3\)"),
    )
    for bad, message in bad_fields:
        with pytest.raises(AblateError, match=message):
            parse_study({"name": "s", "rows": rows, **bad})


def test_a_row_no_claim_tests_gets_one_seed_and_the_base_counts_only_the_tested_rows():
    """Table 3's rows without a claim (A2, A3, C3, ...) are cells to read, like the paper's single runs: one seed;
    the base's sqrt(k) share serves the comparisons being tested."""
    seeds = dict.fromkeys(["base", "B1", "C1", "A2"], 0)
    first = policy(seeds, {}, {"base": ["B1", "C1"]}, min_seeds=2, max_seeds=6)
    assert first == {"B1": 2, "C1": 2, "A2": 1, "base": 3}  # round(sqrt(2) x 2)
    states = {"B1": "open", "C1": "decided", "A2": "decided"}
    assert policy(first, states, {"base": ["B1", "C1"]}, min_seeds=2, max_seeds=6)["A2"] == 1
    no_controls = policy(dict.fromkeys(["x", "y"], 0), {}, {}, min_seeds=2, max_seeds=6)
    assert no_controls == {"x": 2, "y": 2}  # a study without a base: every row is what is read and tested


def test_the_plan_tests_against_the_base_only_the_rows_a_claim_names(tmp_path):
    from ablate.ablations.commands.options import parse
    from ablate.ablations.commands.sweep import build_parser, make_plan

    argv = ["table3", "--allocation", "sequential", "--out", str(tmp_path / "o")]
    plan = make_plan(parse(build_parser(), argv))
    tested = plan.controls()["base"]
    assert {"A1", "B1", "C1", "D3", "E1", "big"} <= set(tested) and not {"A2", "A3", "C3", "D2", "D4", "F1"} & set(
        tested
    )
    # Each control counts the rows whose comparisons name it: modern's M rows are tested against `paper`, E2 against
    # E1 and the base (RoPE) against E1, none of them against the base.
    modern = make_plan(parse(build_parser(), ["modern", "--allocation", "sequential", "--out", str(tmp_path / "m")]))
    controls = modern.controls()
    assert set(controls["paper"]) == {"M-rmsnorm", "M-swiglu", "M-rope", "M-gqa2"}
    assert set(controls["E1"]) == {"base", "E2"} and len(controls["base"]) == 12
    assert not {"E2", "M-rope", "M-gqa2", "A2"} & set(controls["base"])


def test_a_control_that_is_also_tested_counts_in_k_but_its_share_does_not_set_n():
    """The modern study's E1 is the control of E2 (learned positions against sinusoids) and of the base (RoPE
    against sinusoids); the base is a control too, with 8 seeds. E1's share is sqrt(2) x the tested rows' 2 seeds,
    not sqrt(2) x the base's 8 (11 seeds, which the first modern sweep queued)."""
    rows = [f"r{i}" for i in range(15)] + ["E2"]
    controls = {"base": rows, "E1": ["E2", "base"]}
    first = policy(dict.fromkeys([*rows, "base", "E1"], 0), {}, controls, min_seeds=2, max_seeds=3)
    assert first["base"] == 8 and first["E1"] == 3 and first["E2"] == 2  # round(sqrt(16) 2), round(sqrt(2) 2)
    reversed_order = dict(reversed(list(controls.items())))  # the same whatever order the controls come in
    assert policy(dict.fromkeys([*rows, "base", "E1"], 0), {}, reversed_order, min_seeds=2, max_seeds=3) == first
    states = dict.fromkeys(rows, "decided") | {"E2": "open", "base": "out_of_reach"}
    assert policy(first, states, controls, min_seeds=2, max_seeds=3)["E1"] == 3  # sqrt(1) x E2's 3
    states = dict.fromkeys(rows, "decided") | {"base": "open"}  # only the other control's comparison open
    assert policy(first, states, controls, min_seeds=2, max_seeds=3)["E1"] == 3  # one more, at most max_seeds
