"""A finished (or running) study from Python: its trials as typed records, one DataFrame row per trial, the curves as
a long table, and the same report table and claim verdicts `ablate report` prints.

    >>> from ablate.reports import load
    >>> study = load("runs/table3-tiny")
    >>> df = study.to_pandas()                   # one row per row x seed: knobs, metrics at every budget, state
    >>> df.groupby("row")["bleu"].mean()
    >>> study.verdicts()[0].verdict              # 'reproduced', 'contradicted' or 'inconclusive'
    >>> print(study.markdown())                  # the table `ablate report` writes

pandas is an optional extra (`pip install ablate[pandas]`); everything but `to_pandas` and `curves` works without it.
Optuna's own `study.trials_dataframe()` has one row per Optuna trial, with the parameters and objective values Optuna
keeps. `to_pandas` builds on it (its trial number and times, for the trial that speaks for each row x seed) and adds
what only the records hold: the whole resolved config, every metric at every budget (T/2 as well as T), test
scores, the source check, and trials whose records came from another machine's copy.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ablate.ablations.results import Record, StudyResults, load_results, open_existing, resolve
from ablate.ablations.runtime import chosen_url
from ablate.ablations.statistics import N_SAMPLES, budget_label
from ablate.data.errors import AblateError
from ablate.reports.build import describe_corpus
from ablate.reports.claims import load_claims
from ablate.reports.sequential import report_table
from ablate.reports.writers import Context, get_writer

if TYPE_CHECKING:
    import pandas as pd
    from ablate.reports.claims import ClaimVerdict
    from ablate.reports.table import ReportTable

KNOB_SECTIONS = ("model", "train", "data")
"""The config sections whose fields become `to_pandas` columns ('model.d_k', 'train.max_steps', ...)."""
OPTUNA_COLUMNS = ("number", "datetime_start", "datetime_complete", "duration")
"""What `to_pandas` takes from Optuna's `trials_dataframe()`, as 'optuna.<name>' columns."""


def load(out: str | Path, *, storage: str | None = None, use_optuna: bool = True) -> LoadedStudy:
    """The study in the results directory `out` (the OUT of `ablate sweep`), finished or still running.

    `storage` overrides $ABLATE_STORAGE and study.json's Optuna storage, which tells pending from running trials;
    with `use_optuna=False`, or when it cannot be opened, states come from the records alone."""
    return LoadedStudy(
        load_results(out, use_optuna=use_optuna, storage=storage), storage=storage, use_optuna=use_optuna
    )


