"""`ablate status OUT`: the state of a sweep from its storage: rows done, running, pending, failed, BLEU, ETA."""

from __future__ import annotations

import dataclasses
import json
import sys
import time
from pathlib import Path

from ablate.ablations import launchers
from ablate.ablations.commands.options import command_parser, own_options, parse, print_config
from ablate.ablations.results import evidence, ledger
from ablate.ablations.results.load import check_records, declared_rows, no_record, read_finished
from ablate.ablations.results.record import declared_seeds, read_study_json
from ablate.ablations.results.scores import score_ahead
from ablate.ablations.results.storage.opening import load_trials
from ablate.ablations.runtime.urls import redact, scrub, storage_url
from ablate.ablations.statistics.sequential import NO_VERDICT, Sequential, rows_of
from ablate.ablations.study.config import build_run_config
from ablate.ablations.sweep import progress
from ablate.ablations.sweep.progress import Eta, Work
from ablate.ablations.sweep.queueing import describe_decision
from ablate.data.errors import AblateError


def main(argv: list[str]) -> int:
    parser = command_parser("ablate status", __doc__)
    parser.add_argument("out", help="the sweep's output directory (holds study.json)")
    parser.add_argument(
        "--storage",
        default=None,
        help="Optuna storage URL (default: $ABLATE_STORAGE, else study.json's, which keeps no PostgreSQL password)",
    )
    parser.add_argument("--watch", type=float, default=0, metavar="SECONDS", help="refresh every SECONDS until done")
    parser.add_argument("--json", action="store_true", help="print the rows as JSON")
    args = parse(parser, argv)
    if args.print_config:
        return print_config(own_options(args))
    if args.watch < 0:
        raise AblateError(f"--watch {args.watch:g}: give the seconds between refreshes (0: print once)")

    out = Path(args.out)
    spec = read_study_json(out)
    url = storage_url(args.storage, out, remembered=spec.get("storage"))
    declared = [(row, seed) for row, seeds in declared_seeds(spec).items() for seed in seeds]  # controls' too
    title = f"{spec['study']} ({spec['preset']})"
    eta = None
    while True:
        try:  # read-only: a wrong path must not create an empty journal whose rows all look pending
            trials = load_trials(url, spec["optuna_study"], out)
        except (FileNotFoundError, KeyError) as err:
            raise AblateError(
                f"{out}: no study {spec['optuna_study']!r} in {redact(url)} ({scrub(str(err), url)}): "
                "has the sweep started? Pass --storage (or set ABLATE_STORAGE) if it runs elsewhere"
            ) from None
        keys, unqueued = queued_keys(trials, declared)
        rows = as_recorded(progress.collect(trials, keys), out, spec)
        _with_job_states(rows, out)
        if args.json:
            print(json.dumps([dataclasses.asdict(r) for r in rows], indent=2))
        else:
            from rich.console import Console  # lazy: rich's console, only for a terminal view

            eta = _eta(spec, {r.row for r in rows if r.state in ("pending", "running")}, eta)
            # The workers are not recorded anywhere status can read; the trials running now are the best evidence of
            # how many there are (a sweep of 2 workers showed twice its ETA when status assumed one).
            workers = max(1, progress.counts(rows)["running"])
            Console(width=140).print(progress.render(rows, workers, title, eta))
            for line in _notes(spec, out, unqueued):
                print(line)
        counts = progress.counts(rows)
        if not args.watch or not (counts["pending"] or counts["running"]):
            return 0
        time.sleep(args.watch)
        print(file=sys.stdout)


def queued_keys(trials, declared: list[tuple[str, int]]) -> tuple[list[tuple[str, int]], list[str]]:
    """The trials a sweep queued (the storage's, in study.json's order, then any others), and the rows study.json
    declares that no sweep has queued (a sweep with --rows leaves the others for a later one). With nothing queued
    yet, every declared trial. A key whose only trial was closed unrun (the sequential design no longer asked for
    it) is not part of the study."""
    queued = {
        key for key, trial in ledger.resolve(trials).items() if key is not None and not ledger.closed_unrun(trial)
    }
    if not queued:
        return declared, []
    keys = [key for key in declared if key in queued] + sorted(queued - set(declared))
    unqueued = list(dict.fromkeys(row for row, _ in declared if not any(k[0] == row for k in queued)))
    return keys, unqueued


