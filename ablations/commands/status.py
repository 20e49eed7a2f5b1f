"""`ablate status OUT`: the state of a sweep from its storage: rows done, running, pending, failed, BLEU, ETA."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from data.errors import AblateError


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="ablate status", description=__doc__)
    parser.add_argument("out", help="the sweep's output directory (holds study.json)")
    parser.add_argument("--storage", default=None, help="storage URL, if study.json's is redacted (PostgreSQL)")
    parser.add_argument("--watch", type=float, default=0, metavar="SECONDS", help="refresh every SECONDS until done")
    parser.add_argument("--json", action="store_true", help="print the rows as JSON")
    args = parser.parse_args(argv)
    study_json = Path(args.out) / "study.json"
    if not study_json.is_file():
        raise AblateError(f"{study_json}: not found; give the --out directory of an `ablate sweep`")
    try:
        spec = json.loads(study_json.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise AblateError(f"{study_json}: not valid JSON (line {err.lineno}): rerun the sweep to rewrite it") from None

    from ablations import progress
    from ablations.sweep import load_or_create, open_storage

    study = load_or_create(open_storage(args.storage or spec["storage"]), spec["optuna_study"])
    keys = [(row["name"], seed) for row in spec["rows"] for seed in spec["seeds"]]
    title = f"{spec['study']} ({spec['preset']})"
    while True:
        rows = progress.collect(study, keys)
        if args.json:
            print(json.dumps([r.__dict__ for r in rows], indent=2))
        else:
            from rich.console import Console

            Console(width=140).print(progress.render(rows, 1, title))
        counts = progress.counts(rows)
        if not args.watch or not (counts["pending"] or counts["running"]):
            return 0
        time.sleep(args.watch)
        print(file=sys.stdout)
