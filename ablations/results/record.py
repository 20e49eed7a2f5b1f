"""The one typed result of a trial (`Record`) and the one map of a sweep's output folder (`Layout`).

A trial's result is built in one place, `ablations.training.result.scored` (from what the trainer returned), written
and read by the ledger (`ablations.results.ledger`) as `records/<row>__seed<seed>.json`, copied into Optuna from that
file's form, and read back as this type by status, the reports and the Python API (`reports.api.load`). Records written
by older versions of ablate read the same way: every field they lack has its default.

No torch, Lightning, W&B or Optuna import here: reports import this module.
"""

from __future__ import annotations

import json
import math
import socket
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal, overload

from ablate.ablations.statistics.budgets import budget_label
from ablate.data.errors import AblateError
from ablate.data.fingerprint import CorpusFingerprint

FinishedState = Literal["complete", "failed", "pruned"]
FINISHED_STATES: tuple[FinishedState, ...] = ("complete", "failed", "pruned")
FULL = 1.0
"""The full training budget T (train.max_steps), as a fraction of itself."""
SEPARATOR = "__seed"


def key_of(row: str, seed: int) -> str:
    """The key of a row x seed: the stem of its record and hypotheses files and the name of its trial directory."""
    return f"{row}{SEPARATOR}{seed}"


def now() -> str:
    """A record's timestamps: local time with its offset."""
    return time.strftime("%Y-%m-%dT%H:%M:%S%z")


# ---------------------------------------------------------------------------------------------------------- layout
@dataclass(frozen=True)
class Layout:
    """Every path under a sweep's output folder OUT, named once:

    OUT/study.json                      the study: rows in display order, their configs, seeds, Optuna storage
    OUT/records/<key>.json              one per finished trial (complete, failed or pruned), written atomically
    OUT/hyps/<key>[.b<steps>].txt       dev hypotheses (and .nll.tsv per-sentence NLL, .test.txt test ones)
    OUT/refs/valid.txt, refs/test.txt   the references every trial shares
    OUT/corpus/                         the study's pinned text, where it depends on the machine
    (`ablations.sweep.corpora`)
    OUT/trials/<key>/                   a trial's working folder: checkpoints, result.json, W&B, its budgets
    OUT/logs/, OUT/slurm/               worker logs, a scheduler's job folders
    OUT/report/                         `ablate report`'s default output
    """

    out: Path

    def __post_init__(self) -> None:
        object.__setattr__(self, "out", Path(self.out))

    @property
    def study_file(self) -> Path:
        return self.out / "study.json"

    @property
    def records_dir(self) -> Path:
        return self.out / "records"

    def record(self, row: str, seed: int) -> Path:
        return self.records_dir / f"{key_of(row, seed)}.json"

    def trial_dir(self, row: str, seed: int) -> Path:
        return self.out / "trials" / key_of(row, seed)

    @property
    def trials_dir(self) -> Path:
        return self.out / "trials"

    def error_log(self, row: str, seed: int) -> Path:
        """A failed trial's traceback."""
        return self.trial_dir(row, seed) / "error.log"

    def hypotheses(self, stem: str, kind: Literal["dev", "nll", "test"] = "dev") -> Path:
        """hyps/<stem>.txt (dev), .nll.tsv (per dev sentence: summed NLL <tab> target tokens) or .test.txt."""
        return self.out / "hyps" / f"{stem}{ {'dev': '.txt', 'nll': '.nll.tsv', 'test': '.test.txt'}[kind] }"

    def references(self, split: Literal["valid", "test"]) -> Path:
        return self.out / "refs" / f"{split}.txt"

    @property
    def corpus_dir(self) -> Path:
        return self.out / "corpus"

    @property
    def logs_dir(self) -> Path:
        return self.out / "logs"

    def jobs_dir(self, scheduler: str) -> Path:
        """The folder of the jobs a scheduler's launcher submitted (OUT/slurm), and what its jobs leave there."""
        return self.out / scheduler

    @property
    def report_dir(self) -> Path:
        return self.out / "report"

    @overload
    def relative(self, path: Path) -> str: ...
    @overload
    def relative(self, path: None) -> None: ...
    def relative(self, path: Path | None) -> str | None:
        """How a record names a file of OUT: relative to OUT."""
        return None if path is None else str(Path(path).relative_to(self.out))

    def resolve(self, name: str | None) -> Path | None:
        """A file a record names (relative to OUT, or absolute in hand-made records), as an absolute path."""
        if not name:
            return None
        path = Path(name)
        return path if path.is_absolute() else self.out / path