def as_recorded(rows, out: Path, spec: dict):
    """The rows as the records on disk say, as the report reads them (`ablations.results.load`): a record speaks for its
    row x seed (state, BLEU, PPL, steps, time), and a trial complete in the storage without one is failed. The
    records are checked as the report checks them (one study, one corpus): AblateError naming a foreign one."""
    records = {record.key: record for record in ledger.read_records(out)}
    check_records(out, spec, declared_rows(spec, out), list(records.values()))
    for i, r in enumerate(rows):
        record = records.get((r.row, r.seed))
        if record is not None and r.state != "running":  # a running retry is newer than the record it replaces
            m = record.metrics
            rows[i] = dataclasses.replace(
                r, state=record.state, reason=record.reason, bleu=m.get("bleu"), ppl=m.get("ppl"),
                step=m.get("steps", r.step), wall_s=m.get("wall_time_s", r.wall_s),
            )  # fmt: skip
        elif record is None and r.state == "complete":
            rows[i] = dataclasses.replace(r, state="failed", reason=no_record(out, r.row, r.seed))
    return rows


def _notes(spec: dict, out: Path, unqueued: list[str]) -> list[str]:
    """What the table leaves out: the rows no sweep queued, and where a sequential design's rows stand."""
    lines = []
    if unqueued:
        lines.append(
            f"{len(unqueued)} row(s) not queued by any sweep: {', '.join(unqueued)} "
            "(the sweep without --rows trains them)"
        )

    stored = Sequential.from_json(spec.get("allocation"))
    if stored is not None:
        allocation, controls = stored
        results = read_finished(out)
        if results is not None:  # a study not read before scores every sentence first: say how far it is
            score_ahead(results.every_budget(), say=lambda line: print(f"{out.name}: {line}", file=sys.stderr))
        states = [s.record.state for s in results.status.values() if s.record is not None] if results else []
        # The rows the looks judge, and those a sweep of some --rows trained outside them (their controls' rows).
        rows = list(rows_of(controls))
        ran = {row for (row, _), s in (results.status.items() if results else ()) if s.record is not None}
        rows += sorted(ran - set(rows))
        decision = evidence.decide(allocation, results, rows, controls)
        ended = f"{states.count('complete')} complete, {len(states) - states.count('complete')} failed"
        lines.append(
            f"sequential design, {allocation.min_seeds} to {allocation.max_seeds} seeds a row; after "
            f"{decision.looks} look(s): {describe_decision(decision)}"
            + (
                f"; finished: {ended}"
                if decision.finished
                else f"; {ended} so far, the queue grows while a row is open"
            )
        )
        if set(decision.states.values()) != {NO_VERDICT}:  # else the line above says it of every row
            lines += [f"  {row}: {decision.states[row].replace('_', ' ')}, {why}" for row, why in decision.why.items()]
    return lines


def _eta(spec: dict, shown: set[str], eta=None):
    """An ETA that knows the steps (budget branches included) and size of each row the table shows, from
    study.json's configs; one for the whole --watch, so that it times the validations it sees land (a row queued
    while it watches is added to it). Only those rows, the ones with trials left: Table 3's 21 configs cost
    seconds to build and check, and a finished study needs none."""
    eta = eta if eta is not None else Eta()
    configs = {row["name"]: row.get("config") for row in spec.get("rows", []) if row.get("name") in shown}
    try:
        eta.work.update({name: Work.of(build_run_config(config)) for name, config in configs.items()
                         if name not in eta.work})  # fmt: skip
    except (AblateError, KeyError, TypeError):  # a study.json of an older ablate: the ETA learns from the trials alone
        pass
    return eta


def _with_job_states(rows, out: Path) -> None:
    """Each trial's job with the job's state now, for sweeps whose workers ran as a scheduler's jobs: the launcher
    of that scheduler says the states (`job_states`, e.g. SLURM's squeue, else sacct); a launcher without it, or one
    not installed here, leaves the job's name alone."""
    found = launchers.available()
    for scheduler in sorted({r.scheduler for r in rows if r.job and r.scheduler}):
        mine = [r for r in rows if r.job and r.scheduler == scheduler]
        states = launchers.job_states(found.get(scheduler), sorted({r.job for r in mine if r.job}))
        for r in mine:
            if states.get(r.job):
                r.job = f"{r.job} {states[r.job]}"
