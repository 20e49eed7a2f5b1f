"""The report's numbers against the trial records: configs vs base, mean/std over seeds, paper, states."""

from __future__ import annotations

import json
import statistics

import pytest
from ablate.ablations.results.load import load_results
from ablate.reports.table import build_table
from reports_fixtures import TABLE3_ROWS, make_study


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    out = make_study(tmp_path_factory.mktemp("study") / "table3-smoke", seeds=(0, 1, 2))
    return out, build_table(load_results(out), n_samples=200)


def _metric(out, row, metric):
    values = {}
    for path in sorted((out / "records").glob(f"{row}__seed*.json")):
        record = json.loads(path.read_text())
        if record["state"] == "complete":
            values[record["seed"]] = record["metrics"][metric]
    return values


@pytest.mark.parametrize("row", [name for name, *_ in TABLE3_ROWS])
def test_mean_and_std_over_seeds_match_the_records(finished, row):
    out, table = finished
    got = table.row(row)
    for metric, stat in (("bleu", got.bleu), ("ppl", got.ppl)):
        values = _metric(out, row, metric)
        assert len(values) == 3
        assert stat.values == values
        assert stat.mean == pytest.approx(statistics.fmean(values.values()))
        assert stat.std == pytest.approx(statistics.stdev(values.values()))
    assert got.params_m == pytest.approx(statistics.fmean(_metric(out, row, "params").values()) / 1e6)
    assert got.wall_time_s == pytest.approx(statistics.fmean(_metric(out, row, "wall_time_s").values()))
    assert got.devices == ["cpu"]


def test_delta_is_the_effect_the_test_uses_over_all_the_bases_seeds(finished):
    out, table = finished
    base, b1 = _metric(out, "base", "bleu"), _metric(out, "B1", "bleu")
    delta = table.row("B1").delta_bleu
    assert delta.values == pytest.approx({s: b1[s] - statistics.fmean(base.values()) for s in b1})
    assert delta.mean == pytest.approx(table.row("B1").tests["bleu"].effect)  # the column agrees with the interval
    assert delta.std == pytest.approx(statistics.stdev(b1.values()))
    assert table.row("base").delta_bleu is None


def test_blank_cells_mean_same_as_base(finished):
    _, table = finished
    b1 = table.row("B1")
    assert b1.config["d_k"] == 4 and not b1.same_as_base["d_k"]
    assert all(same for key, same in b1.same_as_base.items() if key != "d_k")
    big = table.row("big")
    changed = {key for key, same in big.same_as_base.items() if not same}
    assert changed == {"d_model", "d_ff", "h", "P_drop", "train_steps"}  # d_k = d_v = 8 stay as in base
    assert not any(table.row("base").same_as_base.values())  # the base row shows every value
    assert table.row("E1").other == {"model.positions": "learned"}
    assert table.row("F1").other == {"model.norm": "pre"}
    assert table.row("B1").other == {}  # train.seed differences are not experiments


def test_paper_numbers_beside_ours(finished):
    _, table = finished
    assert table.show_paper
    assert (table.row("base").paper.ppl, table.row("base").paper.bleu) == (4.92, 25.8)
    assert table.row("C1").paper.bleu == 23.7
    assert table.row("F1").paper is None  # ours, not in the paper


def test_rows_and_groups_keep_display_order(finished):
    _, table = finished
    assert [r.name for r in table.rows] == [name for name, *_ in TABLE3_ROWS]
    assert [g for g, _ in table.groups()] == ["base", "A", "B", "C", "D", "E", "big", "F"]


def test_half_finished_study_shows_pending_running_and_failed(tmp_path):
    reason = "diverged: training loss became nan at step 37"
    plan = {
        ("A1", 1): "running",
        ("B1", 0): "running",
        ("B1", 1): "pending",
        ("C1", 1): "failed",
        ("E1", 0): "pending",
        ("E1", 1): "pending",
        ("big", 0): "pending",
        ("big", 1): "pending",
    }
    out = make_study(tmp_path / "half", plan=plan, reasons={("C1", 1): reason})
    results = load_results(out)
    assert results.notes == []  # the journal storage was read
    table = build_table(results, n_samples=200)

    a1 = table.row("A1")
    assert (a1.status[0].state, a1.status[1].state) == ("complete", "running")
    assert a1.bleu.n == 1 and a1.bleu.std is None and a1.state == "running"
    b1 = table.row("B1")
    assert [b1.status[s].state for s in (0, 1)] == ["running", "pending"] and b1.bleu is None
    assert b1.delta_bleu is None and b1.tests["bleu"].effect is None and b1.mark == ""
    c1 = table.row("C1")
    assert c1.status[1].state == "failed" and c1.reasons == {1: reason}
    assert c1.bleu.n == 1  # the complete seed still counts
    assert table.row("E1").state == "pending" and table.row("E1").bleu is None
    assert table.row("base").bleu.n == 2


