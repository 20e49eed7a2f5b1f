"""Reading a results directory written by `ablate sweep` (its paths: `ablations.results.record.Layout`): `study.json`,
the trial records (`ablations.results.record.Record`, read by the ledger), the Optuna states.

Records are the truth for finished trials. The Optuna storage only adds what records cannot say: which trials are
still pending or running. Nothing here imports training code.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ablate.ablations.results import ledger
from ablate.ablations.results.ledger import State
from ablate.ablations.results.record import FULL, Layout, Record, declared_seeds, read_study_json
from ablate.ablations.results.storage.opening import load_trials
from ablate.ablations.runtime.urls import chosen_url, redact, scrub
from ablate.ablations.statistics.budgets import budget_label
from ablate.ablations.statistics.sequential import Sequential, first_look
from ablate.data.errors import AblateError
from ablate.data.fingerprint import CorpusFingerprint


@dataclass(frozen=True, kw_only=True)
class RowSpec:
    """One row of the study as declared in `study.json`."""

    name: str
    """Row name, unique in the study."""
    group: str
    """Row group; rows of a group are shown together."""
    overrides: dict[str, Any]
    """Overrides of the base config that define this row."""
    config: dict[str, dict[str, Any]]
    """The resolved config: {'model': ..., 'train': ..., 'data': ...}."""
    paper: dict[str, Any] = field(default_factory=dict)
    """The paper's numbers for this row as the study declares them ({'ppl', 'bleu', 'params_m'}), or {}."""
    corpus: CorpusFingerprint | None = None
    """The fingerprint of the corpus the row trains on, as study.json keeps it (None in a study from before)."""


@dataclass(frozen=True, kw_only=True)
class TrialStatus:
    """Where one row x seed stands."""

    state: State
    """complete, failed or pruned (from a record or Optuna), running or pending."""
    reason: str | None = None
    """Why it failed or was pruned."""
    record: Record | None = None
    """The record, once the trial has finished and written one."""


@dataclass(kw_only=True)
class StudyResults:
    """A results directory read into memory: what the report and the comparison work from."""

    out_dir: Path
    """The results directory (OUT)."""
    study: str
    """Study name (e.g. 'table3')."""
    preset: str
    """Preset name (e.g. 'smoke')."""
    seeds: list[int]
    """Seeds every row is trained with."""
    rows: list[RowSpec]
    """Rows in display order."""
    status: dict[tuple[str, int], TrialStatus]
    """(row, seed) -> where that trial stands, for every row x seed."""
    meta: dict[str, Any]
    """The whole `study.json`."""
    notes: list[str] = field(default_factory=list)
    """One-line remarks for the reader (e.g. the Optuna storage could not be opened)."""

    def records(self, row: str, state: str | None = "complete") -> list[Record]:
        """The records of a row (only those in `state`; None: all), by seed."""
        found = [s.record for (name, _), s in sorted(self.status.items()) if name == row and s.record is not None]
        return [r for r in found if state is None or r.state == state]

    def row(self, name: str) -> RowSpec:
        """The row called `name`; AblateError naming the known rows if there is none."""
        for spec in self.rows:
            if spec.name == name:
                return spec
        known = ", ".join(r.name for r in self.rows)
        raise AblateError(f"{self.out_dir}: no row '{name}' in this study (rows: {known})")

    @property
    def base(self) -> RowSpec | None:
        """The row the others are compared to: the first row of group 'base', else None."""
        return next((r for r in self.rows if r.group == "base"), None)

    @property
    def fractions(self) -> list[float]:
        """The budgets of the study, as fractions of T, ascending: those any complete record was scored at, and 1.0
        (T) always. A record without one of them (an older one, or one trained with train.budgets empty) counts as
        missing at that budget (`at_budget`), so a claim on its row is not judged on T alone."""
        complete = [s.record for s in self.status.values() if s.record is not None and s.record.state == "complete"]
        found = {f for r in complete for f in r.fractions}
        return sorted({f for f in found if not math.isclose(f, FULL)} | {FULL})

    def every_budget(self) -> list[Record]:
        """The complete records of every row at every budget (`at_budget`): what the tests read, scored ahead."""
        views = [self.at_budget(f) for f in self.fractions]
        return [record for view in views for spec in view.rows for record in view.records(spec.name)]

    def at_budget(self, fraction: float) -> StudyResults:
        """The study as it stood at budget `fraction` of T (one of `fractions`): every complete record seen at that
        budget (`Record.at_budget`), the other trials as they are. 1.0 gives the study itself."""
        if math.isclose(fraction, FULL):
            return self
        status = {}
        for key, s in self.status.items():
            if s.record is None or s.record.state != "complete":
                status[key] = s
            elif any(math.isclose(fraction, f) for f in s.record.fractions):
                status[key] = replace(s, record=s.record.at_budget(fraction))
            else:  # trained without this budget: nothing to compare there
                status[key] = TrialStatus(state="failed", reason=f"not scored at {budget_label(fraction)}")
        return replace(self, status=status)


