"""Claims and their verdicts: the statistics on constructed results, the Holm correction, a row that gives no
verdict, the plateau flag, a user's claims file end to end, and bad claims files. Verdicts across budgets:
test_reports_budgets.py."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import reports_fixtures as fx
from ablate.ablations.results.record import Record
from ablate.ablations.statistics.convergence import convergence
from ablate.ablations.statistics.significance import (
    SystemScores,
    compare,
    compare_rows,
    pooled_seed_variance,
    resample_weights,
)
from ablate.ablations.statistics.variance import holm
from ablate.data.errors import AblateError
from ablate.lightning_modules.metrics import METRICS
from ablate.reports.claims import Comparison, comparison_verdict, judge, load_claims, parse_claims


def systems(values: list[float]) -> list[SystemScores]:
    return [SystemScores(score=v) for v in values]


def seed_var(*rows: list[float]):
    return pooled_seed_variance(list(rows))


# --- statistics ---------------------------------------------------------------------------------------------------


def test_holm_matches_the_step_down_procedure():
    # Sorted p: 0.01, 0.02, 0.03, 0.5 -> 4*0.01, 3*0.02, 2*0.03 (monotone), 1*0.5.
    assert holm([0.03, 0.01, None, 0.5, 0.02]) == pytest.approx([0.06, 0.04, None, 0.5, 0.06])
    assert holm([0.04, 0.04]) == pytest.approx([0.08, 0.08])  # monotone: a later rank never drops below an earlier
    assert holm([0.9, 0.3]) == pytest.approx([0.9, 0.6])  # the largest p is multiplied by 1
    assert holm([0.9, 0.8]) == pytest.approx([1.0, 1.0])  # 2 * 0.8 capped at 1, and the rest kept above it


def test_pooled_seed_variance_uses_every_row_with_two_seeds():
    var, df = pooled_seed_variance([[1.0, 3.0], [10.0, 10.0, 13.0], [5.0]])
    assert df == 1 + 2
    assert var == pytest.approx((1 + 1 + (1 + 1 + 4)) / 3)  # squared deviations from each row's own mean
    assert pooled_seed_variance([[1.0], [2.0]]) == (None, 0)


def test_clear_win_clear_loss_and_noise():
    noise = seed_var([25.0, 25.4], [24.8, 25.3], [26.0, 25.5], [25.1, 25.6])
    win = compare("R", "base", "bleu", systems([28.0, 28.4]), systems([25.0, 25.4]), noise, None)
    loss = compare("R", "base", "bleu", systems([22.0, 21.6]), systems([25.0, 25.4]), noise, None)
    same = compare("R", "base", "bleu", systems([25.3, 24.9]), systems([25.0, 25.4]), noise, None)
    assert win.effect == pytest.approx(3.0) and win.ci[0] > 0 and win.p < 0.01
    assert loss.effect == pytest.approx(-3.4) and loss.ci[1] < 0 and loss.p < 0.01
    assert same.ci[0] < 0 < same.ci[1] and same.p > 0.5
    higher, lower = (
        Comparison(row="R", metric="bleu", expect="higher"),
        Comparison(row="R", metric="bleu", expect="lower"),
    )
    for test in (win, loss, same):
        object.__setattr__(test, "p_holm", test.p)
    assert comparison_verdict(higher, win, METRICS[higher.metric].higher_is_better) == "reproduced"
    assert comparison_verdict(higher, loss, METRICS[higher.metric].higher_is_better) == "contradicted"
    assert comparison_verdict(lower, loss, METRICS[lower.metric].higher_is_better) == "reproduced"
    assert comparison_verdict(higher, same, METRICS[higher.metric].higher_is_better) == "inconclusive"


def test_seed_noise_widens_the_interval():
    quiet = seed_var([25.0, 25.1], [25.2, 25.3], [24.9, 25.0])
    loud = seed_var([23.0, 27.0], [22.0, 28.0], [24.0, 26.0])
    a = compare("R", "base", "bleu", systems([26.0, 26.1]), systems([25.0, 25.1]), quiet, None)
    b = compare("R", "base", "bleu", systems([26.0, 26.1]), systems([25.0, 25.1]), loud, None)
    assert a.effect == b.effect
    assert b.ci[1] - b.ci[0] > 5 * (a.ci[1] - a.ci[0])
    assert a.p < 0.05 < b.p


def test_one_seed_everywhere_says_seed_noise_is_unknown():
    test = compare("R", "base", "bleu", systems([26.0]), systems([25.0]), seed_var([26.0], [25.0]), None)
    assert test.se_seeds is None and any("one seed" in n for n in test.notes)


def test_sentence_bootstrap_counts_test_set_noise():
    """Two systems that differ on only 3 of 200 sentences: a 1.5% accuracy gap is inside sentence noise, while the
    same gap spread evenly over every sentence is not."""
    rng = np.random.default_rng(0)
    n = 200
    base = rng.integers(0, 2, size=n).astype(float)

    def system(correct: np.ndarray) -> SystemScores:
        stats = np.stack([correct, np.ones(n)], axis=1)  # accuracy as sum(correct) / sum(1)
        return SystemScores(score=100 * correct.mean(), stats=stats, scorer=lambda s: 100 * s[0] / s[1])

    lumpy = base.copy()
    lumpy[np.flatnonzero(base == 0)[:3]] = 1.0
    weights = resample_weights(n, 500)
    test = compare("R", "base", "bleu", [system(lumpy)], [system(base)], (None, 0), weights)
    assert test.effect == pytest.approx(1.5)
    assert test.se_sentences is not None and test.se_sentences > 0.5
    assert test.ci[0] < 0 < test.ci[1] or test.p > 0.01


def test_equivalence_inside_and_outside_the_margin():
    noise = seed_var([25.0, 25.2], [24.9, 25.1], [25.3, 25.1])
    same = Comparison(row="E1", metric="bleu", expect="same", margin=1.0)
    close = compare("E1", "base", "bleu", systems([25.1, 25.2]), systems([25.0, 25.2]), noise, None)
    far = compare("E1", "base", "bleu", systems([28.0, 28.2]), systems([25.0, 25.2]), noise, None)
    noisy = compare("E1", "base", "bleu", systems([25.5, 25.6]), systems([25.0, 25.2]), seed_var([20, 30]), None)
    assert (
        comparison_verdict(same, close, METRICS[same.metric].higher_is_better) == "reproduced"
        and close.p_tost(1.0) < 0.05
    )
    assert comparison_verdict(same, far, METRICS[same.metric].higher_is_better) == "contradicted"
    assert (
        comparison_verdict(same, noisy, METRICS[same.metric].higher_is_better) == "inconclusive"
    )  # no significant difference is not equivalence


def test_test_rows_applies_holm_over_rows_against_the_base():
    scores = {"base": systems([25.0, 25.2]), "A": systems([26.0, 26.2]), "B": systems([25.1, 25.2])}
    scores |= {f"x{i}": systems([25.0 + i / 10, 25.1 + i / 10]) for i in range(5)}
    tests = compare_rows(scores, [(r, "base") for r in scores if r != "base"], "bleu")
    ps = {k[0]: t.p for k, t in tests.items()}
    adjusted = {k[0]: t.p_holm for k, t in tests.items()}
    assert adjusted == pytest.approx(dict(zip(ps, holm(list(ps.values())), strict=True)))
    assert adjusted["A"] > ps["A"]


def test_an_excluded_row_gets_no_verdict():
    claim = parse_claims(
        {"claims": [{"id": "c", "text": "t", "compare": [{"row": "A", "metric": "bleu", "expect": "higher"}]}]}, "x"
    )
    scores = {"base": systems([25.0, 25.2]), "A": systems([30.0, 30.2])}
    tests = {1.0: compare_rows(scores, [("A", "base")], "bleu")}
    assert judge(claim, tests, "base", metrics=METRICS)[0].verdict == "reproduced"
    verdict = judge(claim, tests, "base", metrics=METRICS, excluded={1.0: {"A": "diverged"}})[0]
    (comparison,) = verdict.comparisons
    assert verdict.verdict == "inconclusive" and comparison.reason == "no verdict: A diverged"
    assert comparison.budgets[0].excluded == ("A diverged",) and comparison.test.p_holm < 0.05


# --- the plateau flag ---------------------------------------------------------------------------------------------


def record(curve: list[tuple[int, float]], *, ppl: float = 5.0, state: str = "complete", reason: str | None = None):
    val = [{"step": s, "bleu": b, "ppl": 10.0} for s, b in curve]
    return Record(
        path=Path("r.json"),
        row="base",
        group="base",
        seed=0,
        state=state,
        reason=reason,
        overrides={},
        config={"model": {"vocab_size": 1000}},
        metrics={"ppl": ppl, "bleu": curve[-1][1] if curve else None},
        curves={"val": val},
        hypotheses=None,
        references=None,
        raw={},
    )


def test_plateau_flag_on_converged_and_rising_curves():
    assert convergence(record([(400, 10.0), (800, 24.0), (1200, 25.5), (1600, 26.1)])).state == "plateau"
    rising = convergence(record([(400, 10.0), (800, 18.0), (1200, 23.0)]))
    assert rising.state == "rising" and rising.delta == pytest.approx(5.0) and rising.text == "rising +5.0"
    assert convergence(record([(400, 30.0), (800, 27.0)])).state == "falling"
    assert convergence(record([(400, 1.0)])).state == "unknown"


def test_a_model_still_learning_at_bleu_zero_is_not_at_its_plateau():
    """An untrained model's BLEU sits at 0 while its perplexity falls: flat BLEU alone is no plateau."""
    learning = record([(30, 0.0), (60, 0.0)])
    learning.curves["val"][0]["ppl"], learning.curves["val"][1]["ppl"] = 206.2, 191.0  # the smoke preset's base
    state = convergence(learning)
    assert state.state == "rising" and state.text == "rising (PPL -7%)" and "train longer" in state.detail
    settled = record([(3000, 52.2), (3200, 52.9)])
    settled.curves["val"][0]["ppl"], settled.curves["val"][1]["ppl"] = 1.900, 1.895  # the tiny preset's base
    assert convergence(settled).state == "plateau"


