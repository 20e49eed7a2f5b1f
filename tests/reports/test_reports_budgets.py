"""Verdicts across training budgets: records read at T/2 and T, a claim reproduced only when every budget agrees,
one test behind the table's marks and the verdicts, no verdict for a model that did not learn to translate or for a
pipeline check, the minimum detectable effect, the study's precision, and a plot per claim."""

from __future__ import annotations

import csv
import io
import json
import math
import statistics
from dataclasses import replace

import pytest
import reports_fixtures as fx
from ablate.ablations.results.load import load_results
from ablate.ablations.results.scores import read_lines
from ablate.ablations.statistics.significance import RowTest, SystemScores, compare, pooled_seed_variance
from ablate.data.errors import AblateError
from ablate.lightning_modules.metrics import METRICS
from ablate.reports.build import build_report
from ablate.reports.cells import display_cells
from ablate.reports.claims import comparison_text, judge, parse_claims
from ablate.reports.jsonfile import to_json
from ablate.reports.latex import to_latex
from ablate.reports.markdown import to_markdown
from ablate.reports.table import build_table
from ablate.reports.values import claims_data

ROWS = [
    ("base", "base", {}, 0.30),
    ("A1", "A", {"n_heads": 1, "d_k": 32, "d_v": 32}, 0.45),
    ("C1", "C", {"n_layers": 1}, 0.60),
]
HALF = {0.5: {"base": 0.35, "A1": 0.50, "C1": 0.65}}
"""Each row a little worse at T/2 than at T, in the same order."""


def claims(*items: tuple[str, str, str, str]) -> list:
    """Claims of one comparison each: (id, row, metric, expect)."""
    raw = [{"id": i, "text": i, "compare": [{"row": r, "metric": m, "expect": e}]} for i, r, m, e in items]
    return parse_claims({"claims": raw}, "test")


def table_of(out, chosen=None, n_samples=200):
    return build_table(load_results(out, use_optuna=False), n_samples=n_samples, claims=chosen)


def by_id(table) -> dict:
    return {cv.claim.id: cv for cv in table.claims}


# --- reading records at a budget ----------------------------------------------------------------------------------


def test_a_record_seen_at_a_budget_and_the_budgets_of_a_study(tmp_path):
    out = fx.make_study(tmp_path / "s", rows=ROWS[:2], storage=None, budgets=HALF, ratios={})
    results = load_results(out, use_optuna=False)
    assert results.fractions == [0.5, 1.0]
    record = results.records("A1")[0]
    written = json.loads(record.path.read_text())["budgets"][0]
    half = record.at_budget(0.5)
    assert half.fraction == 0.5 and half.metrics == written["metrics"] and half.metrics["steps"] == 200
    assert half.hypotheses == out / "hyps" / "A1__seed0.b200.txt" and half.hypotheses.is_file()
    assert half.sentence_nll == out / "hyps" / "A1__seed0.b200.nll.tsv" and half.sentence_nll.is_file()
    assert half.references == record.references  # shared by every budget
    assert record.at_budget(1.0) is record and record.fractions == (0.5, 1.0)
    with pytest.raises(AblateError, match=r"no budget T/4 \(it was scored at T/2, T\)"):
        record.at_budget(0.25)
    seen = results.at_budget(0.5)
    assert [r.metrics["bleu"] for r in seen.records("A1")] == [
        r.at_budget(0.5).metrics["bleu"] for r in results.records("A1")
    ]
    assert results.at_budget(1.0) is results

    old = load_results(fx.make_study(tmp_path / "old", rows=ROWS[:2], storage=None), use_optuna=False)
    assert old.fractions == [1.0] and old.records("A1")[0].budgets == ()
    mixed = json.loads((out / "records" / "base__seed1.json").read_text())
    del mixed["budgets"]  # one record from before budgets: it is missing at T/2, the study still has T/2
    (out / "records" / "base__seed1.json").write_text(json.dumps(mixed))
    mixed_study = load_results(out, use_optuna=False)
    assert mixed_study.fractions == [0.5, 1.0]
    half = mixed_study.at_budget(0.5)
    assert [r.seed for r in half.records("base")] == [0]  # seed 1 counts as missing there, not as seen at T
    assert half.status[("base", 1)].state == "failed" and "T/2" in half.status[("base", 1)].reason


