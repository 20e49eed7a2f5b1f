"""Reading a results directory written by `ablate sweep`: `study.json`, the trial records, the Optuna states.

The layout (the contract with the sweep):

    OUT/study.json                      the study: rows in display order, their configs, seeds, Optuna storage
    OUT/records/<row>__seed<s>.json     one per finished trial (complete, failed or pruned), written atomically
    OUT/hyps/..., OUT/refs/...          dev (and test) hypotheses and references, paths given in the records

Records are the truth for finished trials. The Optuna storage only adds what records cannot say: which trials are
still pending or running. Nothing here imports training code.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from ablations import ledger
from ablations.ledger import State, budget_label
from data.errors import AblateError

FINISHED_STATES = ("complete", "failed", "pruned")
FULL = 1.0
"""The full training budget T (train.max_steps), as a fraction of itself."""


@dataclass(frozen=True, kw_only=True)
class Budget:
    """A shorter budget of a trial (train.budgets): a branch of the run annealed to `steps`, scored like the end."""

    fraction: float
    """Its steps as a fraction of T (train.max_steps), in (0, 1)."""
    steps: int | None
    """Optimizer steps of the branch."""
    metrics: dict[str, Any]
    """Its metrics, the same keys as the record's (bleu, ppl, test_bleu, source_ppl_ratio, ...)."""
    hypotheses: Path | None
    """Its dev hypotheses (absolute path), or None."""
    sentence_nll: Path | None
    """Its per-sentence dev NLL (absolute path), or None."""
    test_hypotheses: Path | None
    """Its test hypotheses (absolute path), or None."""


@dataclass(frozen=True, kw_only=True)
class Record:
    """One finished trial (row x seed), as the sweep wrote it to `records/<row>__seed<seed>.json`."""

    path: Path
    """The record file."""
    row: str
    """Row name in the study (e.g. 'B1')."""
    group: str
    """Row group (e.g. 'B')."""
    seed: int
    """Training seed of this trial."""
    state: Literal["complete", "failed", "pruned"]
    """How the trial ended."""
    reason: str | None
    """Why it failed or was pruned (one line), else None."""
    overrides: dict[str, Any]
    """The row's overrides of the base config."""
    config: dict[str, dict[str, Any]]
    """The resolved config: {'model': ..., 'train': ..., 'data': ...}."""
    metrics: dict[str, Any]
    """Final metrics (bleu, ppl, params, wall_time_s, tokens_per_sec, device, ...); may be partial when failed."""
    curves: dict[str, list[dict[str, Any]]]
    """'val' and 'train' points over steps."""
    hypotheses: Path | None
    """Detokenized dev hypotheses, one per line (absolute path), or None."""
    references: Path | None
    """Raw dev references, same order (absolute path), or None."""
    sentence_nll: Path | None = None
    """Per dev sentence, same order: summed NLL <tab> target tokens (absolute path), or None."""
    test_hypotheses: Path | None = None
    """The test split decoded by the final weights, one per line (absolute path), or None when it was not decoded.
    Its scores are the metrics test_bleu, test_chrf (with test_bleu_signature, test_chrf_signature)."""
    test_references: Path | None = None
    """Raw test references, same order (absolute path), or None."""
    raw: dict[str, Any]
    """The whole record as read, for fields this class does not name (optuna, wandb, host, times)."""
    budgets: tuple[Budget, ...] = ()
    """The shorter budgets this trial was also scored at, shortest first (none in records older than them)."""
    fraction: float = FULL
    """The budget the metrics and files above are from, as a fraction of T: 1.0 as read, less in `at_budget`'s."""

    @property
    def label(self) -> str:
        """'row@seed', the name `ablate compare` accepts."""
        return f"{self.row}@{self.seed}"

    @property
    def fractions(self) -> tuple[float, ...]:
        """Every budget this record can be seen at (`at_budget`), as fractions of T, ascending."""
        return tuple(sorted({self.fraction, *(b.fraction for b in self.budgets)}))

    def at_budget(self, fraction: float) -> Record:
        """The record as its trial stood at budget `fraction` of T: that budget's metrics, hypotheses, sentence NLL
        and test hypotheses (references, config and curves stay). Its own budget gives itself; AblateError naming
        the budgets it has for any other."""
        if math.isclose(fraction, self.fraction):
            return self
        budget = next((b for b in self.budgets if math.isclose(b.fraction, fraction)), None)
        if budget is None:
            have = ", ".join(budget_label(f) for f in self.fractions)
            raise AblateError(f"{self.path}: no budget {budget_label(fraction)} (it was scored at {have})")
        return replace(
            self,
            fraction=budget.fraction,
            metrics=budget.metrics,
            hypotheses=budget.hypotheses,
            sentence_nll=budget.sentence_nll,
            test_hypotheses=budget.test_hypotheses,
            budgets=(),
        )


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