def test_without_optuna_storage_records_are_the_truth_and_a_note_says_so(tmp_path):
    plan = {("A1", 1): "running", ("C1", 1): "failed"}
    out = make_study(tmp_path / "s", plan=plan, reasons={("C1", 1): "CUDA out of memory"})
    (out / "optuna.journal").unlink()
    results = load_results(out)
    assert len(results.notes) == 1 and "could not be opened" in results.notes[0]
    assert not (out / "optuna.journal").exists()  # never created by reading
    table = build_table(results, n_samples=200)
    assert table.row("A1").status[1].state == "pending"  # running is only known to Optuna
    assert table.row("C1").reasons == {1: "CUDA out of memory"}  # failures are in the records
    assert results.notes[0] in table.notes


def test_study_without_base_or_paper_rows(tmp_path):
    rows = [("wide", "width", {"d_ff": 128}, 0.3), ("narrow", "width", {"d_ff": 32}, 0.4)]
    out = make_study(tmp_path / "user", rows=rows, seeds=(0,), study="widths", storage=None)
    table = build_table(load_results(out), n_samples=200)
    assert table.base is None and not table.show_paper
    assert not any(table.row("narrow").same_as_base.values())
    assert table.row("narrow").delta_bleu is None
    assert any("no row in group 'base'" in note for note in table.notes)


def test_complete_in_optuna_without_a_record_is_shown_as_a_failure(tmp_path):
    out = make_study(tmp_path / "s", rows=TABLE3_ROWS[:2], seeds=(0,))
    (out / "records" / "A1__seed0.json").unlink()
    table = build_table(load_results(out), n_samples=100)
    a1 = table.row("A1")
    assert a1.state == "failed" and "no record was written" in a1.reasons[0] and a1.bleu is None


def test_paper_numbers_declared_in_study_json_win(tmp_path):
    rows = [("base", "base", {}, 0.3), ("mine", "X", {"d_ff": 128}, 0.4)]
    out = make_study(tmp_path / "s", rows=rows, seeds=(0,), study="user", storage=None)
    meta = json.loads((out / "study.json").read_text())
    meta["rows"][1]["paper"] = {"ppl": 5.5, "bleu": 24.0, "params_m": None}
    (out / "study.json").write_text(json.dumps(meta))
    table = build_table(load_results(out), n_samples=100)
    assert (table.row("mine").paper.ppl, table.row("mine").paper.bleu) == (5.5, 24.0)
    # A user's study: its row called 'base' is not the paper's base, so no Table 3 numbers are borrowed by name.
    assert table.row("base").paper is None


def test_old_table3_results_without_paper_numbers_get_them_by_row_name(tmp_path):
    out = make_study(tmp_path / "s", rows=TABLE3_ROWS[:2], seeds=(0,), storage=None)
    meta = json.loads((out / "study.json").read_text())
    for row in meta["rows"]:
        row.pop("paper", None)  # study.json as sweeps wrote it before it carried the numbers
    (out / "study.json").write_text(json.dumps(meta))
    table = build_table(load_results(out), n_samples=100)
    assert table.row("base").paper.bleu == 25.8


def test_a_live_retry_speaks_for_its_row_over_a_failed_trial(tmp_path):
    import optuna

    out = make_study(tmp_path / "s", rows=TABLE3_ROWS[:2], seeds=(0,), plan={("A1", 0): "running"})
    storage = optuna.storages.JournalStorage(optuna.storages.journal.JournalFileBackend(str(out / "optuna.journal")))
    study = optuna.load_study(study_name="table3-smoke", storage=storage)
    study.enqueue_trial({}, user_attrs={"row": "A1", "seed": 0, "group": "A"})
    duplicate = study.ask()  # a second claim of A1@0, failed as a duplicate while the first still runs
    duplicate.set_user_attr("reason", "duplicate of an earlier trial of the same row")
    study.tell(duplicate, state=optuna.trial.TrialState.FAIL)
    table = build_table(load_results(out), n_samples=100)
    assert table.row("A1").status[0].state == "running"


def _give_test_scores(out, row: str, seed: int, rate: float) -> dict:
    """Add test scores to a record the way a sweep writes them: hyps/<key>.test.txt, refs/test.txt, and sacreBLEU's
    BLEU and chrF of the two in the record. Returns the metrics added."""
    import sacrebleu
    from reports_fixtures import corrupt, references

    refs = references(60, seed=4321)  # a test set of its own, not the dev references
    (out / "refs" / "test.txt").write_text("\n".join(refs) + "\n", encoding="utf-8")
    hyps = corrupt(refs, rate, seed=seed)
    (out / "hyps" / f"{row}__seed{seed}.test.txt").write_text("\n".join(hyps) + "\n", encoding="utf-8")
    bleu, chrf = sacrebleu.metrics.BLEU(), sacrebleu.metrics.CHRF()
    metrics = {
        "test_bleu": bleu.corpus_score(hyps, [refs]).score,
        "test_chrf": chrf.corpus_score(hyps, [refs]).score,
        "test_bleu_signature": str(bleu.get_signature()),
        "test_sentences": len(refs),
    }
    path = out / "records" / f"{row}__seed{seed}.json"
    record = json.loads(path.read_text(encoding="utf-8"))
    record["metrics"].update(metrics)
    record.update(test_hypotheses=f"hyps/{row}__seed{seed}.test.txt", test_references="refs/test.txt")
    path.write_text(json.dumps(record), encoding="utf-8")
    return metrics