# --- verdicts across budgets --------------------------------------------------------------------------------------


def test_a_claim_significant_at_both_budgets_is_reproduced(tmp_path):
    out = fx.make_study(tmp_path / "s", rows=ROWS, storage=None, budgets=HALF, ratios={})
    table = table_of(out, claims(("deep", "C1", "bleu", "lower"), ("ppl", "C1", "ppl", "higher")))
    for cv in table.claims:
        (comp,) = cv.comparisons
        assert cv.verdict == comp.verdict == "reproduced" and comp.reason == ""
        assert [(b.fraction, b.verdict) for b in comp.budgets] == [(0.5, "reproduced"), (1.0, "reproduced")]
        assert comp.test is comp.budgets[-1].test and comp.budgets[0].test.effect != comp.budgets[1].test.effect
    text = comparison_text(by_id(table)["deep"].comparisons[0], "base")
    assert text.startswith("C1 vs base, BLEU: T/2 -") and "; T -" in text and "(paper -2.10, ours 13.8x)" in text
    assert "not checked across budgets" not in to_markdown(table)


def test_a_claim_that_flips_sign_between_budgets_is_inconclusive_and_budget_sensitive(tmp_path):
    # A1 is worse than the base at T/2 but better at T: the claim holds for one budget only.
    rows = [ROWS[0], ("A1", "A", ROWS[1][2], 0.15)]
    out = fx.make_study(tmp_path / "s", rows=rows, storage=None, budgets={0.5: {"base": 0.35, "A1": 0.55}})
    table = table_of(out, claims(("head", "A1", "bleu", "lower")))
    cv = by_id(table)["head"]
    (comp,) = cv.comparisons
    assert [b.verdict for b in comp.budgets] == ["reproduced", "contradicted"]
    assert cv.verdict == comp.verdict == "inconclusive"
    assert comp.reason == "budget-sensitive: reproduced at T/2, contradicted at T"
    assert "budget-sensitive" in to_markdown(table) and "budget-sensitive" in to_latex(table)
    row = next(r for r in claims_data(table) if r["claim"] == "head")
    assert (row["verdict"], row["at0.5_verdict"], row["at1_verdict"]) == ("inconclusive", "reproduced", "contradicted")
    assert row["at0.5_effect"] < 0 < row["at1_effect"] == row["effect"] and row["budgets"] == "T/2, T"


def test_one_budget_is_judged_as_before_and_says_it_was_not_checked_across_budgets(tmp_path):
    out = fx.make_study(tmp_path / "s", rows=ROWS, storage=None)  # records from before budgets
    table = table_of(out, claims(("deep", "C1", "bleu", "lower")))
    (comp,) = by_id(table)["deep"].comparisons
    assert table.fractions == [1.0] and comp.verdict == "reproduced" and len(comp.budgets) == 1
    assert comparison_text(comp, "base").startswith("C1 vs base, BLEU: -") and "T/2" not in comparison_text(
        comp, "base"
    )
    md = to_markdown(table)
    assert "Judged at T alone: not checked across budgets." in md and "One budget, T:" in md
    # The fixture's curves still rise: the plateau column says so, but no longer withholds the verdict.
    assert table.row("C1").convergence.state == "rising" and "NOT AT PLATEAU" in md


def test_a_diverged_row_still_gives_no_verdict(tmp_path):
    plan, reasons = {("C1", 1): "failed"}, {("C1", 1): "diverged: training loss became nan at step 12"}
    out = fx.make_study(tmp_path / "s", rows=ROWS, storage=None, budgets=HALF, plan=plan, reasons=reasons)
    (comp,) = by_id(table_of(out, claims(("deep", "C1", "bleu", "lower"))))["deep"].comparisons
    assert comp.verdict == "inconclusive" and comp.reason == "no verdict: C1 diverged"
    assert display_cells(table_of(out).row("C1"))["plateau"] == "diverged"


# --- one test for the marks and the verdicts ----------------------------------------------------------------------