def test_plateau_compares_the_same_sentences():
    """The final validation decodes the whole dev set; its `bleu_tracked` (the subset the periodic ones decode) is
    what the last step is compared on."""
    rec = record([(400, 20.0), (800, 30.0)])
    rec.curves["val"][-1]["bleu_tracked"] = 20.5
    assert convergence(rec).state == "plateau"


def test_a_finite_blow_up_is_flagged_diverged():
    assert convergence(record([(400, 0.1), (800, 0.1)], ppl=5e21)).state == "diverged"
    failed = record([], state="failed", reason="diverged: training loss became nan at step 12")
    assert convergence(failed).state == "diverged"


# --- claims files -------------------------------------------------------------------------------------------------

ROWS = ["base", "A1", "C1", "E1"]


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "claims.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def test_the_shipped_claims_file_names_table3_rows():
    from ablate.ablations.study.definition import load_study

    study = load_study("table3")
    assert {c.id for c in study.claims} >= {"A-single-head", "B-small-dk", "C-bigger-better", "E-learned-positions"}
    equivalence = next(c for c in study.claims if c.id == "E-learned-positions").compare[0]
    assert equivalence.expect == "same" and equivalence.margin == 1.0


def test_claim_c_compares_rows_c_only_and_the_big_row_has_its_own_claim():
    """Section 6.2: "in rows (C) ... bigger models are better". The big row is not in rows (C) and changes dropout
    and steps as well as size, so it is Table 3's own last claim (26.4 against 25.8), not part of claim C."""
    from ablate.ablations.study.definition import load_study

    study = load_study("table3")
    groups = {row.name: row.group for row in study.rows}
    claims = {c.id: c for c in study.claims}
    assert {groups[comp.row] for comp in claims["C-bigger-better"].compare} == {"C"}
    (big,) = claims["big-better"].compare
    assert (big.row, big.metric, big.expect) == ("big", "bleu", "higher")
    assert sum(comp.row == "big" for c in study.claims for comp in c.compare) == 1


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("claims: [{id: x, compare: [{row: Z9, metric: bleu, expect: lower}]}]", "unknown row 'Z9'"),
        ("claims: [{id: x, compare: [{row: A1, metric: meteor, expect: lower}]}]", "unknown metric 'meteor'"),
        ("claims: [{id: x, compare: [{row: A1, metric: bleu, expect: worse}]}]", "expect must be one of"),
        ("claims: [{id: x, compare: [{row: E1, metric: bleu, expect: same}]}]", "needs a positive 'margin'"),
        ("claims: [{id: x, compare: []}]", "non-empty list"),
        ("claims: [{id: x, colour: red, compare: [{row: A1, metric: bleu, expect: lower}]}]", "unknown key 'colour'"),
        ("claims: [", "not valid YAML"),
    ],
)
def test_bad_claims_files_name_the_problem(tmp_path, text, message):
    with pytest.raises(AblateError, match=message) as err:
        load_claims(write(tmp_path, text), ROWS, "base")
    assert str(write(tmp_path, text)) in str(err.value) and "\n" not in str(err.value)