def read_json(path: Path) -> Any:
    """Parse a JSON file; AblateError naming the file when it is missing or corrupt."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as err:
        raise AblateError(f"cannot read {path}: {err.strerror or err}") from err
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        raise AblateError(
            f"{path} is not valid JSON (line {err.lineno}, column {err.colno}: {err.msg}): "
            "delete it to rerun that trial, or restore it"
        ) from err


def _require(data: dict[str, Any], key: str, path: Path, kind: type | tuple[type, ...]) -> Any:
    if not isinstance(data, dict) or key not in data:
        raise AblateError(f"{path}: missing field '{key}'; was it written by `ablate sweep`?")
    if not isinstance(data[key], kind):
        raise AblateError(f"{path}: field '{key}' has the wrong type ({type(data[key]).__name__})")
    return data[key]


def _resolve(out_dir: Path, rel: str | None) -> Path | None:
    if not rel:
        return None
    path = Path(rel)
    return path if path.is_absolute() else out_dir / path


def read_record(path: Path, out_dir: Path | None = None) -> Record:
    """Read one trial record; relative hypothesis/reference paths are resolved against `out_dir`.

    `out_dir` defaults to the parent of the `records/` folder holding the file.
    """
    path = Path(path)
    data = read_json(path)
    if out_dir is None:
        out_dir = path.parent.parent if path.parent.name == "records" else path.parent
    state = _require(data, "state", path, str)
    if state not in FINISHED_STATES:
        raise AblateError(f"{path}: state '{state}' is not one of {', '.join(FINISHED_STATES)}")
    return Record(
        path=path,
        row=_require(data, "row", path, str),
        group=str(data.get("group") or _require(data, "row", path, str)),
        seed=_require(data, "seed", path, int),
        state=state,
        reason=data.get("reason"),
        overrides=data.get("overrides") or {},
        config=data.get("config") or {},
        metrics=data.get("metrics") or {},
        curves=data.get("curves") or {},
        hypotheses=_resolve(out_dir, data.get("hypotheses")),
        references=_resolve(out_dir, data.get("references")),
        sentence_nll=_resolve(out_dir, data.get("sentence_nll")),
        test_hypotheses=_resolve(out_dir, data.get("test_hypotheses")),
        test_references=_resolve(out_dir, data.get("test_references")),
        raw=data,
        budgets=_budgets(data.get("budgets"), path, out_dir),
    )


def _budgets(raw: Any, path: Path, out_dir: Path) -> tuple[Budget, ...]:
    """A record's 'budgets' list read into `Budget`s, shortest first (empty when it has none)."""
    if not raw:
        return ()
    if not isinstance(raw, list):
        raise AblateError(f"{path}: field 'budgets' has the wrong type ({type(raw).__name__})")
    budgets = []
    for item in raw:
        fraction = _require(item, "fraction", path, (int, float))
        budgets.append(
            Budget(
                fraction=float(fraction),
                steps=item.get("steps"),
                metrics=item.get("metrics") or {},
                hypotheses=_resolve(out_dir, item.get("hypotheses")),
                sentence_nll=_resolve(out_dir, item.get("sentence_nll")),
                test_hypotheses=_resolve(out_dir, item.get("test_hypotheses")),
            )
        )
    return tuple(sorted(budgets, key=lambda b: b.fraction))


