"""The results ledger: the key format, record files, the copy kept in Optuna, and which trial speaks for a key."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from types import SimpleNamespace

import pytest
from ablate.ablations.results import ledger
from ablate.ablations.results.record import Budget, Layout, Record, key_of
from ablate.data.atomic import write_text_atomic


@dataclass
class FakeTrial:
    """What the ledger reads of an Optuna FrozenTrial: number, state (by name) and user attributes."""

    number: int
    state_name: str
    user_attrs: dict = field(default_factory=dict)

    @property
    def state(self):
        return SimpleNamespace(name=self.state_name)


def trial(number: int, state: str, row: str = "A1", seed: int = 0, **attrs) -> FakeTrial:
    return FakeTrial(number, state, {"row": row, "seed": seed, **attrs})


def test_keys_round_trip_and_name_the_files(tmp_path):
    assert key_of("B1", 2) == "B1__seed2"
    assert ledger.parse_key("B1__seed2") == ("B1", 2)
    assert ledger.parse_key("my__row__seed10") == ("my__row", 10)
    assert ledger.parse_key("notakey") is None and ledger.parse_key("A1__seedx") is None
    assert ledger.record_path(tmp_path, "B1", 2) == tmp_path / "records" / "B1__seed2.json"


def test_records_are_written_listed_and_read_back(tmp_path):
    for row, seed in (("B1", 10), ("A1", 0), ("B1", 2)):
        ledger.write_record(tmp_path, Record(row=row, group=row[0], seed=seed, metrics={"bleu": seed}))
    (tmp_path / "records" / "stray.json").write_text("{}")
    assert [p.stem for p in ledger.record_paths(tmp_path)] == ["A1__seed0", "B1__seed2", "B1__seed10"]
    assert [p.stem for p in ledger.record_paths(tmp_path, "B1")] == ["B1__seed2", "B1__seed10"]
    assert ledger.recorded_rows(tmp_path) == ["A1", "B1"]
    read = ledger.read_record(tmp_path, "B1", 2)
    assert (read.row, read.group, read.seed, read.state, read.metrics) == ("B1", "B", 2, "complete", {"bleu": 2})
    assert read.path == tmp_path / "records" / "B1__seed2.json"
    assert ledger.read_record(tmp_path, "C1", 0) is None


def test_the_copy_in_optuna_rebuilds_a_missing_record_and_its_files(tmp_path):
    here, there = tmp_path / "here", tmp_path / "there"
    files = {
        "hypotheses": ("hyps/A1__seed0.txt", "ein\nzwei\n"),
        "test_hypotheses": ("hyps/A1__seed0.test.txt", "drei\n"),
        "references": ("refs/valid.txt", "one\ntwo\n"),
        "test_references": ("refs/test.txt", "three\n"),
    }
    for path, text in files.values():
        write_text_atomic(here / path, text)
    paths = {k: here / p for k, (p, _) in files.items()}
    record = Record(row="A1", group="A", seed=0, curves={"train": list(range(1000))}, **paths)
    packed, shared = ledger.pack(record, here), ledger.pack_shared(record, here)
    assert len(packed["curves"]["train"]) <= 201 and packed["curves"]["train"][-1] == 999
    assert set(packed["files_gz"]) == {"hypotheses", "test_hypotheses"}  # the references travel once per study
    assert set(shared) == {"refs/valid.txt", "refs/test.txt"}
    write_text_atomic(there / "refs" / "valid.txt", "kept\n")  # written by this machine's own trials
    ledger.unpack_shared(shared, there)
    assert ledger.unpack(packed, there) is True
    assert {k: (there / p).read_text() for k, (p, _) in files.items()} == {
        **{k: text for k, (_, text) in files.items()},
        "references": "kept\n",  # a file OUT has is never overwritten
    }
    assert "files_gz" not in ledger.read_record(there, "A1", 0).raw
    assert ledger.unpack(packed, there) is False  # never overwrites a record


def test_the_copy_in_optuna_carries_each_budgets_files_too(tmp_path):
    here, there = tmp_path / "here", tmp_path / "there"
    budget = {
        "fraction": 0.5,
        "steps": 30,
        "metrics": {"bleu": 1.0},
        "hypotheses": "hyps/A1__seed0.b30.txt",
        "sentence_nll": "hyps/A1__seed0.b30.nll.tsv",
        "test_hypotheses": "hyps/A1__seed0.b30.test.txt",
    }
    texts = {"hypotheses": "halb\n", "sentence_nll": "1.5\t3\n", "test_hypotheses": "test\n"}
    for key, text in texts.items():
        write_text_atomic(here / budget[key], text)
    write_text_atomic(here / "hyps" / "A1__seed0.txt", "ganz\n")
    layout = Layout(here)
    typed = Budget(**{k: layout.resolve(v) if k in texts else v for k, v in budget.items()})
    record = Record(row="A1", group="A", seed=0, hypotheses=here / "hyps" / "A1__seed0.txt", budgets=(typed,))

    packed = ledger.pack(record, here)
    assert set(packed["budgets"][0]["files_gz"]) == set(texts)
    write_text_atomic(there / budget["test_hypotheses"], "kept\n")
    assert ledger.unpack(packed, there) is True

    assert {key: (there / budget[key]).read_text() for key in texts} == {**texts, "test_hypotheses": "kept\n"}
    assert (there / "hyps" / "A1__seed0.txt").read_text() == "ganz\n"
    assert ledger.read_record(there, "A1", 0).raw["budgets"] == [budget]  # as written, without their packed files
    assert ledger.read_record(there, "A1", 0).budgets[0] == replace(typed, hypotheses=there / budget["hypotheses"],
        sentence_nll=there / budget["sentence_nll"], test_hypotheses=there / budget["test_hypotheses"])  # fmt: skip


def test_a_copy_packed_by_an_older_ablate_still_unpacks(tmp_path):
    import base64
    import gzip

    old = {"row": "B1", "seed": 1, "state": "complete", "hypotheses": "hyps/B1__seed1.txt"}
    old["hypotheses_gz"] = base64.b64encode(gzip.compress(b"alt\n")).decode("ascii")
    assert ledger.unpack(old, tmp_path) is True
    assert (tmp_path / "hyps" / "B1__seed1.txt").read_text() == "alt\n"
    assert "hypotheses_gz" not in ledger.read_record(tmp_path, "B1", 1).raw


@pytest.mark.parametrize(
    ("trials", "speaks"),
    [
        ([trial(0, "FAIL", retried=True, reason=ledger.RETRIED_REASON), trial(1, "WAITING")], 1),  # a retry
        ([trial(0, "COMPLETE"), trial(1, "PRUNED", reason=ledger.DUPLICATE_REASON)], 0),  # a duplicate claim
        ([trial(0, "FAIL"), trial(1, "PRUNED", reason=ledger.DUPLICATE_REASON)], 0),  # duplicates never speak
        ([trial(0, "FAIL"), trial(1, "RUNNING")], 1),  # --retry_failed: the rerun
        ([trial(0, "FAIL"), trial(1, "FAIL")], 1),  # among equals, the latest
        ([trial(0, "COMPLETE"), trial(1, "FAIL")], 0),  # complete beats failed
        ([trial(0, "FAIL", retried=True)], 0),  # a superseded trial still speaks when it is all there is
    ],
)
def test_one_rule_says_which_trial_speaks_for_a_key(trials, speaks):
    assert ledger.resolve(trials)[("A1", 0)].number == speaks


@pytest.mark.parametrize(
    ("attrs", "closed"),
    [
        ({"closed_as": "duplicate", "reason": "any words at all"}, "duplicate"),  # the field, whatever the words say
        ({"closed_as": "unwanted", "reason": "reworded"}, "unwanted"),
        ({"closed_as": "retried", "reason": "reworded"}, "retried"),
        ({"reason": "duplicate of an earlier trial of the same row"}, "duplicate"),  # a storage from before the field
        ({"reason": ledger.UNWANTED_REASON}, "unwanted"),
        ({"retried": True, "reason": "worker died (no heartbeat): retried"}, "retried"),
        ({"reason": "diverged at step 300"}, None),  # a failure of its own
        ({}, None),
    ],
)
def test_a_closing_by_design_is_a_field_and_old_storages_read_as_before(attrs, closed):
    """Code branches on `closed_as`, never on the reason's words; a storage written before the field resolves as it
    did (its retried flag, its reasons)."""
    t = trial(1, "PRUNED" if closed in ("duplicate", "unwanted") else "FAIL", **attrs)
    assert ledger.closed_as(t) == closed
    assert ledger.superseded(t) is (closed is not None)
    assert ledger.closed_unrun(t) is (closed == "unwanted")
    assert ledger.resolve([trial(0, "FAIL"), t])[("A1", 0)].number == (0 if closed else 1)


def test_tuning_trials_have_no_key():
    assert ledger.resolve([FakeTrial(0, "COMPLETE", {"host": "x"})]) == {}
    assert ledger.trial_state(trial(0, "WAITING")) == "pending"


def test_a_record_from_a_newer_ablate_keeps_the_fields_this_one_does_not_know(tmp_path):
    """A coordinator rebuilding OUT from Optuna's copy (or re-telling a finished trial) writes the record back
    whole: a field a newer worker added survives the typed round trip."""
    newer = {"row": "A1", "seed": 0, "state": "complete", "metrics": {"bleu": 1.0}, "energy_kwh": 0.25}
    assert ledger.unpack(newer, tmp_path) is True
    record = ledger.read_record(tmp_path, "A1", 0)
    assert record.to_json(Layout(tmp_path))["energy_kwh"] == 0.25
    assert ledger.pack(record, tmp_path)["energy_kwh"] == 0.25