@dataclass
class LoadedStudy:
    """One study's results, read once: `trials`, `to_pandas`, `curves`, `table`, `verdicts`, `markdown`."""

    results: StudyResults
    """What the report is built from (rows, every row x seed's state, study.json)."""
    storage: str | None = None
    use_optuna: bool = True
    _tables: dict[tuple[int, str | None], ReportTable] = field(default_factory=dict, repr=False)

    @property
    def name(self) -> str:
        return self.results.study

    @property
    def preset(self) -> str:
        return self.results.preset

    @property
    def out(self) -> Path:
        return self.results.out_dir

    @property
    def seeds(self) -> list[int]:
        return self.results.seeds

    @property
    def budgets(self) -> list[str]:
        """The budgets every claim is judged at, shortest first: ['T/2', 'T']."""
        return [budget_label(f) for f in self.results.fractions]

    @property
    def trials(self) -> list[Record]:
        """Every finished trial's record (complete, failed or pruned), by row in display order, then seed."""
        order = {spec.name: i for i, spec in enumerate(self.results.rows)}
        found = [s.record for s in self.results.status.values() if s.record is not None]
        return sorted(found, key=lambda r: (order.get(r.row, len(order)), r.seed))

    def trial(self, row: str, seed: int) -> Record:
        """One trial's record; AblateError naming what the study has when it has no record for that row x seed."""
        status = self.results.status.get((row, seed))
        if status is None or status.record is None:
            state = status.state if status else "not in this study"
            have = ", ".join(t.label for t in self.trials) or "none yet"
            raise AblateError(f"{self.out}: no record for {row} seed {seed} ({state}); the records: {have}")
        return status.record

    # ---------------------------------------------------------------------------------------------- DataFrames
    def to_pandas(self) -> pd.DataFrame:
        """One row per row x seed of the study: row, group, seed, state, reason, every knob of its resolved config
        ('model.d_k', 'train.max_steps', ...), every metric at T ('bleu', 'ppl', 'test_bleu', 'wall_time_s', ...)
        and at each shorter budget ('bleu@T/2', ...), and Optuna's trial number and times ('optuna.number', ...)
        where the storage opens. Pending and running trials are rows too, with their knobs and no metrics."""
        pd = _pandas()
        specs = {spec.name: spec for spec in self.results.rows}
        rows = []
        for (row, seed), status in self.results.status.items():
            record = status.record
            config = record.config if record is not None and record.config else specs[row].config
            line: dict[str, Any] = {"row": row, "group": specs[row].group, "seed": seed, "state": status.state,
                                    "reason": status.reason}  # fmt: skip
            line |= {
                f"{section}.{name}": value
                for section in KNOB_SECTIONS
                for name, value in (config.get(section) or {}).items()
            }
            line["train.seed"] = seed
            if record is not None and record.state == "complete":
                line |= _metrics(record)
            rows.append(line)
        frame = pd.DataFrame(rows)
        return self._with_optuna(frame)

    def curves(self) -> pd.DataFrame:
        """The training curves of every finished trial as a long table: row, seed, split ('train' or 'val'), step,
        metric ('loss', 'lr', 'ppl', 'bleu', ...), value."""
        pd = _pandas()
        points = [
            {"row": r.row, "seed": r.seed, "split": split, "step": point["step"], "metric": metric, "value": value}
            for r in self.trials
            for split, curve in r.curves.items()
            for point in curve
            for metric, value in point.items()
            if metric != "step" and isinstance(value, int | float) and not isinstance(value, bool)
        ]
        return pd.DataFrame(points, columns=["row", "seed", "split", "step", "metric", "value"])

    def optuna(self) -> Any:
        """The study's Optuna study, opened read-only (`optuna.Study`: `trials_dataframe()`, the dashboard's API)."""
        import optuna  # lazy: optuna costs ~50 ms on every --help

        url = chosen_url(self.storage, self.out, self.results.meta.get("storage"))
        if not url:
            raise AblateError(f"{self.out}/study.json names no Optuna storage: pass storage=URL")
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        name = self.results.meta.get("optuna_study") or self.name
        return optuna.load_study(study_name=name, storage=open_existing(url, self.out))

    def _with_optuna(self, frame: pd.DataFrame) -> pd.DataFrame:
        """`frame` joined with Optuna's trials_dataframe() for the trial that speaks for each row x seed."""
        if not self.use_optuna:
            return frame

        try:
            study = self.optuna()
        except Exception:  # noqa: BLE001 - no storage here (a copied OUT): the records alone, as the report does
            return frame
        speaking = {trial.number: key for key, trial in resolve(study.get_trials(deepcopy=False)).items()}
        optuna_frame = study.trials_dataframe(attrs=OPTUNA_COLUMNS)
        if optuna_frame.empty:  # a study with no trials yet
            return frame
        optuna_frame = optuna_frame[optuna_frame["number"].isin(list(speaking))]
        keys = [speaking[n] for n in optuna_frame["number"]]
        optuna_frame = optuna_frame.rename(columns={c: f"optuna.{c}" for c in optuna_frame.columns})
        optuna_frame["row"], optuna_frame["seed"] = [k[0] for k in keys], [k[1] for k in keys]
        return frame.merge(optuna_frame, on=["row", "seed"], how="left")

    # ------------------------------------------------------------------------------------------ the report's view
    def table(self, *, n_samples: int | None = None, claims: str | Path | None = None) -> ReportTable:
        """The report's table (`reports.table.ReportTable`): every row's cells over seeds, the significance marks,
        the study's precision and a verdict per claim, as `ablate report` builds it (the same
        `ablations.statistics.significance.N_SAMPLES` resamples)."""
        n_samples = N_SAMPLES if n_samples is None else n_samples
        key = (n_samples, None if claims is None else str(claims))
        if key not in self._tables:
            base = self.results.base.name if self.results.base else None
            chosen = None if claims is None else load_claims(claims, [r.name for r in self.results.rows], base)
            self._tables[key] = report_table(self.results, n_samples=n_samples, claims=chosen)
        return self._tables[key]

    def verdicts(self, **kwargs: Any) -> list[ClaimVerdict]:
        """A verdict for each claim (reproduced, contradicted, inconclusive), with every comparison at every budget:
        the report's claims table (`table`'s keyword arguments)."""
        return self.table(**kwargs).claims

    def markdown(self, **kwargs: Any) -> str:
        """The Markdown report `ablate report` prints (`table`'s keyword arguments)."""
        text = get_writer("md").write(self.table(**kwargs), Context(corpus=describe_corpus(self.results)))
        assert text is not None  # a format of its own (not a companion) always writes text
        return text

    def __repr__(self) -> str:
        states: dict[str, int] = {}
        for status in self.results.status.values():
            states[status.state] = states.get(status.state, 0) + 1
        counts = ", ".join(f"{n} {state}" for state, n in sorted(states.items()))
        return f"<Study {self.name} preset={self.preset} at {self.out}: {counts}>"


def _metrics(record: Record) -> dict[str, Any]:
    """The record's metrics at T ('bleu'), then at each shorter budget it was scored at ('bleu@T/2')."""
    out: dict[str, Any] = {}
    for view in (record, *(record.at_budget(b.fraction) for b in record.budgets)):
        suffix = "" if view is record else f"@{budget_label(view.fraction)}"
        out |= {f"{name}{suffix}": value for name, value in view.metrics.items() if not isinstance(value, list | dict)}
    return out


def _pandas():
    try:
        import pandas as pd  # the optional [pandas] extra
    except ImportError:
        raise AblateError("DataFrames need pandas: pip install 'ablate[pandas]' (or pip install pandas)") from None
    return pd


__all__ = ["LoadedStudy", "load"]
