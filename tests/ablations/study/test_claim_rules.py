"""Every rule a study's claims are checked by, walked through the commands a user types: a claim that can never be
tested as written stops `ablate studies FILE`, `ablate sweep FILE --dry_run` and the sweep alike, with the same one line
and exit 2, before a trial is queued (issue 85: a row compared with itself used to pass, train every trial, and be
reported "untested")."""

from __future__ import annotations

from pathlib import Path

import pytest
from ablate.ablations.cli import main

ROWS = """\
  - {name: base, group: base}
  - {name: A1, model: {n_heads: 1, d_k: 32, d_v: 32}}
  - {name: A2, model: {n_heads: 2, d_k: 16, d_v: 16}}
"""
NO_BASE = """\
  - {name: A1, model: {n_heads: 1, d_k: 32, d_v: 32}}
  - {name: A2, model: {n_heads: 2, d_k: 16, d_v: 16}}
"""


def study(tmp_path: Path, compare: list[str], rows: str = ROWS, claim: str = "") -> Path:
    """A study file of three rows (or `rows`) whose one claim makes the comparisons `compare`; `claim`: the whole
    `claims:` value instead."""
    listed = "".join(f"      - {c}\n" for c in compare)
    claims = claim or f"\n  - id: c1\n    text: t\n    compare:\n{listed}"
    path = tmp_path / "study.yaml"
    path.write_text(f"name: rules\nrows:\n{rows}claims: {claims}\n", encoding="utf-8")
    return path


RULES = [
    # The rules that came with issue 85: each passed before it (the study said "ok" and the sweep trained it).
    ("a row against itself", ["{row: A1, against: A1, metric: bleu, expect: lower}"], ROWS,
     "comparison 1: compares row 'A1' with itself"),
    ("the base without against", ["{row: base, metric: bleu, expect: lower}"], ROWS,
     "comparison 1: compares the base 'base' with itself"),
    ("no base row to judge against", ["{row: A1, against: A2, metric: bleu, expect: lower}"], NO_BASE,
     "claims: the study has no base row, and claims are judged only in a study with one"),
    ("one pair twice on a metric", ["{row: A1, metric: bleu, expect: lower}",
                                    "{row: A1, metric: bleu, expect: higher}"],
     ROWS, "comparisons 1 and 2 both compare 'A1' with 'base' on bleu (expect lower, then higher)"),
    ("one pair twice, the other way round", ["{row: A1, against: A2, metric: ppl, expect: lower}",
                                             "{row: A2, against: A1, metric: ppl, expect: higher}"], ROWS,
     "comparisons 1 and 2 both compare 'A2' with 'A1' on ppl"),
    ("a margin that is not a number", ["{row: A1, metric: bleu, expect: same, margin: true}"], ROWS,
     "expect: same needs a positive 'margin' in bleu units, e.g. margin: 1.0 (got True)"),
    ("an infinite margin", ["{row: A1, metric: bleu, expect: no_worse, margin: .inf}"], ROWS,
     "expect: no_worse needs a positive 'margin' in bleu units, e.g. margin: 1.0 (got inf)"),
    ("no row", ["{metric: bleu, expect: lower}"], ROWS, "comparison 1: no 'row': name the row the comparison tests"),
    # The rules from before it, through the same commands.
    ("an unknown row", ["{row: A9, metric: bleu, expect: lower}"], ROWS, "unknown row 'A9'; the study's rows are"),
    ("an unknown reference row", ["{row: A1, against: Z, metric: bleu, expect: lower}"], ROWS, "unknown row 'Z'"),
    ("an unknown metric", ["{row: A1, metric: loss, expect: lower}"], ROWS, "unknown metric 'loss'"),
    ("an unknown expectation", ["{row: A1, metric: bleu, expect: worse}"], ROWS, "expect must be one of"),
    ("same without a margin", ["{row: A1, metric: bleu, expect: same}"], ROWS, "expect: same needs a positive"),
    ("no_worse with a margin of 0", ["{row: A1, metric: bleu, expect: no_worse, margin: 0}"], ROWS,
     "expect: no_worse needs a positive"),
    ("a margin on a difference", ["{row: A1, metric: bleu, expect: lower, margin: 1}"], ROWS,
     "'margin' only applies to expect: same or no_worse"),
    ("an unknown comparison key", ["{row: A1, metric: bleu, expect: lower, colour: red}"], ROWS,
     "unknown key 'colour'"),
    ("a comparison that is no mapping", ["A1 lower"], ROWS, "expected a mapping like"),
]  # fmt: skip
CLAIM_RULES = [
    ("an empty compare list", "\n  - {id: c1, text: t, compare: []}", "'compare' must be a non-empty list"),
    ("an unknown claim key", "\n  - {id: c1, colour: red, compare: [{row: A1, metric: bleu, expect: lower}]}",
     "unknown key 'colour'; a claim has"),
    ("one id twice", "\n  - {id: c1, compare: [{row: A1, metric: bleu, expect: lower}]}\n"
     "  - {id: c1, compare: [{row: A2, metric: bleu, expect: lower}]}", "claim 'c1': the id is used twice"),
    ("a claim that is no mapping", "\n  - just words", "claim 1: expected a mapping"),
    ("no list of claims", "{}", "expected 'claims:' with a list of claims"),
]  # fmt: skip


