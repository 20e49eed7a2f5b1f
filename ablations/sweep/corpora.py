"""A study's corpus is part of its identity: the text its trials trained and were scored on, checked and pinned.

`--data.corpus gettext:LANG` reads the message catalogues of the machine's installed packages, so one command gives
another corpus on a machine with other packages; a study continued there would mix two corpora in one table. Three
things keep a study on one corpus:

- the fingerprint of each row's prepared corpus (`data.fingerprint`) is kept in study.json, in the storage (for
  workers on other machines, `Queue.corpora`) and in every trial's record;
- a sweep (`check_out`, `check_storage`, from `runner.start`) and every worker before it claims a trial
  (`worker.work`) compare their own with the study's and stop with one line (exit 2) naming both when they differ;
  the report refuses records of two corpora (`ablations.results.load`);
- text that depends on the machine (`data.sources.MACHINE_DEPENDENT`) is pinned: the study's first sweep exports it
  into OUT/corpus/ (`data.export`), and every later sweep of the study, on any machine, trains on that copy wherever
  a row names the corpus it was exported from (`pinned`; study.json and the records keep the name, `gettext:de`,
  beside the fingerprint). An archived study carries it.
A study written before fingerprints is checked by what it kept of its corpus, its references (`refs/*.txt`).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from ablate.ablations.results.record import Layout, read_study_json
from ablate.ablations.runtime.urls import redact
from ablate.data import sources
from ablate.data.config import DataConfig
from ablate.data.errors import AblateError
from ablate.data.export import Exported, read_exported
from ablate.data.fingerprint import CorpusFingerprint
from ablate.data.sources import resolve

if TYPE_CHECKING:
    from ablate.ablations.results.storage.queue import Queue
    from ablate.ablations.study.config import RunConfig
    from ablate.ablations.study.definition import Row, Study
    from ablate.data.prepare import PreparedCorpus


class SweepPlan(Protocol):
    """What the corpus checks read of a sweep's plan, and set (`pin`, `fingerprints`): `ablations.sweep.plan.Plan`,
    which calls them (named here, not imported, so that the sweep imports this module and not the other way too)."""

    study: Study
    out: Path
    storage: str
    name: str
    only: list[str] | None
    pin: Exported | None
    fingerprints: dict[str, CorpusFingerprint]

    def rows(self) -> list[Row]: ...
    def run_config(self, row: Row, seed: int) -> RunConfig: ...
    def training_config(self, row: Row, seed: int) -> RunConfig: ...


def read_pin(out: Path) -> Exported | None:
    """The study's pinned corpus (OUT/corpus, written by `pin`), or None."""
    directory = Layout(out).corpus_dir
    return read_exported(directory) if directory.is_dir() else None


def pinned(data: DataConfig, pin: Exported | None) -> DataConfig:
    """`data`, reading the study's pinned copy where it names the corpus the pin was exported from."""
    return pin.config_for(data) if pin is not None and data.corpus == pin.source else data


def machine_dependent(data: DataConfig) -> bool:
    """Whether `data`'s text depends on the machine that reads it (a gettext corpus)."""
    return isinstance(sources.resolve(data), sources.MACHINE_DEPENDENT)


def check_sources(plan: SweepPlan) -> None:
    """Open each distinct corpus the rows read (its folder, files and languages; an export's manifest), as preparing
    it first does, without reading its text: a dry run refuses what the sweep would, in the same line."""
    seen = set()
    for row in plan.rows():
        data = plan.training_config(row, 0).data
        if data not in seen:
            seen.add(data)
            resolve(data)


def prepare_rows(plan: SweepPlan, *, progress: bool = False) -> dict[str, PreparedCorpus]:
    """Each row's prepared corpus (once per distinct data config), its fingerprint kept in `plan.fingerprints`."""
    from ablate.data.prepare import prepare  # lazy: loads sentencepiece, which --help does not need

    by_config: dict[DataConfig, PreparedCorpus] = {}
    prepared = {}
    for row in plan.rows():
        data = plan.training_config(row, 0).data
        if data not in by_config:
            by_config[data] = prepare(data, progress=progress)
        prepared[row.name] = by_config[data]
    plan.fingerprints = {name: corpus.fingerprint for name, corpus in prepared.items()}
    return prepared


def check_out(plan: SweepPlan, prepared: dict[str, PreparedCorpus]) -> None:
    """This sweep's corpora against the study's in OUT: study.json's fingerprints or, in a study from before them,
    its references. One line naming both, and what to do, when one differs."""
    if not Layout(plan.out).study_file.is_file():
        return
    try:
        rows = read_study_json(plan.out)["rows"]
    except AblateError:
        return  # unreadable: this sweep rewrites it (`Plan.check_same_design` does the same)
    kept = {row["name"]: CorpusFingerprint.from_json(row.get("corpus"), Layout(plan.out).study_file) for row in rows}
    for name, ours in _ours(plan):
        theirs = kept.get(name)
        if theirs is not None and theirs != ours:
            raise _differs(plan, str(plan.out), name, theirs, ours)
    if not any(kept.values()):
        _check_references(plan, next(iter(prepared.values())))