def test_test_scores_over_seeds_only_for_records_that_have_them(tmp_path):
    out = make_study(tmp_path / "s", rows=TABLE3_ROWS[:4], seeds=(0, 1))
    base = {seed: _give_test_scores(out, "base", seed, 0.2 + 0.1 * seed) for seed in (0, 1)}
    b1 = _give_test_scores(out, "B1", 0, 0.5)
    results = load_results(out)
    table = build_table(results, n_samples=100)

    got = table.row("base")
    for metric in ("test_bleu", "test_chrf"):
        stat = getattr(got, metric)
        assert stat.values == {seed: pytest.approx(base[seed][metric]) for seed in (0, 1)}
        assert stat.mean == pytest.approx(statistics.fmean(m[metric] for m in base.values()))
        assert stat.std == pytest.approx(statistics.stdev(m[metric] for m in base.values()))
    assert got.test_bleu.mean != pytest.approx(got.bleu.mean)  # test apart from dev
    assert table.row("B1").test_bleu.values == {0: pytest.approx(b1["test_bleu"])}  # seed 1 was not scored
    assert table.row("B1").test_bleu.std is None
    for name in ("A1", "A3"):  # records without test scores: nothing, not zero
        assert table.row(name).test_bleu is None and table.row(name).test_chrf is None
    (record,) = results.records("B1", state=None)[:1]
    assert record.test_hypotheses == out / "hyps" / "B1__seed0.test.txt" and record.test_hypotheses.is_file()
    assert record.test_references == out / "refs" / "test.txt"
    assert results.records("A1")[0].test_hypotheses is None and results.records("A1")[0].test_references is None


def test_a_row_compared_with_another_reference_shows_what_it_changes_from_that_one(tmp_path):
    """The modern study's one-component rows (M-swiglu against the paper's base, row `paper`) listed their
    differences from the modern base and never named their own component: a row the claims compare with one
    reference other than the base lists its differences from that reference, and says so; a row of its group that no
    claim names (M-qknorm) is read against the same row; the base, compared with E1 by a claim (RoPE against
    sinusoids), and the references themselves are read against the base."""
    import json

    from ablate.reports.build import build_report
    from reports_fixtures import TABLE3_ROWS, make_study

    rows = [TABLE3_ROWS[0], ("E1", "E", {"positions": "learned"}, 0.30), ("E2", "E", {"positions": "learned",
            "norm": "pre", "d_ff": 128}, 0.31), ("E3", "E", {"positions": "learned", "d_k": 4}, 0.32)]  # fmt: skip
    out = make_study(tmp_path / "table3-smoke", rows=rows)
    claims = tmp_path / "claims.yaml"
    claims.write_text("claims:\n  - {id: e, text: t, compare: [{row: E2, metric: bleu, expect: same, margin: 1.0, "
                      "against: E1}, {row: base, metric: bleu, expect: higher, against: E1}]}\n")  # fmt: skip
    written = build_report(out, ["md", "json"], n_samples=50, claims=claims)
    table = json.loads(written["json"].read_text())
    by_row = {r["row"]: r for r in table["rows"]}
    assert by_row["E2"]["other"] == {"model.norm": "pre"} and by_row["E2"]["other_against"] == "E1"
    assert by_row["E3"]["other"] == {} and by_row["E3"]["other_against"] == "E1"  # its group's reference
    assert by_row["E3"]["same_as_reference"]["d_k"] is False and by_row["E3"]["same_as_reference"]["d_ff"] is True
    assert by_row["E1"]["other"] == {"model.positions": "learned"} and "other_against" not in by_row["E1"]
    assert by_row["base"]["other"] == {} and "other_against" not in by_row["base"]
    md = written["md"].read_text()
    body = {cells[1]: cells for cells in (line.strip("|").split(" | ") for line in md.splitlines()[4:]) if cells[1:]}
    header = md.splitlines()[2].strip("|").split(" | ")
    assert body["E2"][header.index("d_ff")] == "128" and body["E3"][header.index("d_k")] == "4"  # what each changes
    assert "| vs E1: norm=pre |" in md and "positions=learned |" in md
    assert "(E2, E3: as row E1: the row the claims compare them" in md and "the base has norm=post, positions=" in md