def refusals(path: Path, out: Path, capsys) -> list[str]:
    """The one line `ablate studies FILE`, `ablate sweep FILE --dry_run` and the sweep itself each end with, exit 2,
    nothing written."""
    lines = []
    sweep = ["sweep", str(path), "--preset", "smoke", "--out", str(out)]
    for argv in (["studies", str(path)], [*sweep, "--dry_run"], sweep):  # the sweep last: it would train the rest
        assert main(argv) == 2, argv
        captured = capsys.readouterr()
        assert captured.out == "" and captured.err.count("\n") == 1, captured
        lines.append(captured.err.strip().removeprefix(f"ablate {argv[0]}: error: "))
        assert not out.exists()
    assert lines[0] == lines[1] == lines[2]  # the same line whichever command checks the file
    return lines


@pytest.mark.parametrize(("compare", "rows", "message"), [r[1:] for r in RULES], ids=[r[0] for r in RULES])
def test_a_comparison_that_can_never_be_tested_stops_the_study_and_the_dry_run(tmp_path, capsys, compare, rows,
                                                                                 message):  # fmt: skip
    path = study(tmp_path, compare, rows)
    line = refusals(path, tmp_path / "out", capsys)[0]
    assert line.startswith(f"{path}: claims: ") and message in line, line


@pytest.mark.parametrize(("claims", "message"), [r[1:] for r in CLAIM_RULES], ids=[r[0] for r in CLAIM_RULES])
def test_a_malformed_claim_stops_the_study_and_the_dry_run(tmp_path, capsys, claims, message):
    path = study(tmp_path, [], claim=claims)
    line = refusals(path, tmp_path / "out", capsys)[0]
    assert line.startswith(f"{path}: claims") and message in line, line


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("missing.claims.yaml", None, "missing.claims.yaml: no such claims file"),
        ("claims", "folder", "claims: is a folder: give the claims file itself"),
        ("bad.claims.yaml", b"claims: [", "bad.claims.yaml: line 1 not valid YAML"),
        ("wide.claims.yaml", "claims: []\n".encode("utf-16"), "wide.claims.yaml is UTF-16 (little-endian) text"),
    ],
    ids=["missing", "a folder", "not YAML", "UTF-16"],
)
def test_a_claims_file_that_cannot_be_read_stops_the_study_and_the_dry_run(tmp_path, capsys, name, content, message):
    if content == "folder":
        (tmp_path / name).mkdir()
    elif content is not None:
        (tmp_path / name).write_bytes(content)
    path = study(tmp_path, [], claim=name)
    line = refusals(path, tmp_path / "out", capsys)[0]
    assert str(tmp_path) in line and message in line, line


def test_claims_that_can_be_tested_pass(tmp_path, capsys):
    """The rules refuse only what can never be tested: one pair on two metrics, a row against another row, and the
    base itself against another row (the modern study's RoPE claim) all pass."""
    path = study(
        tmp_path,
        [
            "{row: A1, metric: bleu, expect: lower}",
            "{row: A1, metric: ppl, expect: higher}",
            "{row: A2, against: A1, metric: bleu, expect: same, margin: 1}",
            "{row: base, against: A2, metric: chrf, expect: no_worse, margin: 0.5}",
        ],
    )
    assert main(["studies", str(path)]) == 0
    assert capsys.readouterr().out.startswith(f"{path}: ok (3 rows")