def _sacrebleu_paired_p(out, row: str, seed: int) -> float:
    """sacreBLEU's paired bootstrap of row@seed against base@seed: the per-seed test the marks used to come from."""
    from sacrebleu.metrics import BLEU
    from sacrebleu.significance import PairedTest

    refs = read_lines(out / "refs" / "valid.txt")
    systems = [(name, read_lines(out / "hyps" / f"{name}__seed{seed}.txt")) for name in ("base", row)]
    _, scores = PairedTest(systems, {"BLEU": BLEU()}, [refs], test_type="bs", n_samples=300)()
    return float(scores["BLEU"][1].p_value)


def test_the_marks_and_the_verdicts_come_from_one_test(tmp_path):
    """X beats the base on each seed by sacreBLEU's paired bootstrap (the old † / ‡), but its seeds land far apart,
    as another row's do: counting that noise, X's gain is not significant. The table no longer marks it, and the mark
    and the verdict agree on every row."""
    rows = [ROWS[0], ("X", "X", {"d_ff": 128}, 0.20), ("N", "N", {"d_ff": 32}, 0.30), ("C1", "C", {"n_layers": 1}, 0.9)]
    seed_rates = {("N", 0): 0.15, ("N", 1): 0.30, ("N", 2): 0.45}  # a row whose seeds land far apart
    seed_rates |= {("X", 0): 0.02, ("X", 1): 0.22, ("X", 2): 0.12}
    out = fx.make_study(tmp_path / "s", rows=rows, seeds=(0, 1, 2), storage=None, seed_rates=seed_rates)
    assert all(_sacrebleu_paired_p(out, "X", seed) < 0.05 for seed in (0, 1, 2))  # the old test marked X
    table = table_of(out, claims(("x", "X", "bleu", "higher"), ("c", "C1", "bleu", "lower")), n_samples=300)
    x = table.row("X")
    assert x.delta_bleu.mean > 10 and x.tests["bleu"].p_holm >= 0.05
    assert x.mark == "" and by_id(table)["x"].verdict == "inconclusive"
    assert not display_cells(x)["delta_bleu"].endswith(("†", "‡"))
    c1 = table.row("C1")
    assert c1.mark in ("†", "‡") and by_id(table)["c"].verdict == "reproduced"
    for row in table.rows[1:]:  # the mark is the Holm-corrected p of the same test the verdict reads
        assert (row.mark != "") == (row.tests["bleu"].p_holm < 0.05)
    doc = json.loads(to_json(table))
    assert {r["row"]: r["significance"] for r in doc["rows"]} == {"base": "", "X": "", "N": "", "C1": c1.mark}
    assert "bleu_p_value" not in doc["rows"][1]  # the per-seed test is gone
    assert any("the test behind the marks and the verdicts" in line for line in doc["legend"])


# --- models that did not learn, pipeline checks -------------------------------------------------------------------


def test_a_row_that_did_not_learn_to_translate_is_not_trainable_and_gives_no_verdict(tmp_path):
    out = fx.make_study(tmp_path / "s", rows=ROWS, storage=None, budgets=HALF, ratios={("A1", 0.5): 1.2})
    table = table_of(out, claims(("head", "A1", "bleu", "lower"), ("deep", "C1", "bleu", "lower")))
    (head,) = by_id(table)["head"].comparisons
    assert [b.verdict for b in head.budgets] == ["inconclusive", "reproduced"]  # T/2 withheld, T as tested
    assert head.verdict == "inconclusive"
    cause = "stayed on the language-model plateau at T/2: dev PPL ×1.2 with swapped sources against the base's ×18.0"
    assert head.reason == f"no verdict: A1 not trainable at this preset ({cause} (trained: ×4.2 or more))"
    assert by_id(table)["deep"].verdict == "reproduced"  # the other rows are judged as usual
    cells = {r.name: display_cells(r)["source"] for r in table.rows}
    assert cells == {"base": "×18.0", "A1": "not trainable ×1.2 at T/2", "C1": "×18.0"}
    md = to_markdown(table)
    assert "| source use |" in md and f"NOT TRAINABLE AT THIS PRESET: A1: {cause}" in md
    record = next(r for r in json.loads(to_json(table))["rows"] if r["row"] == "A1")
    assert record["no_source_use"] == "T/2" and record["source_ppl_ratio"] == 18.0
    assert record["not_trainable"].startswith(cause)


