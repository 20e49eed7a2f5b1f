"""A sweep's trials as Optuna parameters: row, seed and knobs on axes the whole study shares, on a real SQLite
storage (an RDB storage refuses a categorical parameter whose choices change: Optuna's "dynamic value space")."""

from __future__ import annotations

import pytest
from ablate.ablations.results.storage.queue import Queue
from ablate.ablations.results.storage.space import ParamSpace


def enqueue(queue: Queue, values: dict, seeds=(0, 1)) -> list[str]:
    space, left_out = queue.settle(ParamSpace.of(values, seeds))
    for row in values:
        for seed in seeds:
            queue.enqueue(row, seed, row, space=space)
    return left_out


@pytest.mark.parametrize("url", ["sqlite", "journal"])
def test_rows_added_to_a_study_later_are_queued_on_the_axes_it_began_with(tmp_path, url):
    url = f"sqlite:///{tmp_path / 'o.db'}" if url == "sqlite" else f"journal:{tmp_path / 'optuna.journal'}"
    queue = Queue.open(url, "grow")
    first = {
        "base": {"model.d_k": 64, "model.positions": "sinusoidal"},
        "B1": {"model.d_k": 16, "model.positions": "sinusoidal"},
    }
    assert enqueue(queue, first) == []
    # The user adds rows: a wider d_k (a numeric axis widens), learned positions and a new row name (categorical
    # axes cannot grow: those values are left out of the new trials' parameters, and the user is told).
    grown = {**first, "B3": {"model.d_k": 128, "model.positions": "learned"}}
    left_out = enqueue(Queue.open(url, "grow"), grown, seeds=(2,))
    assert left_out == ["row = B3 (new since the study began)", "model.positions = learned (new since the study began)"]
    # d_k's axis (16..64, linear) widens to 128 and stays linear, though 16..128 alone would be a log axis.

    trials = {(t.user_attrs["row"], t.user_attrs["seed"]): t for t in Queue.open(url, "grow").trials()}
    assert len(trials) == 4 + 3
    assert trials[("base", 2)].params == {"row": "base", "seed": 2, "model.d_k": 64, "model.positions": "sinusoidal"}
    assert trials[("B3", 2)].params == {"seed": 2, "model.d_k": 128}
    d_k = trials[("B3", 2)].distributions["model.d_k"]
    assert (d_k.low, d_k.high, d_k.log) == (16, 128, False)
    assert trials[("base", 2)].distributions["row"].choices == ("base", "B1")


def test_a_knob_keeps_its_scale_and_one_whose_kind_changes_is_left_out_not_refused(tmp_path):
    queue = Queue.open(f"sqlite:///{tmp_path / 'o.db'}", "scale")
    enqueue(
        queue,
        {"base": {"train.lr_factor": 1.0, "model.norm": "post"}, "x": {"train.lr_factor": 2.0, "model.norm": "pre"}},
    )
    # lr_factor now spans 1..100 (a log axis on its own): the study's linear axis widens. norm becomes a number.
    left_out = enqueue(
        queue,
        {"base": {"train.lr_factor": 1.0, "model.norm": 1}, "y": {"train.lr_factor": 100.0, "model.norm": 2}},
        seeds=(5,),
    )
    assert left_out == ["row = y (new since the study began)", "model.norm (its kind changed since the study began)"]
    new = [t for t in queue.trials() if t.user_attrs["seed"] == 5]
    assert new and all("model.norm" not in t.params for t in new)
    lr = new[-1].distributions["train.lr_factor"]
    assert (lr.low, lr.high, lr.log) == (1.0, 100.0, False)