def _check_references(plan: SweepPlan, corpus: PreparedCorpus) -> None:
    """A study from before fingerprints kept its dev and test references: this sweep's must be the same."""
    for split in ("valid", "test"):
        path = Layout(plan.out).references(split)
        if not path.is_file():
            continue
        kept = path.read_text(encoding="utf-8").removesuffix("\n").split("\n")
        ours = corpus.references(split)
        if kept != ours:
            differ = [i for i, (a, b) in enumerate(zip(kept, ours, strict=False), start=1) if a != b]
            line = differ[0] if differ else min(len(kept), len(ours)) + 1
            raise AblateError(
                f"{path} holds the {len(kept)} references its trials were scored on; this sweep's corpus "
                f"{corpus.fingerprint.describe()} gives {len(ours)}, differing from line {line}: "
                f"{_what_to_do(plan, plan.run_config(plan.rows()[0], 0).data)}"
            )


def check_storage(plan: SweepPlan, queue: Queue) -> None:
    """This worker's corpora against those the storage keeps for the study (a worker on another machine, a SLURM
    node): one line naming both when one differs, before any trial is claimed."""
    kept = queue.corpora()
    for name, ours in _ours(plan):
        theirs = CorpusFingerprint.from_json(kept.get(name), f"the storage's {queue.CORPUS_ATTR}")
        if theirs is not None and theirs != ours:
            raise _differs(plan, f"Optuna study {plan.name} in {redact(plan.storage)}", name, theirs, ours)


def remember(plan: SweepPlan, queue: Queue) -> None:
    """Keep this sweep's fingerprints in the storage for the rows it has none for."""
    queue.remember_corpora({name: fingerprint.to_json() for name, fingerprint in plan.fingerprints.items()})


def pin(plan: SweepPlan, *, progress: bool = False) -> None:
    """Export the text of a row whose corpus depends on the machine into OUT/corpus (once a study), so every later
    sweep reads that copy (`pinned`); the rows' corpora, read back from it, must keep their fingerprints."""
    from ablate.data.prepare import export_corpus  # lazy: loads sentencepiece, which --help does not need

    loose = [row for row in plan.rows() if machine_dependent(plan.training_config(row, 0).data)]
    if not loose:
        return
    data = plan.training_config(loose[0], 0).data
    if plan.pin is not None:
        raise AblateError(
            f"{plan.pin.directory} pins the text of {plan.pin.source}; row {loose[0].name} reads {data.corpus}, "
            "another corpus that depends on the machine: a study pins one; give the other as an exported directory "
            "(ablate data export DIR --data.corpus ...)"
        )
    before = dict(plan.fingerprints)
    plan.pin, _ = export_corpus(data, Layout(plan.out).corpus_dir, progress=progress)
    prepare_rows(plan, progress=progress)
    for name, fingerprint in plan.fingerprints.items():
        if fingerprint != before[name]:
            raise _differs(plan, f"the pinned copy {plan.pin.directory}", name, before[name], fingerprint)


def _ours(plan: SweepPlan) -> list[tuple[str, CorpusFingerprint]]:
    """This sweep's fingerprints by row, the rows it trains (--rows) first: a message names one of those."""
    return sorted(plan.fingerprints.items(), key=lambda item: plan.only is not None and item[0] not in plan.only)


def _differs(plan: SweepPlan, where: str, row: str, theirs: CorpusFingerprint, ours: CorpusFingerprint) -> AblateError:
    return AblateError(
        f"{where} holds trials on corpus {theirs.describe()}; this sweep's row {row} would train on "
        f"{ours.describe()}: {_what_to_do(plan, plan.run_config(plan.study.row(row), 0).data)}"
    )


def _what_to_do(plan: SweepPlan, data: DataConfig) -> str:
    """What to do about another corpus than the study's, `data` the row's declared data settings."""
    if plan.pin is not None and data.corpus != plan.pin.source:
        return f"the study's text is pinned in {plan.pin.directory}: pass --data.corpus {plan.pin.source} to read it"
    if plan.pin is None and machine_dependent(data):
        return (
            f"{data.corpus} reads the catalogues of this machine's installed packages; copy the study's pinned text "
            f"({Layout(plan.out).corpus_dir}, from the machine or archive it started on) here, or pass --out for a "
            "new study"
        )
    return "resume with the corpus the study started on, or pass --out for a new study"