def test_a_row_that_uses_its_source_a_little_but_stayed_on_the_plateau_is_not_trainable(tmp_path):
    """C3 at the tiny preset with a 400-step warmup: ×3.6 with swapped sources (above the 2 of a pure language
    model) while the base was at ×113. The threshold comes from the base alone (√113 = 10.6): set aside at T/2, and
    judged at T where it trained."""
    ratios = {("base", 0.5): 113.0, ("base", 1.0): 178.0, ("C1", 0.5): 3.6, ("C1", 1.0): 140.0, ("A1", 0.5): 11.0}
    out = fx.make_study(tmp_path / "s", rows=ROWS, storage=None, budgets=HALF, ratios=ratios)
    table = table_of(out, claims(("head", "A1", "bleu", "lower"), ("deep", "C1", "bleu", "lower")))
    assert table.row("C1").untrainable.keys() == {0.5} and table.row("A1").untrainable == {}  # 11.0 > 10.6
    (deep,) = by_id(table)["deep"].comparisons
    assert deep.verdict == "inconclusive" and "C1 not trainable at this preset" in deep.reason
    assert "×3.6 with swapped sources against the base's ×113.0 (trained: ×10.6 or more)" in deep.reason
    assert by_id(table)["head"].verdict == "reproduced"  # the row that trained is judged
    assert display_cells(table.row("C1"))["delta_bleu"][-1] not in "†‡"  # no mark on a row set aside


def test_a_base_that_did_not_learn_says_so_once_at_the_top(tmp_path):
    out = fx.make_study(tmp_path / "s", rows=ROWS, storage=None, budgets=HALF, ratios={("base", 1.0): 1.05})
    table = table_of(out, claims(("head", "A1", "bleu", "lower"), ("deep", "C1", "ppl", "higher")))
    assert table.nothing_learned.startswith("nothing here learnt to translate: the base 'base'")
    assert "×1.1 at T with swapped sources" in table.nothing_learned
    for cv in table.claims:
        assert cv.verdict == "inconclusive"
        assert cv.comparisons[0].reason == "no verdict: the study gives none (see the top)"
    md = to_markdown(table)
    first = md.split("\n| ")[0]  # everything above the table
    assert "NO VERDICTS: nothing here learnt to translate" in first
    assert md.count("nothing here learnt to translate") == 1 and md.count("swapped sources") <= 2
    assert json.loads(to_json(table))["headline"] == [f"NO VERDICTS: {table.nothing_learned}."]


def test_records_without_the_swapped_source_perplexity_say_nothing_about_it(tmp_path):
    out = fx.make_study(tmp_path / "s", rows=ROWS, storage=None, budgets=HALF)  # ratios=None: old records
    table = table_of(out, claims(("deep", "C1", "bleu", "lower")))
    assert by_id(table)["deep"].verdict == "reproduced"
    assert all(r.source_ratio == {} for r in table.rows) and "source use" not in to_markdown(table)


def test_a_pipeline_check_gives_no_verdict_and_says_why(tmp_path):
    reason = "the smoke preset trains for seconds: it checks the pipeline, its numbers judge nothing"
    out = fx.make_study(tmp_path / "s", rows=ROWS, storage=None, budgets=HALF, meta={"pipeline_check": reason})
    table = table_of(out, claims(("head", "A1", "bleu", "lower"), ("deep", "C1", "bleu", "lower")))
    assert table.withheld == reason
    said = "no verdict: the study gives none (see the top)"
    for cv in table.claims:
        assert cv.verdict == "inconclusive" and cv.comparisons[0].reason == said
        assert cv.comparisons[0].test.p_holm < 0.05  # the numbers are there, the verdict is not
    md = to_markdown(table)
    assert md.index(f"NO VERDICTS: {reason}.") < md.index("| (C) | C1 |")  # said above the table, which is shown
    assert md.count(reason) == 1
    assert all(r["reason"] == said for r in claims_data(table))