def load_results(out_dir: str | Path, *, use_optuna: bool = True, storage: str | None = None) -> StudyResults:
    """Read a results directory: study.json, every record, and (if it opens) the Optuna storage.

    `storage` overrides $ABLATE_STORAGE, which overrides study.json's storage URL (it keeps no PostgreSQL password).
    """
    out_dir = Path(out_dir)
    meta = read_study_json(out_dir)
    rows = declared_rows(meta, out_dir)
    records = {record.key: record for record in ledger.read_records(out_dir)}
    check_records(out_dir, meta, rows, list(records.values()))

    notes: list[str] = []
    if note := recipes_note(meta):
        notes.append(note)
    optuna: dict[tuple[str, int], TrialStatus] = {}
    optuna_read = False
    if use_optuna:
        name = meta.get("optuna_study") or meta["study"]
        optuna, note = read_trial_states(storage, name, out_dir, remembered=meta.get("storage"))
        optuna_read = note is None
        if note:
            notes.append(note)
    notes += _add_undeclared_rows(rows, records, optuna)
    declared = declared_seeds(meta, [r.name for r in rows])  # rows found only in records get the study's seeds
    # Under the sequential design the looks decide each row's seeds (a row no claim tests has one, not study.json's
    # min_seeds): the queue, when it can be read, says which are still to come, not study.json; from the records
    # alone (an archive), the policy's first look.
    stored = Sequential.from_json(meta.get("allocation"))
    queue_says = stored is not None and use_optuna and optuna_read
    if stored is not None and not queue_says:
        design, controls = stored
        first = first_look(declared, controls, min_seeds=design.min_seeds, max_seeds=design.max_seeds)
        declared = {name: list(range(n)) for name, n in first.items()}
    seeds = [
        *(seed for row_seeds in declared.values() for seed in row_seeds),
        *(int(s) for s in meta.get("seeds") or [0]),
    ]
    seeds = sorted(set(seeds) | {seed for _, seed in records} | {seed for _, seed in optuna})
    return StudyResults(
        out_dir=out_dir,
        study=meta["study"],
        preset=str(meta.get("preset") or ""),
        seeds=seeds,
        rows=rows,
        status=_status(out_dir, rows, seeds, declared, records, optuna, queue_says=queue_says),
        meta=meta,
        notes=notes,
    )


def declared_rows(meta: Mapping[str, Any], out_dir: Path) -> list[RowSpec]:
    """study.json's rows (`meta`, as `read_study_json` read it from `out_dir`), in display order."""
    return [
        RowSpec(
            name=r["name"],
            group=str(r.get("group") or r["name"]),
            overrides=r.get("overrides") or {},
            config=r.get("config") or {},
            paper=r.get("paper") or {},
            corpus=CorpusFingerprint.from_json(r.get("corpus"), Layout(out_dir).study_file),
        )
        for r in meta["rows"]
    ]


def read_finished(out_dir: str | Path) -> StudyResults | None:
    """The finished trials of OUT from its records alone (no storage): what the sequential design's looks read
    (`design.Sequential.decide`); None before the sweep wrote study.json."""
    return load_results(out_dir, use_optuna=False) if Layout(Path(out_dir)).study_file.is_file() else None


NOT_DESIGN = {
    "model": ("kernels",),
    "train": (
        "seed",
        "compile",
        "compile_scope",
        "cuda_graphs",
        "replay_step",
        "cudnn_attention",
        "fused_loss",
        "decoding",
    ),
    "data": ("cache_dir", "num_workers", "corpus", "src", "tgt"),
}
"""Settings that change how a trial is computed or stored, not what it measures: they may differ between the trials
of one study (a resumed sweep, another machine). Where the text is read from (data.corpus and its languages) is not
what it is: the corpus fingerprint decides that, once prepared (`ablations.sweep.corpora`), so a study pinned to its own
copy resumes from it."""
_WHERE_FROM = NOT_DESIGN["data"]
"""Data settings that say where the text was read from, not what the rows see."""


def design_changes(before: Mapping[str, Any], now: Mapping[str, Any]) -> list[tuple[str, Any, Any]]:
    """(section.field, before, now) for each setting of the design (model, train, data; not `NOT_DESIGN`) that
    both configs name and that differs, in field order."""
    changed = []
    for section in ("model", "train", "data"):
        old, new = before.get(section) or {}, now.get(section) or {}
        for key in sorted(set(old) & set(new) - set(NOT_DESIGN.get(section, ()))):
            if old[key] != new[key]:
                changed.append((f"{section}.{key}", old[key], new[key]))
    return changed


