"""The end of a sweep: a few lines (each claim's verdict with its effects, where the whole table is), not the report's
whole table (142 lines for a two-row sweep of Table 3), read from the report a real `build_report` wrote."""

from __future__ import annotations

import json

from ablate.ablations.commands.sweep import verdict_summary
from ablate.reports.build import build_report
from reports_fixtures import TABLE3_ROWS, make_study


def test_a_sweep_ends_with_its_verdicts_in_a_few_lines(tmp_path):
    out = make_study(tmp_path / "table3-smoke", rows=TABLE3_ROWS[:5])
    claims = tmp_path / "claims.yaml"
    claims.write_text(
        "claims:\n  - {id: heads, text: t, compare: [{row: A1, metric: bleu, expect: lower},\n"
        "                                   {row: B1, metric: ppl, expect: higher}]}\n"
    )
    build_report(out, ["md", "json"], n_samples=100, claims=claims)
    headline = json.loads((out / "report" / "table3-smoke.json").read_text())["headline"]
    assert headline  # a smoke study's report says first that it gives no verdict, and why
    lines = verdict_summary(out).splitlines()
    assert lines[: len(headline)] == headline  # and so does the end of its sweep
    lines = lines[len(headline) :]
    assert lines[0] == "verdicts (1 claims, effects at T with 95% intervals):"
    verdict, effects = lines[1].split(" (", 1)
    assert verdict.split(": ")[1] in ("REPRODUCED", "CONTRADICTED", "INCONCLUSIVE")
    assert effects.startswith("A1 ") and ", B1 ppl " in effects and effects.count("[") == 2
    assert lines[-1] == f"the whole table: {out / 'report' / 'table3-smoke.md'} (ablate report {out} prints it)"
    assert len(lines) == 3