# --- power --------------------------------------------------------------------------------------------------------


def test_the_minimum_detectable_effect_is_the_power_formula():
    from scipy import stats

    for df in (math.inf, 5.0):
        test = RowTest(row="R", against="base", metric="bleu", n_row=2, n_against=2, effect=0.1, se=0.5, df=df)
        assert test.mde == pytest.approx((stats.t.ppf(0.975, df) + stats.t.ppf(0.8, df)) * 0.5)
    assert RowTest(row="R", against="base", metric="bleu", n_row=1, n_against=1, effect=0.0).mde is None  # no SE
    assert test.mde == pytest.approx(0.5 * (2.5706 + 0.9195), abs=1e-3)  # t tables, df 5


def _judged(expect: str, mine: list[float], paper: float | None, margin: float | None = None):
    """One comparison of a row against the base, judged at T alone (seed noise from both rows, no sentences)."""
    theirs = [25.0, 25.4]
    noise = pooled_seed_variance([mine, theirs])
    test = compare("R", "base", "bleu", [_s(v) for v in mine], [_s(v) for v in theirs], noise, None)
    test = replace(test, p_holm=test.p)
    compare_to = {"row": "R", "metric": "bleu", "expect": expect} | ({"margin": margin} if margin else {})
    chosen = parse_claims({"claims": [{"id": "c", "text": "t", "compare": [compare_to]}]}, "test")
    numbers = {"R": {"bleu": 25.0 + paper}, "base": {"bleu": 25.0}} if paper is not None else {}
    return judge(chosen, {1.0: {("R", "base", "bleu"): test}}, "base", numbers, metrics=METRICS)[0].comparisons[0]


def _s(value: float) -> SystemScores:
    return SystemScores(score=value)


def test_an_inconclusive_comparison_states_what_the_study_could_have_detected():
    small = _judged("lower", [25.1, 24.9], paper=None)  # a tenth of a BLEU point, seeds 0.3 apart
    mde = small.test.mde
    assert small.verdict == "inconclusive" and abs(small.test.effect) < mde
    assert small.reason == f"|effect| below the detectable {mde:.2f} BLEU" and small.cause == "below_detectable"
    assert comparison_text(small, "base").endswith(f"; |effect| below the detectable {mde:.2f} BLEU")
    noisy = _judged("lower", [21.0, 28.0], paper=-0.9)  # the paper's 0.9 is far below what two noisy seeds detect
    assert noisy.test.mde > 0.9 and noisy.reason == f"too noisy to tell (detectable: {noisy.test.mde:.2f} BLEU)"
    same = _judged("same", [25.1, 25.3], paper=-0.1, margin=0.2)
    assert same.reason.startswith("too noisy to tell (detectable: ") and "wider than the margin ±0.2" in same.reason
    assert noisy.cause == same.cause == "too_noisy"  # the field the report's advice reads, not the words
    reproduced = _judged("lower", [22.0, 22.4], paper=-0.9)
    assert reproduced.reason == "" and reproduced.cause == ""  # reproduced: nothing to explain


