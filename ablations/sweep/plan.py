"""What one sweep runs (`Plan`): the study, the preset, the seeds, the rows' configs at each seed, the order they are
queued in, the Optuna parameters of every trial, study.json, and the checks that a resumed sweep is the same design.

`ablate sweep` parses its options into a Plan (commands/sweep.py); a launcher starts the sweep from it
(`ablations.sweep.runner`), and every worker process rebuilds the same Plan from the same options. What is queued and
looked at lives in `ablations.sweep.queueing`, one trial's run in `ablations.sweep.trial`, the worker's loop in
`ablations.sweep.worker`.
"""

from __future__ import annotations

import dataclasses
import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ablate.ablations.results import evidence
from ablate.ablations.results.evidence import Decide
from ablate.ablations.results.ledger import record_paths, recorded_rows
from ablate.ablations.results.load import design_changes, read_finished
from ablate.ablations.results.record import SEPARATOR, Layout, now, read_study_json
from ablate.ablations.results.storage.space import ParamSpace
from ablate.ablations.runtime.urls import redact
from ablate.ablations.statistics.sequential import Decision, Sequential, controls_of, rows_of
from ablate.ablations.study.claims import claims_to_data
from ablate.ablations.study.definition import Row, Study
from ablate.ablations.study.presets import get_preset
from ablate.ablations.sweep import corpora
from ablate.data.errors import AblateError
from ablate.data.export import Exported
from ablate.data.fingerprint import CorpusFingerprint


