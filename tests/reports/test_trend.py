"""`ablate compare A B C --claims`: the paper's claims over studies at several sizes, each comparison's trend."""

from __future__ import annotations

import json
import math

import pytest
import reports_fixtures as fx
from ablate.ablations.cli import main as ablate
from ablate.ablations.results.load import load_results
from ablate.ablations.statistics.trend import classify
from ablate.reports.htmlpage import trend_to_html
from ablate.reports.latex import trend_to_latex
from ablate.reports.plots import plot_trend
from ablate.reports.sequential import report_table
from ablate.reports.trend import rung_line, size_trend, summary_line
from ablate.reports.writers import Context, get_writer

CLAIMS = [
    {"id": "C-depth", "text": "One layer is worse", "section": "6.2",
     "compare": [{"row": "C1", "metric": "bleu", "expect": "lower"}]},
    {"id": "D-dropout", "text": "Dropout helps", "section": "6.2",
     "compare": [{"row": "D1", "metric": "bleu", "expect": "lower"}]},
    {"id": "B-dk", "text": "Smaller d_k hurts", "section": "6.2",
     "compare": [{"row": "B1", "metric": "bleu", "expect": "lower"}]},
]  # fmt: skip
# The paper's differences (Table 3): C1 -2.1, D1 -1.2, B1 -0.7 BLEU. The base corrupts 30% of the words at every rung.
# C1 comes down toward -2.1 (about 10x, 6x, 1x); D1 goes from worse than the base to clearly better (a flip); B1
# stays about 10x the paper's.
RATES = {"C1": (0.50, 0.40, 0.315), "D1": (0.36, 0.30, 0.22), "B1": (0.36, 0.35, 0.37)}
SIZES = {
    "tiny": {},
    "small": {"d_model": 64, "d_ff": 128, "d_k": 16, "d_v": 16},
    "medium": {"d_model": 128, "d_ff": 256, "d_k": 32, "d_v": 32},
}
SAMPLES = "200"


def _rows(i: int) -> list[tuple]:
    by_name = {r[0]: r for r in fx.TABLE3_ROWS}
    return [(n, *by_name[n][1:3], RATES[n][i] if n in RATES else by_name[n][3]) for n in ("base", "B1", "C1", "D1")]


def _study(root, i: int, preset: str, **kwargs):
    return fx.make_study(root / f"table3-{preset}", rows=_rows(i), seeds=(0, 1, 2), storage=None, preset=preset,
                         meta={"claims": CLAIMS}, base_model=SIZES[preset], **kwargs)  # fmt: skip


@pytest.fixture(scope="module")
def rungs(tmp_path_factory):
    """The three studies, largest first (the command orders them by size, not by the order given)."""
    root = tmp_path_factory.mktemp("rungs")
    return [_study(root, i, preset) for i, preset in reversed(list(enumerate(SIZES)))]


def _tables(dirs):
    return [report_table(load_results(d, use_optuna=False), n_samples=int(SAMPLES)) for d in dirs]


@pytest.fixture(scope="module")
def trend(rungs):
    return size_trend(_tables(rungs))


def _by_claim(trend):
    return {claim.id: comp for claim, comp in trend.comparisons}


def test_rungs_are_ordered_by_the_bases_size_and_each_comparison_classified(trend):
    assert [r.label for r in trend.rungs] == ["table3 (tiny)", "table3 (small)", "table3 (medium)"]
    sizes = [r.params_m for r in trend.rungs]
    assert sizes == sorted(sizes) and sizes[0] * 3 < sizes[1] and sizes[1] * 3 < sizes[2]
    comps = _by_claim(trend)
    assert comps["C-depth"].trend == "toward", comps["C-depth"].why
    assert comps["D-dropout"].trend == "flips", comps["D-dropout"].why
    assert comps["B-dk"].trend == "flat", comps["B-dk"].why
    # C1's interval at the largest rung holds the paper's -2.1; B1's (about 10x) does not
    assert comps["C-depth"].paper_inside == "table3 (medium)" and comps["B-dk"].paper_inside is None
    ratios = [p.paper_ratio for p in comps["C-depth"].points]
    assert ratios[0] > ratios[1] > ratios[2] > 0 and abs(ratios[2] - 1) < 0.5
    assert "against the paper's sign at the largest rung" in comps["D-dropout"].why


def test_each_rung_is_its_own_reports_verdicts_and_effects(rungs, trend):
    tables = sorted(_tables(rungs), key=lambda t: t.row("base").params_m)
    for i, table in enumerate(tables):
        for cv in table.claims:
            (comp,) = cv.comparisons
            point = _by_claim(trend)[cv.claim.id].points[i]
            assert point is not None and point.verdict == comp.verdict and point.effect == comp.test.effect
            assert (point.low, point.high) == comp.test.ci and point.paper_delta == pytest.approx(comp.paper_delta)
        claim = next(c for c in trend.claims if c.id == "C-depth")
        assert claim.verdicts[i] == next(cv.verdict for cv in table.claims if cv.claim.id == "C-depth")


