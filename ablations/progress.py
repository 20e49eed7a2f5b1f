"""The live view of a study: rows done, running, pending and failed, the latest dev BLEU of each row, and an ETA."""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from typing import Any

from ablations import ledger


@dataclass
class RowStatus:
    row: str
    seed: int
    state: str  # pending | running | complete | failed
    bleu: float | None = None
    ppl: float | None = None
    step: int | None = None
    max_steps: int | None = None
    wall_s: float | None = None
    reason: str | None = None
    host: str | None = None
    job: str | None = None
    """The SLURM job that ran (or runs) the trial, with its state when known: '123_0 RUNNING'."""


def collect(trials: list[Any], keys: list[tuple[str, int]]) -> list[RowStatus]:
    """The state of every row x seed of the plan, from its Optuna trials (the ledger says which trial speaks for
    each; a pruned trial shows as failed)."""
    by_key = ledger.resolve(trials)
    out = []
    for row, seed in keys:
        trial = by_key.get((row, seed))
        if trial is None or ledger.trial_state(trial) == "pending":
            out.append(RowStatus(row, seed, "pending"))
            continue
        attrs = trial.user_attrs
        record = attrs.get("record") or {}
        metrics = record.get("metrics") or {}
        progress = attrs.get("progress") or {}
        state = {"running": "running", "complete": "complete"}.get(ledger.trial_state(trial), "failed")
        wall = metrics.get("wall_time_s")
        if wall is None and trial.datetime_start is not None:  # running: so far; failed: until it failed
            end = trial.datetime_complete.timestamp() if trial.datetime_complete is not None else time.time()
            wall = end - trial.datetime_start.timestamp()
        out.append(
            RowStatus(
                row,
                seed,
                state,
                bleu=metrics.get("bleu", progress.get("bleu")),
                ppl=metrics.get("ppl", progress.get("ppl")),
                step=metrics.get("steps", progress.get("step")),
                max_steps=progress.get("max_steps"),
                wall_s=wall,
                reason=attrs.get("reason") if state == "failed" else None,
                host=attrs.get("host"),
                job=attrs.get("slurm_job"),
            )
        )
    return out


def eta_seconds(rows: list[RowStatus], workers: int) -> float | None:
    """Remaining trials times the median wall time of finished ones, spread over the workers."""
    walls = [r.wall_s for r in rows if r.state == "complete" and r.wall_s]
    if not walls:
        return None
    remaining = sum(r.state == "pending" for r in rows) + 0.5 * sum(r.state == "running" for r in rows)
    return remaining * statistics.median(walls) / max(workers, 1)


def counts(rows: list[RowStatus]) -> dict[str, int]:
    out = {"complete": 0, "running": 0, "pending": 0, "failed": 0}
    for r in rows:
        out[r.state] += 1
    return out


def summary_line(rows: list[RowStatus], workers: int) -> str:
    c = counts(rows)
    eta = eta_seconds(rows, workers)
    eta_text = f", ETA {_fmt(eta)}" if eta is not None and (c["pending"] or c["running"]) else ""
    return (
        f"{c['complete']}/{len(rows)} done, {c['running']} running, {c['pending']} pending, {c['failed']} failed"
        f"{eta_text}"
    )


def render(rows: list[RowStatus], workers: int, title: str):
    """A rich Table of the study."""
    from rich.table import Table

    table = Table(title=f"{title}: {summary_line(rows, workers)}", title_justify="left")
    jobs = any(r.job for r in rows)
    for col in (
        "row",
        "seed",
        "state",
        "step",
        "dev BLEU",
        "dev PPL",
        "time",
        *(["SLURM job"] if jobs else []),
        "note",
    ):
        table.add_column(col, justify="right" if col in ("seed", "step", "dev BLEU", "dev PPL", "time") else "left")
    style = {"complete": "green", "running": "yellow", "pending": "dim", "failed": "red"}
    for r in rows:
        step = (
            f"{r.step}/{r.max_steps}"
            if r.state == "running" and r.step is not None and r.max_steps
            else (str(r.step or ""))
        )
        table.add_row(
            r.row,
            str(r.seed),
            f"[{style[r.state]}]{r.state}[/]",
            step,
            f"{r.bleu:.2f}" if r.bleu is not None else "",
            f"{r.ppl:.2f}" if r.ppl is not None else "",
            _fmt(r.wall_s) if r.wall_s else "",
            *([r.job or ""] if jobs else []),
            (r.reason or "")[:60] if r.state == "failed" else (r.host or "" if r.state == "running" else ""),
        )
    return table


def _fmt(seconds: float | None) -> str:
    if seconds is None:
        return "?"
    seconds = int(seconds)
    hours, rest = divmod(seconds, 3600)
    minutes, sec = divmod(rest, 60)
    return f"{hours}h{minutes:02d}m" if hours else (f"{minutes}m{sec:02d}s" if minutes else f"{sec}s")