@dataclass
class Plan:
    """What one sweep runs: the study, the preset, the seeds, and settings applied to every row."""

    study: Study
    preset: str
    seeds: list[int]
    out: Path
    storage: str
    name: str
    extra: dict[str, dict[str, Any]] = field(default_factory=dict)
    retry_failed: bool = False
    only: list[str] | None = None
    """Rows this sweep trains (--rows); None: all. The study keeps every row: the others stay pending, and a later
    sweep of the same study without --rows trains them."""
    stop_at: float | None = None
    """--timeout's end as a Unix time: no trial starts after it, and running ones finish (Optuna's
    `optimize(timeout=...)`); None: no limit. The rest stay queued for the same command later."""
    control_seeds: dict[str, list[int]] | None = None
    """Control row -> its seeds (`Study.control_seeds`): the base and any row claims compare others against train
    more seeds than a row, since several comparisons use them. None: the same as every row's."""
    pin: Exported | None = None
    """The study's pinned text (OUT/corpus, `ablations.sweep.corpora`): rows that name the corpus it was exported from
    train on this copy (`training_config`). None: nothing pinned (yet)."""
    fingerprints: dict[str, CorpusFingerprint] = field(default_factory=dict)
    """Row -> the fingerprint of the corpus it trains on here, once prepared (`corpora.prepare_rows`): study.json,
    the storage and every record keep it."""
    allocation: Sequential | None = None
    """The study's sequential allocation (`Study.allocation`): the seeds each row trains come from the looks over
    its finished trials (`decision`), not from `seeds`. None: the fixed design."""
    decision: Decision | None = None
    """The last look's decision (`look`); taken from OUT's records on first use."""
    decide: Decide = evidence.decide
    """What takes the looks (`ablations.results.evidence.decide`, the statistics over OUT's records); a test may hand
    in looks of its own choosing, with the same signature."""

    def rows(self) -> list[Row]:
        return list(self.study.rows)

    def controls(self) -> dict[str, list[str]]:
        """Control row -> the rows of the study tested against it (`design.controls_of`, over `judged`): the
        rows the claims' comparisons test against that control, since its sqrt(k) share of seeds serves the k
        comparisons being tested (the modern study's base: its 12, not the M rows tested against `paper`); a row no
        claim names is in the table to be read, not tested (Table 3: 14 of its 20 rows)."""
        return self._controls_of(self.judged())

    def _controls_of(self, judged: list[str]) -> dict[str, list[str]]:
        pairs = [(comp.row, comp.against) for claim in self.study.claims for comp in claim.compare]
        return controls_of(pairs, self.study.base_name, judged)

    def judged(self) -> list[str]:
        """The rows the sequential design's looks judge and its controls serve, in the study's order: this sweep's
        (--rows) and those the study in OUT already began (the rows its study.json's allocation names, those with a
        finished trial). A sweep over a subset of a study's rows (`--rows base`, to finish one trial on a free core)
        is part of the study: were the looks to judge its rows alone, the base's share of seeds would shrink to its
        own and the look would close its control seeds unrun, though the rows left out are still compared with it."""
        ran = {row.name for row in self.rows() if self.only is None or row.name in self.only} | self._begun()
        return [row.name for row in self.rows() if row.name in ran]

    def _begun(self) -> set[str]:
        """The rows of the study in OUT that a sweep began: named by study.json's allocation, or with a record."""
        layout = Layout(self.out)
        begun = {path.name.rpartition(SEPARATOR)[0] for path in layout.records_dir.glob(f"*{SEPARATOR}*.json")}
        if layout.study_file.is_file():
            try:
                stored = Sequential.from_json(read_study_json(self.out).get("allocation"))
            except AblateError:
                stored = None  # unreadable: this sweep rewrites it, as before (`check_same_design`)
            begun |= set(rows_of(stored[1])) if stored is not None else set()
        return begun

    def look(self) -> Decision:
        """Take the sequential design's looks again over every finished trial in OUT (`queueing.look` first brings
        the records other machines wrote from the storage): what this sweep should run now. Every worker that looks
        at the same trials decides the same, and nothing is kept between looks, so a look lost to a kill costs
        nothing: the next one is it."""
        assert self.allocation is not None, "a fixed design has no looks"
        judged = self.judged()  # OUT read once a look
        self.decision = self.decide(self.allocation, read_finished(self.out), judged, self._controls_of(judged))
        return self.decision

    def timed_out(self) -> bool:
        return self.stop_at is not None and time.time() >= self.stop_at

    def seeds_of(self, row: Row) -> list[int]:
        """The seeds `row` trains: under the sequential design, those the last look asks for; else a control's own
        (`control_seeds`), the plan's seeds for every other row."""
        if self.allocation is not None:
            decision = self.decision or self.look()
            return decision.seeds.get(row.name, [])
        return (self.control_seeds or {}).get(row.name, self.seeds)

    def keys(self) -> list[tuple[Row, int]]:
        """The (row, seed) trials this sweep trains, in the order they are queued: seed by seed, so a study stopped
        half-way has whole seeds of every row to read (one seed of the whole table first), and within a seed the
        rows with the most steps first (the big row's 3x), so the longest trial does not start last."""
        rows = [row for row in self.rows() if self.only is None or row.name in self.only]
        steps = {row.name: self.run_config(row, self.seeds[0]).train.max_steps for row in rows}
        keys = [(row, seed) for row in rows for seed in self.seeds_of(row)]
        order = {row.name: i for i, row in enumerate(rows)}
        return sorted(keys, key=lambda key: (key[1], -steps[key[0].name], order[key[0].name]))

    def run_config(self, row: Row, seed: int):
        """The row's config at this seed, as the study declares it (study.json and the records keep this one)."""
        return self.study.run_config(row, self.preset, seed, **self.extra)

    def training_config(self, row: Row, seed: int):
        """What a trial of the row trains with: its config, reading the study's pinned copy where its corpus is the
        one pinned (`corpora.pinned`)."""
        run = self.run_config(row, seed)
        return dataclasses.replace(run, data=corpora.pinned(run.data, self.pin))

    def param_space(self) -> ParamSpace:
        """Every trial's Optuna parameters: row, seed and the value of each knob some row overrides (d_k and d_v
        resolved, as the table shows them)."""
        knobs = list(
            dict.fromkeys(f"{s}.{k}" for row in self.rows() for s, fields in row.overrides.items() for k in fields)
        )
        values = {}
        for row in self.rows():
            config = self.run_config(row, self.seeds[0]).to_dict()
            values[row.name] = {k: config[k.partition(".")[0]][k.partition(".")[2]] for k in knobs}
        extra = [seed for seeds in (self.control_seeds or {}).values() for seed in seeds]
        if self.allocation is not None:  # every seed a look may ask for, with room for failed ones passed over
            most = self.allocation.most_seeds(max((len(c) for c in self.controls().values()), default=1))
            extra = list(range(most + self.allocation.max_seeds))
        return ParamSpace.of(values, sorted({*self.seeds, *extra}))

    def describe(self) -> dict[str, Any]:
        """study.json: what reports read to lay out the table (rows in display order, resolved configs), and
        `pipeline_check`, the preset's reason why its rows judge nothing (None for a preset meant for results)."""
        return {
            "study": self.study.name,
            "description": self.study.description,
            "preset": self.preset,
            "pipeline_check": get_preset(self.preset).pipeline_check,
            "seeds": self.seeds,
            "control_seeds": self.control_seeds or {},
            **({"allocation": self.allocation_json()} if self.allocation is not None else {}),
            "storage": redact(self.storage),
            "optuna_study": self.name,
            "wandb_project": self.run_config(self.rows()[0], self.seeds[0]).tracking.project,
            "claims": claims_to_data(list(self.study.claims)),
            "rows": [
                {
                    "name": row.name,
                    "group": row.group,
                    "overrides": row.flat_overrides(),
                    "paper": row.paper,
                    **({"recipe": self.study.recipe_of(row)} if self.study.recipes else {}),
                    "config": self.run_config(row, self.seeds[0]).to_dict(),
                    **({"corpus": self.fingerprints[row.name].to_json()} if row.name in self.fingerprints else {}),
                }
                for row in self.rows()
            ],
            "created_at": now(),
        }

    def allocation_json(self) -> dict[str, Any]:
        """study.json's account of the sequential design: reports take its looks again from the records."""
        assert self.allocation is not None
        return self.allocation.to_json(self.controls())

    def check_same_design(self) -> None:
        """A sweep resumed in an OUT whose study.json gave its rows another configuration (a preset that changed
        between versions, a different --data or --train setting) would put trials of two designs in one table:
        one line naming the row and the fields, and what to pass instead. More seeds are no change of design."""
        if not Layout(self.out).study_file.is_file():
            return
        try:
            spec = read_study_json(self.out)
            before = {row["name"]: row.get("config") or {} for row in spec["rows"]}
        except AblateError:
            return  # unreadable: this sweep rewrites it, as before; nothing to compare against
        self._check_same_study(spec)
        self._check_same_allocation(spec.get("allocation"))

        ran = set(recorded_rows(self.out))
        changes: dict[str, list[tuple[str, Any, Any]]] = {}
        for row in sorted(self.rows(), key=lambda row: row.name not in ran):  # a row that ran there is named first
            if row.name in before:
                # As study.json stores it (`data.atomic.write_json_atomic`: tuples become lists, other values their
                # str).
                now_ = json.loads(json.dumps(self.run_config(row, self.seeds[0]).to_dict(), default=str))
                if changed := design_changes(before[row.name], now_):
                    changes[row.name] = changed
        if not changes:
            return
        first, changed = next(iter(changes.items()))
        said = ", ".join(f"{name} {old!r} (now {new!r})" for name, old, new in changed)
        # One flag continues the study where every changed row had that field's one value; else only a new --out.
        olds: dict[str, set[str]] = {}
        for name, old, _ in (c for row_changes in changes.values() for c in row_changes):
            olds.setdefault(name, set()).add(json.dumps(old))
        ways = "pass --out for a new study"
        if all(len(values) == 1 for values in olds.values()):
            keep = " ".join(f"--{name} {json.loads(values.pop())}" for name, values in olds.items())
            ways += f", or {keep} to continue this one"
        where = "ran" if first in ran else "is declared"
        raise AblateError(
            f"{self.out} holds trials of another design: row {first} {where} there with {said}"
            f"{f' ({len(changes) - 1} more rows differ)' if len(changes) > 1 else ''}; {ways}"
        )

    def _check_same_study(self, spec: dict[str, Any]) -> None:
        """OUT holds another study, or this one at another preset: say which, with its trials, and the two ways on."""
        study, preset = str(spec.get("study") or ""), str(spec.get("preset") or "")
        if (study, preset) == (self.study.name, self.preset):
            return

        trials = len(record_paths(self.out))
        raise AblateError(
            f"{self.out} holds study {study} at preset {preset} ({trials} trial{'s' if trials != 1 else ''}); "
            f"to start {self.study.name} at preset {self.preset}, pass a new --out (to continue that one: "
            f"ablate sweep {study} --preset {preset} --out {self.out})"
        )

    def _check_same_allocation(self, stored: dict[str, Any] | None) -> None:
        """The seeds' design is the design too: a sequential study resumed at another max_seeds would take its looks
        again at a level it did not spend, and one resumed with --seeds would become a fixed one. One line saying
        what it ran with and what to pass."""
        was = Sequential.from_json(stored)
        now = self.allocation
        if was is None and now is None:
            return
        if was is not None and now is not None:
            old, new = was[0], now
            if (old.min_seeds, old.max_seeds, old.error) == (new.min_seeds, new.max_seeds, new.error):
                return
            said = f"min_seeds {old.min_seeds}, max_seeds {old.max_seeds} (now {new.min_seeds}, {new.max_seeds})"
            keep = f"--min_seeds {old.min_seeds} --max_seeds {old.max_seeds}"
        elif was is not None:
            said, keep = "the sequential design (now a fixed one)", "--allocation sequential (not --seeds)"
        else:
            said, keep = "the fixed design (now the sequential one)", "--allocation fixed"
        raise AblateError(
            f"{self.out} holds a study of another design: its seeds were allocated by {said}; pass --out for a new "
            f"study, or {keep} to continue this one"
        )
