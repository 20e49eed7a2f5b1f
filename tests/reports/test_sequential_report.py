"""The report of a study run at the sequential design (study.json's `allocation`): each comparison carries the
verdict its row stopped with at the level its look spent, a row the design has not finished looking at gives none
(however large its effect looks: the report does not peek), and the method note states the looks and why each
row stopped. `ablate status` says where each row stands and which rows no sweep has queued."""

from __future__ import annotations

import json

import reports_fixtures as fx
from ablate.ablations.results.load import load_results
from ablate.reports.sequential import report_table
from ablate.reports.table import build_table

CLAIMS = [
    {"id": "shallow", "text": "One layer is worse", "compare": [{"row": "C1", "metric": "bleu", "expect": "lower"}]},
    {"id": "learned", "text": "Learned positions", "compare": [{"row": "E1", "metric": "bleu", "expect": "lower"}]},
]
DESIGN = {"design": "sequential", "min_seeds": 2, "max_seeds": 4, "error": "spending",
          "controls": {"base": ["C1", "E1"]}}  # fmt: skip
ROWS = [r for r in fx.TABLE3_ROWS if r[0] in ("base", "C1", "E1")]


def verdicts(table) -> dict[str, tuple[str, str]]:
    return {cv.comparison.row: (cv.verdict, cv.reason) for claim in table.claims for cv in claim.comparisons}


def test_a_sequential_report_gives_each_row_the_verdict_it_stopped_with_and_states_the_looks(tmp_path):
    out = fx.make_study(tmp_path / "out", rows=ROWS, seeds=(0, 1, 2), storage=None,
                        meta={"claims": CLAIMS, "allocation": DESIGN})  # fmt: skip
    results = load_results(out, use_optuna=False)
    table = report_table(results, n_samples=100)
    assert verdicts(table)["C1"][0] == "reproduced"  # a large effect, decided on its third seed
    note = next(n for n in table.notes if n.startswith("Sequential design"))
    assert "look 1 at 7 trials, nothing tested: open C1" in note and "look 2 at 8 trials, levels 0.0" in note
    assert "C1 3 seeds, decided" in note and "O'Brien-Fleming" in note and "no row is decided on fewer than 3" in note
    assert "one family over every claimed comparison" in note and "stays under 5% over the grid" in note
    assert "The design is finished" in note or "still running" in note
    fixed = build_table(results, n_samples=100)  # the same records read as a fixed design: no method note
    assert not any(n.startswith("Sequential design") for n in fixed.notes)


def test_a_pipeline_check_at_the_sequential_design_gives_no_verdict_at_its_looks_either(tmp_path):
    """study.json's pipeline_check withholds every verdict; the design's looks decided C1, but the report does not
    take their verdict over the study's (a smoke sweep once printed 'E-learned-positions: REPRODUCED')."""
    meta = {"claims": CLAIMS, "allocation": DESIGN, "pipeline_check": "a pipeline check"}
    out = fx.make_study(tmp_path / "out", rows=ROWS, seeds=(0, 1, 2), storage=None, meta=meta)
    table = report_table(load_results(out, use_optuna=False), n_samples=100)
    assert table.withheld and {v for v, _ in verdicts(table).values()} == {"inconclusive"}


def test_a_row_the_design_has_not_looked_at_gives_no_verdict_however_large_its_effect(tmp_path):
    """E1's second seed is still running: the first look waits on it, so no row has been looked at, and C1's
    effect, which a fixed-sample test of its seeds would call reproduced, is open, not a verdict."""
    out = fx.make_study(tmp_path / "out", rows=ROWS, seeds=(0, 1, 2), storage=None,
                        plan={("E1", 1): "running", ("E1", 2): "pending"},
                        meta={"claims": CLAIMS, "allocation": DESIGN})  # fmt: skip
    results = load_results(out, use_optuna=False)
    assert verdicts(build_table(results, n_samples=100))["C1"][0] == "reproduced"
    table = report_table(results, n_samples=100)
    verdict, reason = verdicts(table)["C1"]
    assert verdict == "inconclusive" and "open: the sequential design asks for more seeds" in reason
    note = next(n for n in table.notes if n.startswith("Sequential design"))
    assert note.endswith("No look taken yet. The design is still running: its first look waits on queued trials.")
    # The first look asks for 2 seeds of C1 and E1 and the controls' share of the base: C1's third seed is more
    # than asked for; E1 (one finished of two asked for) and the base are not.
    extra = next(n for n in table.notes if n.startswith("rows with more finished seeds"))
    assert "(C1)" in extra


