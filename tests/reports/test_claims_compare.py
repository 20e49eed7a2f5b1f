"""`ablate compare A B --claims`: two studies' verdicts side by side, claim by claim, matched by id."""

from __future__ import annotations

import re
from dataclasses import replace

import pytest
import reports_fixtures as fx
from ablate.ablations.cli import main as ablate
from ablate.reports.api import load
from ablate.reports.claims_compare import compare_claims, summary_line

ROWS = fx.TABLE3_ROWS[:5]  # base, A1, A3, B1, C1


def _claims(*items):
    return [
        {"id": cid, "text": f"claim {cid}", "section": "6.2", "compare": [{"row": row, "metric": "bleu", "expect": e}]}
        for cid, row, e in items
    ]


def _studies(tmp_path):
    # A: A1 and C1 clearly worse than the base (reproduced); B: A1 as good as the base (inconclusive), C1 still worse.
    a = fx.make_study(tmp_path / "a", rows=ROWS, storage=None,
                      meta={"claims": _claims(("A-single-head", "A1", "lower"), ("C-bigger-better", "C1", "lower"),
                                              ("only-a", "B1", "lower"))})  # fmt: skip
    rows_b = [r if r[0] != "A1" else ("A1", "A", r[2], 0.30) for r in ROWS]
    b = fx.make_study(tmp_path / "b", rows=rows_b, storage=None, study="modern",
                      meta={"claims": _claims(("A-single-head", "A1", "lower"), ("C-bigger-better", "C1", "lower"),
                                              ("only-b", "A3", "higher"))})  # fmt: skip
    return a, b


def test_claims_are_matched_by_id_with_each_studys_own_verdict_and_effect(tmp_path):
    a, b = _studies(tmp_path)
    ta, tb = load(a).table(n_samples=200), load(b).table(n_samples=200)
    cmp = compare_claims(ta, tb)
    rows = {r.id: r for r in cmp.rows}
    assert list(rows) == ["A-single-head", "C-bigger-better", "only-a", "only-b"]
    assert cmp.only_a == ("only-a",) and cmp.only_b == ("only-b",)
    head = rows["A-single-head"]
    assert head.a.verdict == "reproduced" and head.b.verdict != "reproduced" and head.agree is None
    expected = {cv.claim.id: cv.comparisons[0].test.effect for cv in tb.claims}
    assert head.b.effects[0].effect == expected["A-single-head"]  # the side is its study's own test, not recomputed
    assert rows["C-bigger-better"].agree is True
    assert rows["only-a"].b is None and rows["only-b"].a is None


def test_the_command_prints_both_verdicts_per_claim_and_writes_tex_and_html(tmp_path, capsys):
    a, b = _studies(tmp_path)
    assert ablate(["compare", str(a), str(b), "--claims", "--samples", "200"]) == 0
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if x.startswith("| claim A-single-head"))
    assert "REPRODUCED: A1 -" in line and "INCONCLUSIVE: A1 " in line
    assert "only in table3 (smoke): only-a" in out and "only in modern (smoke): only-b" in out
    for fmt, marker in (("tex", r"\begin{tabular}"), ("html", "<table>")):
        target = tmp_path / f"claims.{fmt}"
        assert ablate(["compare", str(a), str(b), "--claims", "--samples", "200", "--out", str(target)]) == 0
        assert marker in target.read_text(encoding="utf-8")


def test_a_claim_against_another_row_is_tested_on_that_pair_and_leaves_the_base_precision_alone(tmp_path):
    """The modern study's components are judged against its `paper` row, not the base: each `against` pair gets its
    own test (Holm over the pairs sharing that reference). It used to find no test and read 'untested'."""
    claims = [
        {"id": "c1-vs-a1", "text": "C1 is worse than A1", "compare": [{"row": "C1", "against": "A1", "metric": "bleu",
                                                                        "expect": "lower"}]},
    ]  # fmt: skip
    plain = load(fx.make_study(tmp_path / "plain", rows=ROWS, storage=None)).table(n_samples=200)
    study = fx.make_study(tmp_path / "against", rows=ROWS, storage=None, meta={"claims": claims})
    table = load(study).table(n_samples=200)
    (cv,) = table.claims
    (comp,) = cv.comparisons
    assert comp.verdict == "reproduced", comp  # C1 corrupts 60% of the words, A1 45%
    assert comp.test.against == "A1"
    c1, a1 = table.row("C1").bleu.mean, table.row("A1").bleu.mean
    assert comp.test.effect == pytest.approx(c1 - a1)
    assert table.precision == plain.precision  # the median half-width is over the rows against the base only


def test_one_study_on_two_corpora_gets_columns_by_directory_and_counts_untested_claims_apart(tmp_path):
    """`ablate compare runs/table3-tiny runs/table3-tiny-gettext --claims`: the same study and preset on both sides
    (headed by their directories, not twice 'table3 (smoke)'), and a claim whose row the subset did not run is
    untested there, not 'inconclusive'."""
    claims = _claims(("A-single-head", "A1", "lower"), ("C-bigger-better", "C1", "lower"))
    a = fx.make_study(tmp_path / "table3-smoke", rows=ROWS, storage=None, meta={"claims": claims})
    subset = [r for r in ROWS if r[0] != "A1"]
    b = fx.make_study(tmp_path / "table3-smoke-gettext", rows=subset, storage=None, meta={"claims": claims})
    cmp = compare_claims(load(a).table(n_samples=200), load(b).table(n_samples=200))
    assert (cmp.a, cmp.b) == ("table3-smoke", "table3-smoke-gettext")
    rows = {r.id: r for r in cmp.rows}
    assert rows["A-single-head"].b.verdict == "untested" and rows["C-bigger-better"].agree is True
    assert summary_line(cmp).startswith(
        "2 claims in both: 1 with the same verdict, 0 with opposite verdicts, 0 inconclusive in at least one study, "
        "1 untested in at least one"
    )


@pytest.mark.parametrize("paper", ["letterpaper", "a4paper"])
def test_the_two_shipped_studies_side_by_side_fit_a_page_in_latex(paper, tmp_path):
    """table3 against modern at the tiny preset's sizes (12 claims): the table* was 8 pt too wide and too tall for a
    letter page ('Float too large'); in the table's small type it fits letter and A4, and a longer list is split."""
    from ablate.reports.claims_compare import to_latex
    from test_latex import PDFLATEX, compile_twocolumn, table3_tiny

    if PDFLATEX is None:
        pytest.skip("pdflatex not installed (Debian: apt-get install texlive-latex-base texlive-latex-recommended)")
    tables = [table3_tiny(tmp_path / f"{name}-tiny", name)[0] for name in ("table3", "modern")]
    cmp = compare_claims(*tables)
    tex = to_latex(cmp)
    assert tex.count(r"\begin{table*}") == 1 and "Float too large" not in compile_twocolumn(tex, tmp_path, paper=paper)
    longer = to_latex(replace(cmp, rows=cmp.rows * 3))
    assert longer.count(r"\begin{table*}") >= 2 and "(1 of " in longer
    log = compile_twocolumn(longer, tmp_path, paper=paper)
    assert "Float too large" not in log and "Overfull \\hbox" not in log, re.findall(r"(?:Float too|Overfull).*", log)