def test_each_claim_states_the_design_s_power_at_the_level_its_family_holds_it_to():
    """Power beside the verdict: the effect found four times in five at ALPHA over the family (Holm's first step),
    and the chance of finding the paper's difference; the shifted-t power inverts the detectable effect."""
    one = _judged("lower", [22.0, 22.4], paper=-0.9)
    test = one.test
    assert one.family == 1 and one.detectable == pytest.approx(test.mde)
    assert test.power(-test.mde, 0.05) == pytest.approx(0.8)
    assert test.power(-0.9, 0.05) < 0.8 and test.power(-5.0, 0.05) > 0.8  # power rises with the effect
    assert one.power == pytest.approx(test.power(-0.9, 0.05))
    assert f"; power 80% at {test.mde:.2f}, {one.power:.0%} at the paper's" in comparison_text(one, "base")
    assert _judged("lower", [22.0, 22.4], paper=+0.9).power is None  # the paper's difference the other way
    assert _judged("same", [25.1, 25.3], paper=-0.1, margin=0.2).detectable is None
    # A family of three: each is first held to 0.05 / 3, where a larger effect is needed for the same power.
    theirs = [25.0, 25.4]
    rows = {"R": [22.0, 22.4], "S": [24.0, 24.6], "U": [25.2, 25.5]}
    noise = pooled_seed_variance([*rows.values(), theirs])
    tests = {(r, "base", "bleu"): compare(r, "base", "bleu", [_s(v) for v in vs], [_s(v) for v in theirs], noise, None)
             for r, vs in rows.items()}  # fmt: skip
    compare_to = [{"row": r, "metric": "bleu", "expect": "lower"} for r in rows]
    chosen = parse_claims({"claims": [{"id": "c", "text": "t", "compare": compare_to}]}, "test")
    (claim,) = judge(chosen, {1.0: tests}, "base", {}, metrics=METRICS)
    for cv in claim.comparisons:
        assert cv.family == 3 and cv.family_level == pytest.approx(0.05 / 3)
        assert cv.detectable == pytest.approx(cv.test.detectable(0.05 / 3)) and cv.detectable > cv.test.mde


def test_the_claims_csv_and_json_carry_the_detectable_effect_per_budget(tmp_path):
    out = fx.make_study(tmp_path / "s", rows=ROWS, storage=None, budgets=HALF, ratios={})
    study = json.loads((out / "study.json").read_text())
    study["claims"] = [{"id": "head", "text": "t", "compare": [{"row": "A1", "metric": "bleu", "expect": "lower"}]}]
    (out / "study.json").write_text(json.dumps(study))
    written = build_report(out, ["csv", "json"], plots=False, n_samples=100)
    (line,) = list(csv.DictReader(io.StringIO(written["claims.csv"].read_text())))
    table = table_of(out, n_samples=100)
    (comp,) = table.claims[0].comparisons
    assert float(line["mde"]) == pytest.approx(comp.test.mde, abs=1e-5)
    assert float(line["at0.5_mde"]) == pytest.approx(comp.budgets[0].test.mde, abs=1e-5)
    (claim,) = json.loads(written["json"].read_text())["claims"]
    assert claim["mde"] == pytest.approx(comp.test.mde, abs=1e-5) and claim["budgets"] == "T/2, T"


# --- the table: gain from T/2 to T, precision ---------------------------------------------------------------------


def test_the_plateau_column_shows_the_gain_from_half_the_budget(tmp_path):
    out = fx.make_study(tmp_path / "s", rows=ROWS, storage=None, budgets=HALF)
    table = table_of(out)
    for row in table.rows:
        gains = []
        for seed in (0, 1):
            record = json.loads((out / "records" / f"{row.name}__seed{seed}.json").read_text())
            gains.append(record["metrics"]["bleu"] - record["budgets"][0]["metrics"]["bleu"])
        assert row.budget_gain.mean == pytest.approx(statistics.fmean(gains))
        assert display_cells(row)["plateau"] == f"{statistics.fmean(gains):+.1f}"
    assert "plateau: BLEU at T minus BLEU at T/2" in to_markdown(table)
    old = table_of(fx.make_study(tmp_path / "old", rows=ROWS, storage=None))
    assert display_cells(old.row("A1"))["plateau"].startswith("rising")  # records without budgets: as before


def test_the_report_states_its_precision_at_each_budget(tmp_path):
    out = fx.make_study(tmp_path / "s", rows=ROWS, storage=None, budgets=HALF)
    table = table_of(out, claims(("a", "A1", "bleu", "lower"), ("c", "C1", "bleu", "lower")))  # every row's BLEU

    def half_width(budget) -> float:
        return (budget.test.ci[1] - budget.test.ci[0]) / 2

    at = enumerate((0.5, 1.0))
    halves = {f: statistics.median(half_width(cv.comparisons[0].budgets[i]) for cv in table.claims) for i, f in at}
    assert table.precision == pytest.approx(halves)
    line = f"median 95% CI half-width of ΔBLEU vs base: T/2 {halves[0.5]:.2f}, T {halves[1.0]:.2f}"
    assert line in to_markdown(table) and line in json.loads(to_json(table))["legend"]