def _results(tmp_path: Path) -> Path:
    rows = [r for r in fx.TABLE3_ROWS if r[0] in ("base", "A1", "C1", "E1", "big")]
    return fx.make_study(tmp_path / "out", rows=rows)


def _run(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "ablate.ablations.cli", *args], capture_output=True, text=True, cwd=cwd
    )


def _report_with(out: Path, claims: Path) -> tuple[dict, dict[str, str]]:
    """`ablate report OUT --claims FILE` in a real process; the JSON report and its verdict per claim id."""
    done = _run("report", str(out), "--claims", str(claims), "--no_plots", "--samples", "200", cwd=Path.cwd())
    assert done.returncode == 0, done.stderr
    doc = json.loads((out / "report" / "table3-smoke.json").read_text())
    return doc, {c["claim"]: c["verdict"] for c in doc["claims"]}


def test_a_users_claims_file_is_judged_in_every_format(tmp_path):
    out = _results(tmp_path)
    claims = write(
        tmp_path,
        "claims:\n"
        "  - {id: deep-helps, text: One layer is worse, compare: [{row: C1, metric: bleu, expect: lower}]}\n"
        "  - {id: wide-helps, text: Wider is better, compare: [{row: big, metric: chrf, expect: higher}]}\n"
        "  - {id: one-head, text: One head is better, compare: [{row: A1, metric: bleu, expect: higher}]}\n",
    )
    doc, verdicts = _report_with(out, claims)
    report = out / "report"
    # The fixture's curves still rise: the report says so, but a plateau no longer gates the verdicts.
    assert verdicts == {"deep-helps": "reproduced", "wide-helps": "reproduced", "one-head": "contradicted"}
    effects = {c["claim"]: c["effect"] for c in doc["claims"]}
    assert effects["deep-helps"] < 0 < effects["wide-helps"] and effects["one-head"] < 0
    md = (report / "table3-smoke.md").read_text()
    assert "One layer is worse" in md and "NOT AT PLATEAU" in md and "not checked across budgets" in md
    html = (report / "table3-smoke.html").read_text()
    assert html.index("One head is better") < html.index('id="report-table"')  # verdicts near the top
    assert "Wider is better" in (report / "table3-smoke.tex").read_text()
    assert "one-head" in (report / "table3-smoke.claims.csv").read_text()