# ---------------------------------------------------------------------------------------------------------- record
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
    sentence_nll: Path | None = None
    """Its per-sentence dev NLL (absolute path), or None."""
    test_hypotheses: Path | None = None
    """Its test hypotheses (absolute path), or None."""

    @property
    def label(self) -> str:
        return budget_label(self.fraction)

    def to_json(self, layout: Layout) -> dict[str, Any]:
        data = {"fraction": self.fraction, "steps": self.steps, "metrics": self.metrics}
        return data | _file_names(layout, self, ("hypotheses", "sentence_nll", "test_hypotheses"))

    @classmethod
    def from_json(cls, item: Any, path: Path, layout: Layout) -> Budget:
        return cls(
            fraction=float(_require(item, "fraction", path, (int, float))),
            steps=item.get("steps"),
            metrics=item.get("metrics") or {},
            hypotheses=layout.resolve(item.get("hypotheses")),
            sentence_nll=layout.resolve(item.get("sentence_nll")),
            test_hypotheses=layout.resolve(item.get("test_hypotheses")),
        )


@dataclass(frozen=True, kw_only=True)
class Record:
    """One trial (row x seed) of a sweep: what it ran, how it ended, what it scored at each budget, where its files
    are. Written as `records/<row>__seed<seed>.json` (`to_json`), read back by `from_json`."""

    path: Path | None = None
    """The record file, once written or read (None while the trial runs)."""
    study: str = ""
    """Study name (e.g. 'table3')."""
    preset: str = ""
    """Preset name (e.g. 'tiny')."""
    row: str
    """Row name in the study (e.g. 'B1')."""
    group: str
    """Row group (e.g. 'B')."""
    seed: int
    """Training seed of this trial."""
    overrides: dict[str, Any] = field(default_factory=dict)
    """The row's overrides of the base config, flat ('model.d_k': 16)."""
    optuna: dict[str, Any] = field(default_factory=dict)
    """The Optuna study and trial number that ran it."""
    host: str = ""
    """The machine that ran it."""
    started_at: str = ""
    config: dict[str, dict[str, Any]] = field(default_factory=dict)
    """The resolved config: {'model': ..., 'train': ..., 'data': ..., ...}."""
    corpus: CorpusFingerprint | None = None
    """The fingerprint of the corpus it trained and was scored on (`data.fingerprint`); None in older records."""
    state: FinishedState = "complete"
    """How the trial ended."""
    reason: str | None = None
    """Why it failed or was pruned (one line), else None."""
    metrics: dict[str, Any] = field(default_factory=dict)
    """At T: dev bleu, ppl, nll, source_ppl_ratio; test_bleu, test_chrf (and signatures); params, steps,
    wall_time_s, train_time_s, step_time_s, tokens_per_sec, device, precision, ... Empty when failed."""
    curves: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    """'val' and 'train' points over steps."""
    wandb: dict[str, Any] = field(default_factory=dict)
    """The W&B run ('run_id', 'run_dir'), or {} when tracking was off."""
    references: Path | None = None
    """Raw dev references (absolute path), or None."""
    hypotheses: Path | None = None
    """Detokenized dev hypotheses, one per line (absolute path), or None."""
    sentence_nll: Path | None = None
    """Per dev sentence, same order: summed NLL <tab> target tokens (absolute path), or None."""
    test_hypotheses: Path | None = None
    """The test split decoded by the final weights, one per line (absolute path), or None when it was not decoded."""
    test_references: Path | None = None
    """Raw test references, same order (absolute path), or None."""
    budgets: tuple[Budget, ...] = ()
    """The shorter budgets this trial was also scored at, shortest first (none in records older than them)."""
    finished_at: str = ""
    raw: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)
    """The record as read, for fields this class does not name (a newer ablate's)."""
    fraction: float = FULL
    """The budget the metrics and files above are from, as a fraction of T: 1.0 as read, less in `at_budget`'s."""

    # -------------------------------------------------------------------------------------------- life of a trial
    @classmethod
    def started(
        cls, *, study: str, preset: str, row: str, group: str, seed: int, overrides: dict[str, Any], optuna: dict
    ) -> Record:
        """A trial about to run on this machine."""
        return cls(
            study=study, preset=preset, row=row, group=group, seed=seed, overrides=overrides, optuna=optuna,
            host=socket.gethostname(), started_at=now(),
        )  # fmt: skip

    def failed(self, reason: str) -> Record:
        return replace(self, state="failed", reason=reason, metrics={}, curves={})

    def ended(self) -> Record:
        return replace(self, finished_at=now())

    # ---------------------------------------------------------------------------------------------------- reading
    @property
    def key(self) -> tuple[str, int]:
        return (self.row, self.seed)

    @property
    def device(self) -> str | None:
        """What it trained on ('cpu (2 threads)', 'cpu (1 thread)', 'NVIDIA H100 80GB HBM3', '8x ...'); a record
        written as 'cpu (1 threads)' reads as 'cpu (1 thread)'."""
        device = self.metrics.get("device")
        return None if device is None else str(device).replace("(1 threads)", "(1 thread)")

    @property
    def wall_time_s(self) -> float | None:
        """Seconds from its start to its record: training, validations, budget branches, test decoding, resumes."""
        return self.metrics.get("wall_time_s")

    @property
    def params(self) -> int | None:
        return self.metrics.get("params")

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
            raise AblateError(f"{self.path}: no budget {budget_label(fraction)} (it was scored at {have}): ask for one "
                              "of those, or train with train.budgets naming it")  # fmt: skip
        return replace(
            self,
            fraction=budget.fraction,
            metrics=budget.metrics,
            hypotheses=budget.hypotheses,
            sentence_nll=budget.sentence_nll,
            test_hypotheses=budget.test_hypotheses,
            budgets=(),
        )

    # ---------------------------------------------------------------------------------------------- the JSON form
    def to_json(self, layout: Layout) -> dict[str, Any]:
        """The record file's content: paths relative to OUT; a file the trial did not write, and budgets it was not
        scored at, are left out."""
        head = {
            "study": self.study, "preset": self.preset, "row": self.row, "group": self.group, "seed": self.seed,
            "overrides": self.overrides, "optuna": self.optuna, "host": self.host, "started_at": self.started_at,
            "config": self.config, **({"corpus": self.corpus.to_json()} if self.corpus else {}), "state": self.state,
            "reason": self.reason, "metrics": self.metrics, "curves": self.curves, "wandb": self.wandb,
        }  # fmt: skip
        files = _file_names(layout, self, RECORD_FILES)
        budgets = {"budgets": [b.to_json(layout) for b in self.budgets]} if self.budgets else {}
        named = {
            *head,
            "corpus",
            *RECORD_FILES,
            "budgets",
            "finished_at",
        }  # what this class writes, or leaves out when empty
        unknown = {k: v for k, v in self.raw.items() if k not in named}  # a newer ablate's fields: kept as read
        return head | files | budgets | unknown | {"finished_at": self.finished_at}

    @classmethod
    def from_json(cls, data: Any, path: Path, layout: Layout) -> Record:
        """A record file's content as a Record; AblateError naming the file and field when it is not one. Records
        of older versions read too: a missing field takes its default."""
        state = _require(data, "state", path, str)
        if state not in FINISHED_STATES:
            raise AblateError(f"{path}: state '{state}' is not one of {', '.join(FINISHED_STATES)}")
        row = _require(data, "row", path, str)
        budgets = data.get("budgets") or []
        if not isinstance(budgets, list):
            raise AblateError(f"{path}: field 'budgets' has the wrong type ({type(budgets).__name__})")
        return cls(
            path=path,
            study=str(data.get("study") or ""),
            preset=str(data.get("preset") or ""),
            row=row,
            group=str(data.get("group") or row),
            seed=_require(data, "seed", path, int),
            overrides=data.get("overrides") or {},
            optuna=data.get("optuna") or {},
            host=str(data.get("host") or ""),
            started_at=str(data.get("started_at") or ""),
            config=data.get("config") or {},
            corpus=CorpusFingerprint.from_json(data.get("corpus"), path),
            state=state,
            reason=data.get("reason"),
            metrics=data.get("metrics") or {},
            curves=data.get("curves") or {},
            wandb=data.get("wandb") or {},
            budgets=tuple(sorted((Budget.from_json(b, path, layout) for b in budgets), key=lambda b: b.fraction)),
            finished_at=str(data.get("finished_at") or ""),
            raw=data,
            references=layout.resolve(data.get("references")),
            hypotheses=layout.resolve(data.get("hypotheses")),
            sentence_nll=layout.resolve(data.get("sentence_nll")),
            test_hypotheses=layout.resolve(data.get("test_hypotheses")),
            test_references=layout.resolve(data.get("test_references")),
        )

    @classmethod
    def read(cls, path: Path, out: Path | None = None) -> Record:
        """Read one record file; the files it names are resolved against `out` (default: the folder holding its
        `records/` folder)."""
        path = Path(path)
        if out is None:
            out = path.parent.parent if path.parent.name == "records" else path.parent
        return cls.from_json(read_json(path), path, Layout(out))


