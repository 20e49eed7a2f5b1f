"""The significance mark on constructed cases: a clear difference is marked, identical outputs are not."""

from __future__ import annotations

from reports_fixtures import make_study

from reports.results import load_results
from reports.significance import Significance, paired_test
from reports.table import build_table


def _table(tmp_path, rows, seeds=(0, 1)):
    out = make_study(tmp_path / "sig", rows=rows, seeds=seeds, storage=None)
    return build_table(load_results(out), n_samples=300)


def test_perfect_hypotheses_against_corrupted_base_are_marked(tmp_path):
    # rate -1: hypotheses identical to the references; the base replaces 40% of its words
    table = _table(tmp_path, [("base", "base", {}, 0.4), ("perfect", "X", {"d_ff": 128}, -1.0)])
    sig = table.row("perfect").significance
    assert set(sig.p_values) == {0, 1}  # tested seed against seed
    assert sig.p_value < 0.01 and sig.mark == "‡"
    assert all(d > 40 for d in sig.deltas.values())


def test_identical_outputs_are_not_marked(tmp_path):
    out = make_study(
        tmp_path / "sig", rows=[("base", "base", {}, 0.3), ("same", "X", {"d_ff": 128}, 0.3)], storage=None
    )
    for seed in (0, 1):  # make 'same' decode exactly what the base decodes
        (out / f"hyps/same__seed{seed}.txt").write_bytes((out / f"hyps/base__seed{seed}.txt").read_bytes())
    table = build_table(load_results(out), n_samples=300)
    sig = table.row("same").significance
    assert sig.p_values == {0: 1.0, 1: 1.0}
    assert sig.deltas == {0: 0.0, 1: 0.0}
    assert sig.mark == ""


def test_small_noise_difference_is_not_marked(tmp_path):
    rows = [("base", "base", {}, 0.30), ("close", "X", {"d_ff": 128}, 0.30)]
    sig = _table(tmp_path, rows).row("close").significance
    assert sig.p_value is not None and sig.p_value > 0.05 and sig.mark == ""


def test_a_mark_needs_every_seed_and_the_same_sign():
    assert Significance(p_values={0: 0.001, 1: 0.2}, deltas={0: 3.0, 1: 1.0}).mark == ""
    assert Significance(p_values={0: 0.001, 1: 0.03}, deltas={0: 3.0, 1: 1.0}).mark == "†"
    assert Significance(p_values={0: 0.001, 1: 0.001}, deltas={0: 3.0, 1: -2.0}).mark == ""
    assert Significance(p_values={0: 0.001}, deltas={0: -3.0}).mark == "‡"
    assert Significance(note="no hypotheses").mark == ""


def test_paired_test_is_sacrebleus_and_reproducible():
    refs = ["the cat sat on the mat .", "a dog barks at night .", "we read old books ."] * 20
    worse = ["the cat sat on a hat .", "a dog barks .", "we read books ."] * 20
    first = paired_test(worse, {"refs": refs}, refs, n_samples=200)
    assert first == paired_test(worse, {"refs": refs}, refs, n_samples=200)
    p, delta = first["refs"]
    assert p < 0.01 and delta > 0


def test_rows_that_cannot_be_paired_say_why(tmp_path):
    out = make_study(tmp_path / "s", rows=[("base", "base", {}, 0.3), ("B1", "B", {"d_k": 4}, 0.4)], seeds=(0,))
    lines = (out / "hyps/B1__seed0.txt").read_text().splitlines()
    (out / "hyps/B1__seed0.txt").write_text("\n".join(lines[:-3]) + "\n")
    table = build_table(load_results(out), n_samples=100)
    sig = table.row("B1").significance
    assert sig.mark == "" and "77 hypotheses for 80 references" in sig.note
    assert any("B1: not tested" in note for note in table.notes)
    assert table.row("B1").delta_bleu is not None  # the delta itself comes from the records