def read_study_json(out_dir: Path) -> dict[str, Any]:
    """Read and check `OUT/study.json`."""
    path = out_dir / "study.json"
    if not out_dir.is_dir():
        raise AblateError(f"results directory {out_dir} does not exist: run `ablate sweep` first or check the path")
    if not path.is_file():
        raise AblateError(f"{out_dir} has no study.json: is it the OUT directory of `ablate sweep`?")
    meta = read_json(path)
    _require(meta, "study", path, str)
    rows = _require(meta, "rows", path, list)
    for i, row in enumerate(rows):
        if not isinstance(row, dict) or not isinstance(row.get("name"), str):
            raise AblateError(f"{path}: rows[{i}] has no 'name'")
    return meta


def load_results(out_dir: str | Path, *, use_optuna: bool = True, storage: str | None = None) -> StudyResults:
    """Read a results directory: study.json, every record, and (if it opens) the Optuna storage.

    `storage` overrides $ABLATE_STORAGE, which overrides study.json's storage URL (it keeps no PostgreSQL password).
    """
    out_dir = Path(out_dir)
    meta = read_study_json(out_dir)
    rows = [
        RowSpec(
            name=r["name"],
            group=str(r.get("group") or r["name"]),
            overrides=r.get("overrides") or {},
            config=r.get("config") or {},
            paper=r.get("paper") or {},
        )
        for r in meta["rows"]
    ]
    records: dict[tuple[str, int], Record] = {}
    for path in ledger.record_paths(out_dir):
        record = read_record(path, out_dir)
        records[(record.row, record.seed)] = record

    notes: list[str] = []
    optuna: dict[tuple[str, int], TrialStatus] = {}
    if use_optuna:
        name = meta.get("optuna_study") or meta["study"]
        optuna, note = read_trial_states(storage, name, out_dir, remembered=meta.get("storage"))
        if note:
            notes.append(note)
    notes += _add_undeclared_rows(rows, records, optuna)
    seeds = [int(s) for s in meta.get("seeds") or [0]]
    seeds = sorted(set(seeds) | {seed for _, seed in records} | {seed for _, seed in optuna})
    return StudyResults(
        out_dir=out_dir,
        study=meta["study"],
        preset=str(meta.get("preset") or ""),
        seeds=seeds,
        rows=rows,
        status=_status(out_dir, rows, seeds, meta.get("seeds") or [], records, optuna),
        meta=meta,
        notes=notes,
    )


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
    out_dir: Path, rows: list[RowSpec], seeds: list[int], declared: list[int], records: dict, optuna: dict
) -> dict[tuple[str, int], TrialStatus]:
    """Each row x seed's state: its record if there is one, else its Optuna trial's, else pending (declared seeds)."""
    status: dict[tuple[str, int], TrialStatus] = {}
    for spec in rows:
        for seed in seeds:
            key = (spec.name, seed)
            if key in records:
                record = records[key]
                status[key] = TrialStatus(state=record.state, reason=record.reason, record=record)
            elif key in optuna and optuna[key].state == "complete":
                missing = ledger.record_path(out_dir, spec.name, seed).relative_to(out_dir)
                status[key] = TrialStatus(
                    state="failed", reason=f"complete in Optuna but no record was written ({missing})"
                )
            elif key in optuna:
                status[key] = optuna[key]
            elif seed in (declared or [seed]):
                status[key] = TrialStatus(state="pending")
    return status


def read_trial_states(
    storage: str | None, study_name: str, out_dir: Path, *, remembered: str | None = None
) -> tuple[dict[tuple[str, int], TrialStatus], str | None]:
    """(row, seed) -> the state of the trial that speaks for it (`ledger.resolve`), read from the Optuna storage
    without creating anything, and a one-line note if the storage could not be read. Records say how finished trials
    ended; only the storage knows the trials still queued or in flight.

    The storage is `storage`, else $ABLATE_STORAGE, else `remembered` (study.json's), as for every command
    (`ablations.storage.chosen_url`). The note never shows a password: reports are files people share.
    """
    from ablations.storage import chosen_url, load_trials, redact, scrub

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