# --- plots --------------------------------------------------------------------------------------------------------


def test_each_claim_has_a_plot_beside_it_in_the_page(tmp_path):
    out = fx.make_study(tmp_path / "s", rows=ROWS, storage=None, budgets=HALF, ratios={})
    study = json.loads((out / "study.json").read_text())
    study["rows"][1]["paper"] = {"ppl": 5.29, "bleu": 24.9}
    study["rows"][0]["paper"] = {"ppl": 4.92, "bleu": 25.8}
    study["claims"] = [
        {"id": "heads", "text": "t", "compare": [{"row": "A1", "metric": "bleu", "expect": "lower"},
                                                 {"row": "A1", "metric": "ppl", "expect": "higher"}]},
        {"id": "same", "text": "t", "compare": [{"row": "C1", "metric": "chrf", "expect": "same", "margin": 1.0}]},
    ]  # fmt: skip
    (out / "study.json").write_text(json.dumps(study))
    written = build_report(out, ["html"], n_samples=100)
    for claim in ("heads", "same"):
        assert written[f"plot:claim_{claim}"].read_bytes().startswith(b"\x89PNG")
    html = written["html"].read_text()
    claims_table = html[html.index('<table id="claims">') : html.index("</table>")]
    assert claims_table.count("<img ") == 2 and "effect vs base, by budget" in claims_table
    n_png = sum(key.startswith("plot:") and not key.endswith(".svg") for key in written)
    assert html.count("<img ") == n_png  # each plot once: the claims' beside them, the others below the table


def test_a_claim_plot_draws_both_budgets_the_paper_and_the_margin(tmp_path):
    from ablate.reports.plots import claim_figure

    out = fx.make_study(tmp_path / "s", rows=ROWS, storage=None, budgets=HALF)
    chosen = parse_claims(
        {
            "claims": [
                {"id": "c", "text": "t", "compare": [{"row": "A1", "metric": "bleu", "expect": "same", "margin": 1}]}
            ]
        },
        "test",
    )
    table = table_of(out, chosen)
    fig = claim_figure(table.claims[0], table)
    (ax,) = fig.axes
    labels = ax.get_legend().get_texts()
    assert [t.get_text() for t in labels] == ["paper", "margin", "T/2", "T"]
    paper = table.claims[0].comparisons[0].paper_delta
    assert paper == pytest.approx(24.9 - 25.8)
    assert any(line.get_xdata()[0] == pytest.approx(paper) for line in ax.lines if line.get_marker() == "D")


def test_fixture_budgets_are_real_files(tmp_path):
    """The fixture writes each score's per-sentence NLL so that it sums to that score's perplexity."""
    out = fx.make_study(tmp_path / "s", rows=ROWS[:1], seeds=(0,), storage=None, budgets=HALF)
    record = json.loads((out / "records" / "base__seed0.json").read_text())
    for score in (record, record["budgets"][0]):
        rows = [line.split("\t") for line in (out / score["sentence_nll"]).read_text().splitlines()]
        nll, tokens = sum(float(a) for a, _ in rows), sum(int(b) for _, b in rows)
        assert math.exp(nll / tokens) == pytest.approx(score["metrics"]["ppl"], rel=1e-4)


def test_one_seed_per_row_gives_no_verdict_however_large_the_effect(tmp_path):
    """A study stopped after its first seed (seed by seed is how a sweep queues): sentence noise alone would judge one
    training run as if it were the row, so no comparison is decisive and no row is marked until seeds are known."""
    out = fx.make_study(tmp_path / "s", rows=ROWS, seeds=(0,), storage=None, budgets=HALF)
    table = table_of(out, claims(("deep", "C1", "bleu", "lower")))
    (deep,) = by_id(table)["deep"].comparisons
    assert deep.test.p_holm < 0.05 and deep.test.se_seeds is None  # the sentences alone would call it
    assert deep.verdict == "inconclusive" and "seed noise not estimated" in deep.reason
    assert table.row("C1").mark == "" and not display_cells(table.row("C1"))["delta_bleu"].endswith(("†", "‡"))
