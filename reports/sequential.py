"""A sequential study's report: each comparison's verdict as the design's looks left it, and the method note that
tells the looks (`report_table`, `apply_design`).

The design itself (the policy, the looks, the error each spends, which rows a control is tested against) is
`ablations.statistics.sequential`'s: the sweep runs it, and this module reads it back from study.json and the records.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import replace

from ablate.ablations.results import design_walk, score_ahead
from ablate.ablations.statistics import (
    DECIDING_SEEDS,
    FUTILITY,
    N_SAMPLES,
    STATES,
    Cause,
    ErrorControl,
    Sequential,
    Walk,
    comparison_key,
    rows_of,
)
from ablate.reports.claims import claim_verdict
from ablate.reports.table import build_table

ERROR_CONTROLS: dict[str, str] = {
    "spending": (
        "one family over every claimed comparison (Holm truncated at a quarter of the level, as a graph: Maurer and "
        "Bretz 2013), each comparison at its own O'Brien-Fleming-shaped Lan-DeMets boundary over the information its "
        "looks reached, computed with the looks' correlation"
    ),
    "confseq": (
        "one family over every claimed comparison (Holm truncated at a quarter of the level, as a graph), each "
        "comparison at the pointwise level of a normal-mixture confidence sequence (Howard et al., 2021)"
    ),
}


def report_table(results, *, n_samples: int | None = None, claims=None):
    """`reports.table.build_table`, with a sequential study's verdicts and method note (`apply_design`): what
    `ablate report` and the Python API show."""
    score_ahead(
        results.every_budget(), say=lambda line: print(f"{results.out_dir.name}: {line}", file=sys.stderr, flush=True)
    )
    table = build_table(results, n_samples=n_samples or N_SAMPLES, claims=claims)
    if (results.meta.get("allocation") or {}).get("design") == "sequential" and table.claims:
        if claims is None:
            apply_design(table, results, n_samples)
        else:  # the design's looks tested the study's own claims, not these
            table.notes.append(
                "the study ran at the sequential design for its own claims; these claims are tested as a fixed "
                "design on the seeds it ran (no error control over its looks)"
            )
    return table


def apply_design(table, results, n_samples: int | None = None) -> None:
    """A report of a study run at the sequential design (study.json's `allocation`): each comparison's verdict is
    the one its row stopped with (decided at the level its look spent, or out of reach: inconclusive), not a
    fixed-sample test of the seeds it ended with; the method note gives the looks and why each row stopped."""
    meta = results.meta.get("allocation") or {}
    stored = Sequential.from_json(meta)
    assert stored is not None, "a study run at the sequential design"
    allocation, controls = stored
    rows = rows_of(controls)
    # The sweep's own walk (failed rows out, as its looks leave them), so that the report judges the rows it did.
    found = design_walk(allocation, results, rows, controls, n_samples=n_samples)
    walked, have, dead = found.walked, found.have, found.dead
    error, max_seeds = allocation.error, allocation.max_seeds
    stopped = walked.stopped()
    for i, claim in enumerate(table.claims):
        comparisons = []
        for cv in claim.comparisons:
            row = stopped.get(cv.comparison.row)
            if cv.verdict == "untested" or cv.comparison.row not in have or table.withheld:
                # A study that gives no verdict (a pipeline check, a base that learnt nothing) gives none at a look.
                comparisons.append(cv)
                continue
            cause: Cause
            if cv.comparison.row in dead:
                verdict, reason, cause = "inconclusive", f"no verdict: {dead[cv.comparison.row]}", "excluded"
            elif row is None or row.state == "open":
                verdict, reason = "inconclusive", "open: the sequential design asks for more seeds (sweep again)"
                cause = "design_open"
            else:
                verdict = row.verdicts.get(comparison_key(cv.comparison), "inconclusive")
                reason = "" if verdict != "inconclusive" else f"sequential design: {row.why}"
                cause = "" if verdict != "inconclusive" else "design_stopped"
            if verdict == "inconclusive" and not reason:
                reason, cause = cv.reason, cv.cause
            comparisons.append(replace(cv, verdict=verdict, reason=reason, cause=cause))
        verdicts = [c.verdict for c in comparisons]
        table.claims[i] = replace(claim, comparisons=tuple(comparisons), verdict=claim_verdict(verdicts))
    table.notes.append(method_note(walked, meta, max_seeds, error))
    # Asked for: the seeds of the look the design waits on (`target`; the last look's where it is finished).
    extra = [r for r in rows if len(have.get(r, [])) > walked.target.get(r, 0)]
    if extra:
        table.notes.append(
            f"rows with more finished seeds than the design asked for ({', '.join(extra)}): the table's means and "
            "intervals use them all, the verdicts only the seeds the design's looks read"
        )


def method_note(walked: Walk, meta: Mapping, max_seeds: int, error: ErrorControl) -> str:
    """The report's account of a sequential study: the design, each look (its level and what it decided), and why
    each row stopped."""
    looks = []
    for i, look in enumerate(walked.looks, start=1):
        by = {k: [r for r, s in look.rows.items() if s.state == k] for k in STATES}
        said = "; ".join(f"{k.replace('_', ' ')} {', '.join(v)}" for k, v in by.items() if v)
        levels = f"levels {min(look.levels.values()):.4f} to {look.level:.4f}" if look.levels else "nothing tested"
        looks.append(f"look {i} at {sum(look.seeds.values())} trials, {levels}: {said or 'nothing'}")
    rows = [f"{r} {s.seeds} seeds, {s.state.replace('_', ' ')} ({s.why})" for r, s in walked.stopped().items()]
    waiting = "the next look" if looks else "its first look"
    end = "finished" if walked.finished else f"still running: {waiting} waits on queued trials"
    return (
        f"Sequential design ({meta.get('min_seeds')} to {max_seeds} seeds a row, {ERROR_CONTROLS[error]}; the controls "
        f"keep Dunnett's sqrt(k) share of the open rows' seeds): every row starts at min_seeds, and a row gets one "
        f"more seed only while a comparison of it is open (its conditional power, under the smallest effect the study "
        f"sets out to see, at least {FUTILITY:.0%}); no row is decided on fewer than {DECIDING_SEEDS} seeds (two give "
        f"its own spread one degree of freedom: the first look stops rows for futility only). A comparison's verdict "
        f"is its test at its nominal level at the look that decided it (the intervals shown are 95%); a comparison is "
        f"decided only when every budget decides it the same way. Simulated, not proven: the chance of any wrong "
        f"verdict among the study's claims, over every budget and look, stays under 5% over the grid that "
        f"docs/method/verdicts.md ('What the verdicts guarantee') states (the global, a mixed and the least "
        f"favourable nulls; none to every claimed row at 3 to 30 times the others' seed variance; normal and t(3) "
        f"seeds), and is not claimed beyond it. "
        + ("; ".join(looks) + ". " if looks else "No look taken yet. ")
        + (f"Rows: {'; '.join(rows)}. " if rows else "")
        + f"The design is {end}."
    )


__all__ = [
    "ERROR_CONTROLS",
    "apply_design",
    "method_note",
    "report_table",
]