def test_status_says_where_each_row_stands_and_which_rows_no_sweep_queued(tmp_path, capsys):
    from ablate.ablations.cli import main

    out = fx.make_study(tmp_path / "out", rows=ROWS, seeds=(0, 1, 2), meta={"claims": CLAIMS, "allocation": DESIGN})
    meta = json.loads((out / "study.json").read_text())
    meta["rows"].append({**meta["rows"][0], "name": "A1", "group": "A"})  # declared by the study, never queued
    (out / "study.json").write_text(json.dumps(meta))
    assert main(["status", str(out)]) == 0
    text = capsys.readouterr().out
    assert "1 row(s) not queued by any sweep: A1" in text
    assert "A1  " not in text.split("not queued")[0]  # not listed as pending trials in the table
    assert "sequential design, 2 to 4 seeds a row; after 2 look(s): decided C1" in text
    assert "  C1: decided, reproduced at level 0.0" in text and "  E1: out of reach, conditional power" in text


def test_a_study_that_gives_no_verdict_says_no_verdict_for_every_row_at_its_looks_never_decided(tmp_path, capsys):
    """A smoke run's looks once printed 'decided A3' (a row no claim names) beside 'out of reach' for the claimed
    rows, while its report said that nothing is tested: every row of a study that gives no verdict has none, in
    `ablate status` (the sweep's look lines say the same: `describe_decision`) and in the report's method note."""
    from ablate.ablations.cli import main

    rows = [r for r in fx.TABLE3_ROWS if r[0] in ("base", "A3", "C1", "E1")]  # A3: no claim names it
    meta = {"claims": CLAIMS, "allocation": DESIGN, "pipeline_check": "the smoke preset is a pipeline check"}
    out = fx.make_study(tmp_path / "out", rows=rows, seeds=(0, 1, 2), meta=meta)
    assert main(["status", str(out)]) == 0
    text = capsys.readouterr().out
    assert "after 1 look(s): no verdict for any row: the study gives none" in text, text
    assert "decided" not in text and "out of reach" not in text
    assert main(["report", str(out), "--format", "md", "--no_plots", "--samples", "50", "--quiet"]) == 0
    note = next(line for line in (out / "report" / "table3-smoke.md").read_text().splitlines() if "look 1 at" in line)
    assert "look 1 at 7 trials, nothing tested: no verdict C1, E1." in note, note
    assert "C1 2 seeds, no verdict (the study gives none)" in note and "decided" not in note.split("Rows:")[1]


def test_the_report_judges_the_rows_the_sweeps_last_look_judged_when_a_row_failed(tmp_path):
    """E1's every trial failed: the sweep's looks leave it out and decide C1 (`ablations.results.evidence.decide`);
    the report takes the same walk (`design_walk`), so C1 has the verdict the sweep stopped it with, and E1 none.
    Before, the report walked E1 in, waited on seeds that can never finish, and left every row open."""
    from ablate.ablations.results.evidence import decide
    from ablate.ablations.statistics.sequential import Sequential

    failed = {("E1", seed): "failed" for seed in range(4)}
    out = fx.make_study(tmp_path / "out", rows=ROWS, seeds=(0, 1, 2, 3), storage=None, plan=failed,
                        meta={"claims": CLAIMS, "allocation": DESIGN})  # fmt: skip
    results = load_results(out, use_optuna=False)
    allocation, controls = Sequential.from_json(DESIGN) or (None, {})
    sweep = decide(allocation, results, ["base", "C1", "E1"], controls, n_samples=100)
    assert sweep.states["E1"] == "failed" and sweep.states["C1"] == "decided"
    table = report_table(results, n_samples=100)
    assert verdicts(table)["C1"][0] == "reproduced" and verdicts(table)["E1"][0] != "reproduced"
    note = next(n for n in table.notes if n.startswith("Sequential design"))
    judged = {row for row, state in sweep.states.items() if state != "failed"}
    assert judged == {"C1"} and "C1 4 seeds, decided" in note and "E1" not in note.split("Rows:")[-1]