def test_verdicts_follow_the_numbers_at_their_plateau_too(tmp_path):
    out = _results(tmp_path)
    for path in (out / "records").glob("*.json"):  # flatten every curve: each row now at its plateau
        rec = json.loads(path.read_text())
        for point in rec["curves"]["val"]:
            point["bleu"], point["ppl"] = rec["metrics"]["bleu"], rec["metrics"]["ppl"]
        path.write_text(json.dumps(rec))
    claims = write(
        tmp_path,
        "claims:\n"
        "  - {id: deep-helps, text: t, compare: [{row: C1, metric: bleu, expect: lower}]}\n"
        "  - {id: one-head, text: t, compare: [{row: A1, metric: bleu, expect: higher}]}\n"
        "  - {id: positions, text: t, compare: [{row: E1, metric: bleu, expect: same, margin: 0.01}]}\n",
    )
    doc, verdicts = _report_with(out, claims)
    assert verdicts["deep-helps"] == "reproduced"  # C1 corrupts twice the words of the base
    assert verdicts["one-head"] == "contradicted"  # A1 is clearly worse, the claim said better
    assert verdicts["positions"] == "inconclusive"  # a 0.01 BLEU margin is far inside the noise
    positions = next(c for c in doc["claims"] if c["claim"] == "positions")
    assert positions["reason"].startswith("too noisy to tell (detectable: ") and positions["mde"] > 0.01
    assert all(row["plateau"] == "plateau" for row in doc["rows"])


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("claims: [{id: x, compare: [{row: Z9, metric: bleu, expect: lower}]}]", "unknown row 'Z9'"),
        ("claims: [{id: x, compare: [{row: A1, metric: rouge, expect: lower}]}]", "unknown metric 'rouge'"),
    ],
)
def test_bad_claims_file_exits_2_with_one_line(tmp_path, text, message):
    out = _results(tmp_path)
    done = _run("report", str(out), "--claims", str(write(tmp_path, text)), "--no_plots", cwd=Path.cwd())
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0] and "Traceback" not in done.stderr
    assert not (out / "report").exists()  # nothing half-written


