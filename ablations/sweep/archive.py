"""A study as one file: `ablate archive OUT` packs what a reader needs to open it as a live folder, and nothing else.

An archive (`NAME.tar.xz`, one folder NAME inside) holds study.json, the records, the hypotheses, the references, the
pinned corpus (OUT/corpus) and the study's Optuna storage as a journal file (`optuna.journal`), so `ablate status`,
`report`, `compare`, `replay`, `optuna-dashboard` and a resumed `ablate sweep` work on it extracted anywhere. Not the
checkpoints, the trials' working folders, W&B's files, logs or the report (each is rebuilt, or belongs to a machine).

Where OUT has no journal (an archive made before archives carried one, or a study whose storage is a PostgreSQL
server), one is rebuilt from the records: a trial for each record, closed from it as a sweep closes a trial that
another worker finished (`trial.close_recorded`). Nothing trains.
"""

from __future__ import annotations

import tarfile
from pathlib import Path

from ablate.ablations.results import ledger
from ablate.ablations.results.record import Layout, read_study_json
from ablate.ablations.results.storage.queue import Queue
from ablate.ablations.statistics.sequential import Sequential
from ablate.ablations.study.definition import load_study
from ablate.ablations.sweep import corpora
from ablate.ablations.sweep.plan import Plan
from ablate.ablations.sweep.trial import tell
from ablate.data.atomic import write_atomic
from ablate.data.errors import AblateError

JOURNAL = "optuna.journal"
MEMBERS = ("study.json", "records", "hyps", "refs", "corpus", JOURNAL)
"""What an archive holds of OUT, in this order."""


def rebuild_storage(out: Path, study_file: str | None = None) -> Path:
    """OUT/optuna.journal rebuilt from OUT's records (see the module's docstring); returns its path. `study_file`: the
    study's YAML where study.json names a study that is not built in."""
    spec = read_study_json(out)
    journal = out / JOURNAL
    if journal.exists():
        raise AblateError(f"{journal} exists: the study has its storage; delete it to rebuild it from the records")
    try:
        study = load_study(study_file or spec["study"])
    except AblateError:
        if study_file:
            raise
        raise AblateError(
            f"{out}/study.json names study {spec['study']!r}, which is not built in: to rebuild its storage from the "
            "records, pass its YAML file with --study FILE"
        ) from None
    stored = Sequential.from_json(spec.get("allocation"))
    rows = spec["rows"][0]["config"]["data"] if spec.get("rows") else {}
    plan = Plan(
        study=study, preset=spec["preset"], seeds=list(spec["seeds"]), out=out, storage=f"journal:{journal}",
        name=spec["optuna_study"], control_seeds=spec.get("control_seeds"), allocation=stored and stored[0],
        extra={"data": {"corpus": rows.get("corpus", "builtin")}}, pin=corpora.read_pin(out),
    )  # fmt: skip
    kept = Layout(out).study_file.read_bytes()  # as the study ran (its controls, its storage): the reports read it
    try:
        queue = Queue.open(plan.storage, plan.name)
        _queue_recorded(plan, queue)
        _close_from_records(plan, queue)
    finally:
        write_atomic(Layout(out).study_file, lambda fh: fh.write(kept))
    return journal


def _queue_recorded(plan, queue) -> None:
    """Queue a trial for each record: the storage holds the trials the study ran, as they ran (not what today's
    design would queue: modern-tiny's base has 8 seeds where it now gives 7, and a --rows study's base its share of
    those rows). A sweep resumed from the archive queues what its design asks for next."""
    have = {ledger.trial_key(t) for t in queue.trials()}
    space = None
    for record in ledger.read_records(plan.out):
        if (record.row, record.seed) in have:
            continue
        row = plan.study.row(record.row)
        if space is None:
            space, _ = queue.settle(plan.param_space())
        queue.enqueue(row.name, record.seed, row.group, space=space)


def _close_from_records(plan, queue) -> int:
    """Close each queued trial that OUT's records finished, as `trial.close_recorded` does, with no files inline in
    the storage (workers on other machines need them there; an archive carries them). Returns how many."""
    closed = 0
    for trial in queue.trials("WAITING"):
        key = ledger.trial_key(trial)
        record = None if key is None else ledger.read_record(plan.out, *key)
        claimed = None if record is None else queue.claim_trial(trial)
        if claimed is not None and record is not None:
            tell(queue, claimed, record, plan.out, files=False)
            closed += 1
    return closed


def pack(out: Path, to: Path) -> list[str]:
    """Write OUT's archive to `to` (atomically); returns the members written. OUT must hold its journal."""
    if not (out / JOURNAL).is_file():
        raise AblateError(f"{out} has no {JOURNAL}: rebuild it first (ablate archive rebuilds it from the records)")
    name = out.resolve().name
    written = [m for m in MEMBERS if (out / m).exists()]

    def write(fh) -> None:
        with tarfile.open(fileobj=fh, mode="w:xz") as tar:
            for member in written:
                tar.add(out / member, arcname=f"{name}/{member}", filter=_portable)

    write_atomic(to, write)
    return written


def _portable(info: tarfile.TarInfo) -> tarfile.TarInfo:
    """No owner names or ids of this machine in the archive."""
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    return info


def main_layout_check(out: Path) -> None:
    """One line where OUT is not a study's folder."""
    if not Layout(out).study_file.is_file():
        raise AblateError(f"{out}: no study.json; give the folder of a sweep (its --out)")


__all__ = ["JOURNAL", "MEMBERS", "pack", "rebuild_storage"]
