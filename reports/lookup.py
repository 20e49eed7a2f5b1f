"""Finding what `ablate compare` compares: a run (a record file, or a row of a results directory) and a results
directory's finished trials.
"""

from __future__ import annotations

from pathlib import Path

from ablate.ablations.results import (
    Record,
    StudyResults,
    load_results,
    read_study_json,
    record_path,
    record_paths,
    recorded_rows,
)
from ablate.data.errors import AblateError


def resolve_run(spec: str, out_dir: str | Path | None = None) -> Record:
    """A record file path, or 'row' / 'row@seed' inside `out_dir`; without a seed, the lowest complete seed."""
    path = Path(spec)
    if path.suffix == ".json" or path.is_file():
        if not path.is_file():
            raise AblateError(f"record file {path} does not exist")
        return Record.read(path)
    if out_dir is None:
        raise AblateError(f"'{spec}' is not a record file; to name a row, pass the results directory with --study OUT")
    out = Path(out_dir)
    meta = read_study_json(out)
    row, _, seed_text = spec.partition("@")
    if seed_text and not seed_text.isdigit():
        raise AblateError(f"'{spec}': the seed after '@' must be an integer, e.g. {row}@0")
    if seed_text:
        candidates = [record_path(out, row, int(seed_text))]
    else:
        candidates = record_paths(out, row)
    records = [Record.read(p, out) for p in candidates if p.is_file()]
    if not records:
        known = recorded_rows(out)
        declared = [r["name"] for r in meta["rows"]]
        what = "that seed has no record yet" if row in declared or row in known else "no such row"
        raise AblateError(
            f"{out}: no finished run '{spec}' ({what}); rows with records: {', '.join(known) or 'none yet'}"
        )
    return next((r for r in records if r.state == "complete"), records[0])


def load_sweep(out_dir: str | Path) -> StudyResults:
    """A results directory from its study.json and records (not its Optuna storage: finished trials are what
    compares); AblateError naming the directory when it has no record yet."""
    results = load_results(Path(out_dir), use_optuna=False)
    if not any(s.record is not None for s in results.status.values()):
        raise AblateError(
            f"{results.out_dir}: no trial record yet ({results.out_dir / 'records'} is empty): "
            "wait until a trial of that sweep finishes, or check the path"
        )
    return results