def check_records(out_dir: Path, meta: Mapping[str, Any], rows: list[RowSpec], records: list[Record]) -> None:
    """Every check a reader of OUT's records makes before it reads them: one study (`check_one_study`), one corpus
    (`check_one_corpus`). What report, compare, replay, the looks and status share."""
    check_one_study(out_dir, meta, rows, records)
    check_one_corpus(out_dir, rows, records)


def no_record(out_dir: Path, row: str, seed: int) -> str:
    """Why a trial the storage calls complete is failed: its record was never written."""
    return (
        f"complete in Optuna but no record was written ({Layout(out_dir).relative(Layout(out_dir).record(row, seed))})"
    )


def check_one_study(out_dir: Path, meta: Mapping[str, Any], rows: list[RowSpec], records: list[Record]) -> None:
    """A folder holds one study: every record is of study.json's study and preset, of a row it declares, trained
    with that row's configuration. AblateError naming the first record that is not, and what to do, otherwise;
    nothing reads it silently. (Records of older versions that name no study or preset are read as the folder's.)"""
    study, preset = str(meta.get("study") or ""), str(meta.get("preset") or "")
    declared = {spec.name: spec for spec in rows}
    here = f"{out_dir}/study.json is study {study} at preset {preset}"
    move = "move it to that study's folder (its --out), or delete it"
    for record in sorted(records, key=lambda r: r.key):
        where = record.path or Layout(out_dir).record(*record.key)
        if record.study and record.study != study:
            raise AblateError(f"{where}: a trial of study {record.study}, but {here}; {move}")
        if record.preset and preset and record.preset != preset:
            raise AblateError(f"{where}: a trial at preset {record.preset}, but {here}; {move}")
        spec = declared.get(record.row)
        if spec is None:
            raise AblateError(f"{where}: row {record.row} is not a row of {here}; {move}")
        if changed := design_changes(spec.config, record.config):
            name, said, trained = changed[0]
            more = f" (and {len(changed) - 1} more)" if len(changed) > 1 else ""
            raise AblateError(
                f"{where}: row {record.row} trained with {name} {trained!r}, but {out_dir}/study.json gives it "
                f"{said!r}{more}; a table compares one design: {move}, or rerun that trial here"
            )


def check_one_corpus(out_dir: Path, rows: list[RowSpec], records: list[Record]) -> None:
    """A table compares rows trained on one corpus: among rows of the same data settings (the vocabulary, max_len:
    what shapes a prepared corpus), study.json's fingerprints and the records' must be one. AblateError naming two
    of them, the trials on each, and what to do, otherwise. Records from before fingerprints are not checked."""
    settings = {spec.name: {k: v for k, v in (spec.config.get("data") or {}).items() if k not in _WHERE_FROM}
                for spec in rows}  # fmt: skip
    seen: dict[str, dict[CorpusFingerprint, list[str]]] = {}
    declared = [(spec.name, spec.corpus, "study.json") for spec in rows if spec.corpus is not None]
    found = [(r.row, r.corpus, r.label) for r in sorted(records, key=lambda r: r.key) if r.corpus is not None]
    for row, fingerprint, who in declared + found:
        key = repr(sorted(settings.get(row, {}).items()))
        seen.setdefault(key, {}).setdefault(fingerprint, []).append(who)
    for corpora in seen.values():
        if len(corpora) > 1:
            (first, on_first), (second, on_second) = list(corpora.items())[:2]
            raise AblateError(
                f"{out_dir} mixes two corpora: {first.describe()} ({_some(on_first)}) and {second.describe()} "
                f"({_some(on_second)}); a table compares rows trained on one: move the records of one into a study "
                "of their own (another OUT), or delete them and rerun those trials on the study's corpus"
            )


def _some(names: list[str], shown: int = 4) -> str:
    names = list(dict.fromkeys(names))
    more = f" and {len(names) - shown} more" if len(names) > shown else ""
    return ", ".join(names[:shown]) + more


def _add_undeclared_rows(rows: list[RowSpec], records: dict, optuna: dict) -> list[str]:
    """Rows found only in records or Optuna (study.json older than the sweep) are shown after the declared ones."""
    notes = []
    known = {r.name for r in rows}
    for row, _ in sorted(set(records) | set(optuna)):
        if row not in known:
            record = next((r for (name, _), r in records.items() if name == row), None)
            rows.append(
                RowSpec(
                    name=row,
                    group=record.group if record else row,
                    overrides=record.overrides if record else {},
                    config=record.config if record else {},
                )
            )
            known.add(row)
            notes.append(f"row '{row}' has trials but is not in study.json; shown last")
    return notes