@pytest.mark.parametrize(
    ("points", "expected"),
    [
        # (effect, low, high, paper) per rung, smallest first; the paper's difference -2
        ([(-20, -24, -16, -2), (-4, -8, 0, -2)], "toward"),  # 10x -> 2x
        ([(-3, -5, -1, -2), (-20, -24, -16, -2)], "away"),  # 1.5x -> 10x
        ([(-20, -24, -16, -2), (-18, -22, -14, -2)], "flat"),  # within the noise
        ([(-2, -3.9, -0.1, -2), (3, -1, 7, -2)], "away"),  # to the other side of 0, though not clear of it
        ([(-2, -3, -1, -2), (2, 1, 3, -2)], "flips"),  # both clear of 0
        ([(-20, -24, -16, -2), (-2, -4, 0, -2), (-20, -24, -16, -2)], "mixed"),  # there and back
        ([(-20, -24, -16, -2), (-19, -23, -15, -2), (-4, -8, 0, -2)], "toward"),  # a step within the noise, then one
        ([(-20, -24, -16, -2)], "n/a"),  # one rung
        ([(-20, -24, -16, 0.1), (-2, -4, 0, 0.1)], "n/a"),  # no paper difference to follow
        ([(-2, -3, -1, None), (2, 1, 3, None)], "flips"),  # a flip needs no paper
    ],
)
def test_the_classification_rule(points, expected):
    trend, why = classify(points, [f"r{i}" for i in range(len(points))])
    assert trend == expected, why


def test_a_rung_where_the_row_did_not_train_is_shown_and_left_out(tmp_path):
    """C1 at the middle rung never left the language-model plateau: its cell says so and the trend rests on the
    other two rungs."""
    dirs = [_study(tmp_path, 0, "tiny"), _study(tmp_path, 1, "small", ratios={("C1", 1.0): 1.2}),
            _study(tmp_path, 2, "medium")]  # fmt: skip
    comp = _by_claim(size_trend(_tables(dirs)))["C-depth"]
    assert [comp.usable(i) for i in range(3)] == [True, False, True]
    assert comp.trend == "toward" and comp.why.count("x ->") == 1  # two ratios: the middle one left out
    md = get_writer("md", "trend").write(size_trend(_tables(dirs)), Context())
    assert "(not in the trend: C1 not trainable at this preset" in md


def test_markdown_latex_and_html_carry_the_trend(trend, tmp_path):
    plot = plot_trend(trend, tmp_path, "trend")
    assert plot is not None and plot.png.stat().st_size > 0 and plot.svg.stat().st_size > 0
    md = get_writer("md", "trend").write(trend, Context(plots=(plot,)))
    assert md is not None
    line = next(x for x in md.splitlines() if x.startswith("| C-depth"))
    assert "10." in line and "toward:" in line and "inside the interval at table3 (medium)" in line
    assert "| table3 (tiny), base 0.0648M |" in md and "1 toward the paper's, 1 flips, 1 flat" in md
    assert "![" in md and "(trend.png)" in md
    tex = trend_to_latex(trend, plot.png.name)
    assert r"\begin{tabular}" in tex and "flips" in tex and r"\includegraphics[width=\linewidth]{trend.png}" in tex
    html = trend_to_html(trend, [plot.png])
    assert "<b>flat</b>" in html and "data:image/png;base64," in html and "table3 (medium), base" in html


def test_the_command_prints_the_trend_and_writes_the_plot(rungs, capsys):
    assert ablate(["compare", *map(str, rungs), "--claims", "--samples", SAMPLES]) == 0
    out = capsys.readouterr().out
    assert "## Claims over model size: table3 (tiny) < table3 (small) < table3 (medium)" in out
    assert "| flips: -8.64 at table3 (tiny), +11.03 at table3 (medium)" in out
    png = rungs[0].parent / "trends" / "table3-tiny-vs-table3-small-vs-table3-medium.png"
    assert f"plot: {png} and {png.with_suffix('.svg')}" in out
    assert png.is_file() and png.with_suffix(".svg").is_file()


def test_the_command_writes_tex_and_html_with_the_plot_beside(rungs, tmp_path, capsys):
    for fmt, marker in (("tex", r"\includegraphics"), ("html", "data:image/png;base64,")):
        target = tmp_path / f"trend.{fmt}"
        assert ablate(["compare", *map(str, rungs), "--claims", "--samples", SAMPLES, "--out", str(target)]) == 0
        assert marker in target.read_text(encoding="utf-8")
        assert (tmp_path / "trend.png").is_file() and (tmp_path / "trend.svg").is_file()
        assert f"table: {target}" in capsys.readouterr().out