def test_a_user_study_with_its_own_claims_validates_and_rejects_bad_rows(tmp_path):
    study = tmp_path / "heads.yaml"
    claims = tmp_path / "heads.claims.yaml"
    claims.write_text("claims: [{id: h, text: t, compare: [{row: h1, metric: chrf, expect: lower}]}]\n")
    study.write_text(
        "name: heads\npreset: smoke\nclaims: heads.claims.yaml\n"
        "rows:\n  - {name: base, group: base}\n  - {name: h1, group: heads, model: {n_heads: 1, d_k: 32, d_v: 32}}\n"
    )
    done = _run("studies", str(study), cwd=Path.cwd())
    assert done.returncode == 0, done.stderr
    from ablate.ablations.study.definition import load_study

    assert load_study(study).claims[0].compare[0].metric == "chrf"
    claims.write_text("claims: [{id: h, text: t, compare: [{row: h2, metric: chrf, expect: lower}]}]\n")
    done = _run("studies", str(study), cwd=Path.cwd())
    assert done.returncode == 2 and "unknown row 'h2'" in done.stderr and len(done.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize(
    ("metric", "ci", "verdict"),
    [
        ("bleu", (4.4, 6.1), "reproduced"),  # RoPE at tiny: far better passes a no-worse claim (it failed 'same')
        ("bleu", (-0.8, 0.3), "reproduced"),  # worse end inside the margin
        ("bleu", (-1.6, 0.2), "inconclusive"),  # worse end past the margin, better end inside
        ("bleu", (-3.5, -1.0), "contradicted"),  # worse than the margin throughout
        ("ppl", (-2.0, -0.5), "reproduced"),  # lower perplexity is better
        ("ppl", (1.2, 2.0), "contradicted"),
        ("ppl", (-0.2, 1.4), "inconclusive"),
    ],
)
def test_no_worse_is_non_inferiority_in_the_metrics_own_direction(metric, ci, verdict):
    from ablate.ablations.statistics.significance import RowTest

    test = RowTest(row="R", against="ref", metric=metric, n_row=2, n_against=2, effect=sum(ci) / 2, se=0.3, ci=ci)
    comparison = Comparison(row="R", against="ref", metric=metric, expect="no_worse", margin=1.0)
    assert comparison_verdict(comparison, test, METRICS[comparison.metric].higher_is_better) == verdict
    same = Comparison(row="R", against="ref", metric=metric, expect="same", margin=1.0)
    if ci == (4.4, 6.1):
        assert (
            comparison_verdict(same, test, METRICS[same.metric].higher_is_better) == "contradicted"
        )  # the equivalence it used to be stated as


def test_no_worse_needs_a_margin(tmp_path):
    path = tmp_path / "claims.yaml"
    path.write_text("claims:\n  - {id: x, text: t, compare: [{row: A1, metric: bleu, expect: no_worse}]}\n")
    with pytest.raises(AblateError, match="expect: no_worse needs a positive 'margin'"):
        load_claims(path, rows=["base", "A1"], base="base")
