"""A finished fixed-design study replayed under the sequential design: which of its trials the policy would have
asked for, in the order it asks (a row's seeds in seed order), what they cost, and its verdicts beside the full
design's. No training: every trial it asks for is already in the archive.

    ablate replay runs/table3-tiny [--min_seeds 2] [--max_seeds 3]
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ablate.ablations.results import load_results, replay_walk
from ablate.ablations.statistics import (
    N_SAMPLES,
    STATES,
    ErrorControl,
    Look,
    RowLook,
    comparison_key,
)
from ablate.reports.sequential import ERROR_CONTROLS
from ablate.reports.table import build_table


@dataclass(frozen=True, kw_only=True)
class Replay:
    """The replay's outcome beside the full design's."""

    looks: tuple[Look, ...]
    trials: tuple[tuple[str, int], ...]
    """(row, seed) of every trial the sequential design would have run."""
    hours: float
    """Their core-hours (each record's wall_time_s on its one core)."""
    full_trials: int
    full_hours: float
    verdicts: dict[str, tuple[str, str]]
    """'claim/row/metric' -> (sequential verdict, full design's verdict)."""
    min_seeds: int
    max_seeds: int
    error: ErrorControl = "spending"


def replay(
    out: str | Path,
    *,
    min_seeds: int = 2,
    max_seeds: int | None = None,
    n_samples: int = N_SAMPLES,
    error: ErrorControl = "spending",
) -> Replay:
    """Replay the finished study in `out` (see the module docstring); max_seeds defaults to the seeds its rows have."""
    results = load_results(out, use_optuna=False)
    done = {key: s.record for key, s in results.status.items() if s.record is not None and s.record.state == "complete"}
    found = replay_walk(results, min_seeds=min_seeds, max_seeds=max_seeds, error=error, n_samples=n_samples)
    walked, have, rows = found.walked, found.have, found.rows
    looks, seeds = list(walked.looks), walked.seeds
    trials = tuple((r, s) for r in rows for s in have.get(r, [])[: seeds[r]])
    full = build_table(results, n_samples=n_samples)
    verdicts = _verdicts(looks, full.claims)
    return Replay(
        looks=tuple(looks),
        trials=trials,
        hours=sum(done[t].wall_time_s or 0.0 for t in trials) / 3600,
        full_trials=len(done),
        full_hours=sum(r.wall_time_s or 0.0 for r in done.values()) / 3600,
        verdicts=verdicts,
        min_seeds=min_seeds,
        max_seeds=found.max_seeds,
        error=error,
    )


def _verdicts(looks: list[Look], full_claims) -> dict[str, tuple[str, str]]:
    """Each comparison's sequential verdict (what it was decided as when its row stopped; inconclusive when its row
    stopped undecided) beside the full design's."""
    stopped: dict[str, RowLook] = {}
    for look in looks:
        for row, state in look.rows.items():
            if row not in stopped and state.state != "open":
                stopped[row] = state
    out = {}
    for claim in full_claims:
        for cv in claim.comparisons:
            comp = cv.comparison
            row = stopped.get(comp.row)
            verdict = row.verdicts.get(comparison_key(comp), "inconclusive") if row is not None else "inconclusive"
            if cv.verdict != "untested":
                out[f"{claim.claim.id}/{comp.row}/{comp.metric}"] = (verdict, cv.verdict)
    return out


def summary(result: Replay) -> str:
    """The replay as text: the looks, each row's trials and why it stopped, the cost, and the verdicts that differ."""
    how = ERROR_CONTROLS[result.error]
    lines = [f"sequential design: min_seeds {result.min_seeds}, max_seeds {result.max_seeds}, {how}"]
    for i, look in enumerate(result.looks, start=1):
        states = {k: [r for r, s in look.rows.items() if s.state == k] for k in STATES}
        states = {k: v for k, v in states.items() if v or k in ("decided", "open", "out_of_reach")}
        lines.append(
            f"look {i} (levels up to {look.level:.4f}): {sum(look.seeds.values())} trials; "
            + "; ".join(f"{k.replace('_', ' ')}: {', '.join(v) or '-'}" for k, v in states.items())
        )
    last = result.looks[-1].seeds if result.looks else {}
    lines.append("seeds: " + ", ".join(f"{r} {n}" for r, n in last.items()))
    share = result.hours / result.full_hours if result.full_hours else 0.0
    lines.append(
        f"cost: {len(result.trials)} of {result.full_trials} trials, {result.hours:.2f} of {result.full_hours:.2f} "
        f"core-hours ({share:.0%})"
    )
    same = sum(a == b for a, b in result.verdicts.values())
    lines.append(f"verdicts: {same} of {len(result.verdicts)} comparisons as the full design")
    lines += [f"  differs: {k}: sequential {a}, full {b}" for k, (a, b) in result.verdicts.items() if a != b]
    return "\n".join(lines)


__all__ = ["Look", "Replay", "replay", "summary"]  # Look: ablations.statistics.sequential's