def test_two_studies_of_different_sizes_give_the_trend(rungs, capsys):
    assert ablate(["compare", str(rungs[0]), str(rungs[2]), "--claims", "--samples", SAMPLES]) == 0
    out = capsys.readouterr().out
    assert "| C-depth" in out and "toward: " in out


def test_a_directory_that_is_not_a_study_is_one_line_and_exit_2(rungs, tmp_path, capsys):
    (tmp_path / "notes").mkdir()
    assert ablate(["compare", str(rungs[0]), str(rungs[1]), str(tmp_path / "notes"), "--claims"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "has no study.json" in err


def test_studies_of_one_size_make_no_trend(rungs, tmp_path, capsys):
    twin = _study(tmp_path, 0, "tiny")
    assert ablate(["compare", str(rungs[2]), str(twin), str(rungs[1]), "--claims", "--samples", SAMPLES]) == 2
    assert "bases of one size" in capsys.readouterr().err
    assert ablate(["compare", *map(str, rungs), "--samples", SAMPLES]) == 2
    assert "go with --claims" in capsys.readouterr().err


def test_sizes_are_read_from_the_records(trend):
    assert all(math.isfinite(r.params_m) for r in trend.rungs)
    assert trend.rungs[0].params_m == pytest.approx(fx.params_of(fx.BASE_MODEL) / 1e6)


def test_a_comparison_whose_rows_no_rung_ran_is_left_out_and_named(rungs):
    """A claims file names rows a ladder of a few rows never runs (A1 here): its comparison is no trend at all, so the
    table leaves it out and the summary names it; a claim with nothing left goes too."""
    extra = [*CLAIMS, {"id": "A-heads", "text": "One head is worse", "compare": [
        {"row": "A1", "metric": "bleu", "expect": "lower"}, {"row": "B1", "metric": "ppl", "expect": "higher"}]},
        {"id": "E-pos", "text": "Learned positions are the same", "compare": [
            {"row": "E1", "metric": "bleu", "expect": "same", "margin": 1.0}]}]  # fmt: skip
    from ablate.ablations.study.claims import parse_claims

    claims = parse_claims(extra, "test")
    tables = [report_table(load_results(d, use_optuna=False), n_samples=200, claims=claims) for d in rungs[1:]]
    trend = size_trend(tables)
    ids = [claim.id for claim in trend.claims]
    assert "E-pos" not in ids and "A-heads" in ids  # B1's perplexity is run; A1 and E1 are not
    kept = [c.row for claim in trend.claims if claim.id == "A-heads" for c in claim.comparisons]
    assert kept == ["B1"]
    assert trend.not_run == ("A1 vs base, BLEU", "E1 vs base, BLEU")
    assert "left out, their rows run at no rung: A1 vs base, BLEU, E1 vs base, BLEU" in summary_line(trend)


def test_a_rung_whose_base_has_not_finished_is_one_line_saying_what_to_do(tmp_path, capsys):
    """A study under way (its base's trials still training) has no size yet: the command says which folder and how to
    see where it stands, rather than ordering the rungs by a guess."""
    dirs = [_study(tmp_path, 0, "tiny"), _study(tmp_path, 2, "medium")]
    for record in (dirs[1] / "records").glob("base__seed*.json"):
        record.unlink()
    assert ablate(["compare", *map(str, dirs), "--claims", "--samples", SAMPLES]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert f"{dirs[1]}: the base row has no complete trial" in err and f"ablate status {dirs[1]}" in err


def test_a_rung_under_way_counts_its_complete_trials_beside_its_seeds(tmp_path):
    """The seeds a rung lists are the ones its sweep queued; while some are still training, the rung's line says how
    many of its trials are complete, so a reader does not take one seed's cell for three."""
    dirs = [_study(tmp_path, 0, "tiny"), _study(tmp_path, 2, "medium")]
    (dirs[1] / "records" / "D1__seed2.json").unlink()
    for d in dirs:  # a declared row no sweep queued (a sweep run with --rows): the table shows it as pending
        spec = json.loads((d / "study.json").read_text(encoding="utf-8"))
        spec["rows"].append({**spec["rows"][0], "name": "A1", "group": "A"})
        (d / "study.json").write_text(json.dumps(spec), encoding="utf-8")
    small, large = size_trend(_tables(dirs)).rungs
    assert large.trials == (11, 12) and "seeds 0, 1, 2 (11 of 12 trials complete), verdicts" in rung_line(large)
    assert small.trials == (12, 12) and "trials complete" not in rung_line(small)