def _status(
    out_dir: Path,
    rows: list[RowSpec],
    seeds: list[int],
    declared: dict[str, list[int]],
    records: dict,
    optuna: dict,
    *,
    queue_says: bool = False,
) -> dict[tuple[str, int], TrialStatus]:
    """Each row x seed's state: its record if there is one, else its Optuna trial's, else pending (declared seeds;
    `queue_says`: none, the queue having said which trials are to come)."""
    status: dict[tuple[str, int], TrialStatus] = {}
    for spec in rows:
        mine = declared.get(spec.name, [])
        for seed in seeds:
            key = (spec.name, seed)
            if key in records:
                record = records[key]
                status[key] = TrialStatus(state=record.state, reason=record.reason, record=record)
            elif key in optuna and optuna[key].state == "complete":
                status[key] = TrialStatus(state="failed", reason=no_record(out_dir, spec.name, seed))
            elif key in optuna:
                status[key] = optuna[key]
            elif not queue_says and seed in (mine or [seed]):
                status[key] = TrialStatus(state="pending")
    return status


def read_trial_states(
    storage: str | None, study_name: str, out_dir: Path, *, remembered: str | None = None
) -> tuple[dict[tuple[str, int], TrialStatus], str | None]:
    """(row, seed) -> the state of the trial that speaks for it (`ledger.resolve`), read from the Optuna storage
    without creating anything, and a one-line note if the storage could not be read. Records say how finished trials
    ended; only the storage knows the trials still queued or in flight.

    The storage is `storage`, else $ABLATE_STORAGE, else `remembered` (study.json's), as for every command
    (`ablations.runtime.urls.chosen_url`). The note never shows a password: reports are files people share.
    """
    fallback = "states come from the records only (rows without a record are shown as pending)"
    try:
        url = chosen_url(storage, out_dir, remembered)
    except AblateError as err:  # study.json's URL was redacted and no other was given
        return {}, f"{err}: {fallback}"
    if not url:
        return {}, f"study.json names no Optuna storage: {fallback}"
    try:
        trials = load_trials(url, study_name, out_dir)
    except Exception as err:  # any storage problem (missing file, driver, server, unknown study) gives the fallback
        detail = scrub(str(err), url).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        return {}, f"Optuna storage {redact(url)} could not be opened ({detail}): {fallback}"
    return {
        key: TrialStatus(state=ledger.trial_state(trial), reason=trial.user_attrs.get("reason"))
        for key, trial in ledger.resolve(trials).items()
        if not ledger.closed_unrun(trial)  # never part of the study: the design's looks did not ask for it
    }, None


def resolve_out_dir(study_or_out: str | Path, *, preset: str | None = None, runs_dir: str | Path = "runs") -> Path:
    """An OUT directory given as itself or as a study name (`runs/<study>-<preset>`, newest if several)."""
    given = Path(study_or_out)
    if given.is_dir() or given.exists() or given.suffix or len(given.parts) > 1:
        if preset is not None:
            raise AblateError(f"--preset goes with a study name, not with the directory {given}")
        if not given.is_dir():
            raise AblateError(f"results directory {given} does not exist: run `ablate sweep` first or check the path")
        return given
    name = str(study_or_out)
    runs = Path(runs_dir)
    if preset is not None:
        candidates = [runs / f"{name}-{preset}"]
    else:
        candidates = sorted(runs.glob(f"{name}-*")) if runs.is_dir() else []
    candidates = [c for c in candidates if (c / "study.json").is_file()]
    if not candidates:
        where = f"{runs}/{name}-{preset}" if preset else f"{runs}/{name}-*"
        raise AblateError(
            f"no results for study '{name}': no {where} directory with a study.json; "
            "run `ablate sweep` first or pass the OUT directory"
        )
    return max(candidates, key=lambda c: (c / "study.json").stat().st_mtime)


def recipes_note(meta: Mapping[str, Any]) -> str | None:
    """Where study.json's rows train on more than one recipe (`Study.recipes`), which rows take which, and what a
    comparison across them means; None for a study of one recipe."""
    by: dict[str, list[str]] = {}
    for row in meta.get("rows") or []:
        if "recipe" in row:
            by.setdefault(row["recipe"], []).append(row["name"])
    if len(by) < 2:
        return None
    groups = "; ".join(f"{name}: {', '.join(rows)}" for name, rows in by.items())
    return (
        f"the rows train on {len(by)} recipes, each calibrated on its own base ({groups}): a comparison within a "
        "recipe is one recipe's ablation, one across recipes compares each base as tuned for itself (Melis et al., "
        "2018), not one recipe"
    )


__all__ = [
    "NOT_DESIGN",
    "RowSpec",
    "StudyResults",
    "TrialStatus",
    "check_one_corpus",
    "check_one_study",
    "check_records",
    "declared_rows",
    "design_changes",
    "no_record",
    "load_results",
    "read_finished",
    "read_trial_states",
    "resolve_out_dir",
]
