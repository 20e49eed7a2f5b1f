"""`ablate report` in a terminal (and the end of a sweep, which runs it): what the report says first, each claim's
verdict with its comparisons, and a table of the rows that fits 100 columns, then where the files are; not the
report's whole table (26 columns) and its 6 KB of footnotes. A comparison with no variance at all prints no interval
and no ratio to the paper's ('+0.00 [-0.00, +0.00]', 'ours -0.0x' read as bugs)."""

from __future__ import annotations

import json

from ablate.ablations.cli import main
from reports_fixtures import TABLE3_ROWS, make_study


def test_report_prints_its_verdicts_and_a_table_that_fits_100_columns_then_where_its_files_are(tmp_path, capsys):
    out = make_study(tmp_path / "table3-smoke", rows=TABLE3_ROWS[:5])
    claims = tmp_path / "claims.yaml"
    claims.write_text(
        "claims:\n  - {id: heads, text: t, compare: [{row: A1, metric: bleu, expect: lower},\n"
        "                                   {row: B1, metric: ppl, expect: higher}]}\n"
    )
    assert main(["report", str(out), "--claims", str(claims), "--no_plots", "--samples", "100"]) == 0
    printed = capsys.readouterr().out
    text, files = printed.split(f"report of {out}:\n")
    lines = text.rstrip("\n").splitlines()
    assert max(len(line) for line in lines) <= 100, max(lines, key=len)
    assert lines[0] == "table3 (smoke): 5 rows, seeds 0, 1"
    headline = json.loads((out / "report" / "table3-smoke.json").read_text())["headline"]
    assert " ".join(lines[1:4]).startswith(headline[0][:60])  # what the report says first, said first here too
    assert "verdicts (1 claims; each comparison's effect at T with its 95% interval):" in lines
    assert any(line.startswith("    A1 vs base, BLEU ") for line in lines)
    assert any(line.startswith("    B1 vs base, PPL ") for line in lines)
    table = lines[lines.index(next(line for line in lines if line.startswith("row "))) :]
    assert [line.split()[0] for line in table[1:]] == [name for name, *_ in TABLE3_ROWS[:5]]
    assert "Each comparison:" not in printed and "PPL, BLEU and chrF on the dev set" not in printed  # the legend
    assert text.rstrip("\n") == (out / "report" / "table3-smoke.txt").read_text().rstrip("\n")
    for fmt in ("md", "html", "text"):
        assert any(line.split()[:1] == [fmt] for line in files.splitlines()), files


def test_a_comparison_with_no_variance_prints_no_interval_and_no_ratio_to_the_papers(tmp_path, capsys):
    """A1 and the base translate every sentence alike at every seed (a smoke run's models all score 0): the effect
    is +0.00 with no variance, not '+0.00 [-0.00, +0.00]', and its ratio to the paper's -0.90 is no 'ours -0.0x'."""
    rows = [("base", "base", {}, -1.0), ("A1", "A", {"n_heads": 1, "d_k": 32, "d_v": 32}, -1.0), TABLE3_ROWS[3]]
    out = make_study(tmp_path / "table3-smoke", rows=rows, seeds=(0, 1, 2))
    claims = tmp_path / "claims.yaml"
    claims.write_text("claims:\n  - {id: heads, text: t, compare: [{row: A1, metric: bleu, expect: lower}]}\n")
    assert main(["report", str(out), "--claims", str(claims), "--no_plots", "--samples", "100"]) == 0
    printed = capsys.readouterr().out
    said = next(line for line in printed.splitlines() if line.startswith("    A1 vs base, BLEU "))
    assert said.startswith("    A1 vs base, BLEU +0.00 (no variance): nothing to test: every seed"), said
    md = (out / "report" / "table3-smoke.md").read_text()
    line = next(line for line in md.splitlines() if "A1 vs base, BLEU" in line)
    assert "A1 vs base, BLEU: +0.00 (no variance)" in line and "[-0.00" not in line, line
    assert "(paper -0.90)" in line and "ours" not in line, line


def test_a_verdict_each_budgets_own_p_would_decide_says_why_it_is_inconclusive(tmp_path, capsys):
    """A1's p is below 0.05 at a budget, yet it is inconclusive: the report (and the terminal) say why, the other
    budget disagreeing ('T disagrees') or the family's level ('above the family's level'), where it once said only
    that its effect was below what the test detects (or, for an equivalence, that its interval crosses the margin,
    which its 95% interval does not)."""
    claims = tmp_path / "claims.yaml"
    compare = [f"{{row: {r}, metric: bleu, expect: lower}}" for r in ("A1", "B1", "C1", "D1", "E1", "F1")]
    compare += [
        f"{{row: {r}, metric: {m}, expect: {e}}}"
        for r in ("E1", "F1")
        for m, e in (("ppl", "higher"), ("chrf", "lower"))
    ]
    claims.write_text(f"claims:\n  - {{id: c, text: t, compare: [{', '.join(compare)}]}}\n")
    others = [r for r in TABLE3_ROWS if r[0] in ("B1", "C1", "D1", "E1", "F1")]
    said = {}
    for name, at_t, at_half in (("disagrees", 0.35, 0.38), ("family", 0.355, 0.385)):
        rows = [TABLE3_ROWS[0], ("A1", "A", {"n_heads": 1, "d_k": 32, "d_v": 32}, at_t), *others]
        out = make_study(tmp_path / name, rows=rows, seeds=(0, 1, 2), budgets={0.5: {"A1": at_half, "base": 0.35}})
        assert main(["report", str(out), "--claims", str(claims), "--no_plots", "--samples", "200"]) == 0
        printed = capsys.readouterr().out
        md = next(line for line in (out / "report" / "table3-smoke.md").read_text().splitlines() if "A1 vs" in line)
        assert md.startswith("  - inconclusive: A1 vs base, BLEU: T/2 -") and " p 0.0" in md, md  # p below 0.05
        said[name] = md
        assert "A1 vs base, BLEU" in printed and md.split("; ")[-2] in " ".join(printed.split()), printed
    assert "T disagrees: reproduced at T/2 by its own p, inconclusive at T" in said["disagrees"], said["disagrees"]
    assert "above the family's level: reproduced by each budget's own p at 0.05, not at the level its family of " \
           "10 holds it to" in said["family"], said["family"]  # fmt: skip