RECORD_FILES = ("references", "hypotheses", "sentence_nll", "test_hypotheses", "test_references")
"""A record's fields naming files under OUT, in the order its JSON form lists them."""


def _file_names(layout: Layout, entry: Any, names: tuple[str, ...]) -> dict[str, str]:
    return {name: layout.relative(getattr(entry, name)) for name in names if getattr(entry, name) is not None}


def read_json(path: Path) -> Any:
    """Parse a JSON file; AblateError naming the file when it is missing or corrupt."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as err:
        raise AblateError(f"cannot read {path}: {err.strerror or err}") from err
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        raise AblateError(
            f"{path} is not valid JSON (line {err.lineno}, column {err.colno}: {err.msg}): "
            "delete it to rerun that trial, or restore it"
        ) from err


def _require(data: Any, key: str, path: Path, kind: type | tuple[type, ...]) -> Any:
    if not isinstance(data, dict) or key not in data:
        raise AblateError(f"{path}: missing field '{key}'; was it written by `ablate sweep`?")
    if not isinstance(data[key], kind):
        raise AblateError(f"{path}: field '{key}' has the wrong type ({type(data[key]).__name__})")
    return data[key]


def read_study_json(out: Path) -> dict[str, Any]:
    """Read and check `OUT/study.json`."""
    out = Path(out)
    path = Layout(out).study_file
    if not out.is_dir():
        raise AblateError(f"results directory {out} does not exist: run `ablate sweep` first or check the path")
    if not path.is_file():
        raise AblateError(f"{out} has no study.json: is it the OUT directory of `ablate sweep`?")
    meta = read_json(path)
    _require(meta, "study", path, str)
    rows = _require(meta, "rows", path, list)
    for i, row in enumerate(rows):
        if not isinstance(row, dict) or not isinstance(row.get("name"), str):
            raise AblateError(f"{path}: rows[{i}] has no 'name'")
    return meta


def declared_seeds(meta: dict[str, Any], rows: list[str] | None = None) -> dict[str, list[int]]:
    """Row -> the seeds study.json declares for it: a control row's own (the base, a claim's reference row: more
    than a row's, `Study.control_seeds`), every other row's the study's. An older study.json gave the base's as a
    list (the row whose group is `base`), or none at all. `rows`: the rows to answer for (default study.json's)."""
    seeds = [int(s) for s in meta.get("seeds") or []]
    controls = meta.get("control_seeds") or {}
    if isinstance(controls, list):
        base = next((r["name"] for r in meta.get("rows", []) if r.get("group") == "base"), None)
        controls = {base: controls} if base else {}
    controls = {str(name): [int(s) for s in row_seeds] for name, row_seeds in controls.items()}
    names = rows if rows is not None else [row["name"] for row in meta.get("rows", [])]
    return {name: controls.get(name, seeds) for name in names}


__all__ = [
    "Budget",
    "Layout",
    "Record",
    "declared_seeds",
    "key_of",
    "read_json",
    "read_study_json",
    "FULL",
    "SEPARATOR",
    "now",
]  # fmt: skip
