"""The sweep runner: every row x seed of a study as one Optuna trial, resumable, shared by any number of workers.

How "exactly once" holds:
- Rows are enqueued (never sampled: GridSampler can hand one point to two workers). Enqueueing skips keys that
  already have a live trial; two coordinators racing may still enqueue a key twice, so a worker runs a trial only
  if no lower-numbered live trial has the same key, and closes duplicates without training.
- A worker claims a queued trial through the storage's atomic WAITING -> RUNNING transition.
- A trial's record is written (atomically) before the trial is told COMPLETE; a retried trial whose record exists
  is closed from the record, not trained again.
- A dead worker is found by liveness: its heartbeat (a trial user attribute refreshed every few seconds) goes
  stale, or, on the same host, its process id is gone. Its trial is failed and re-enqueued, and the retry resumes
  from the trial's last checkpoint (`storage.queue.recover_dead`).
Storages and the queue's state moves live in `ablations.storage`; record names, files and which trial speaks for a
row x seed in `ablations.ledger`; what a worker knows of its SLURM job and rank in `ablations.environment`.
"""

from __future__ import annotations

import dataclasses
import json
import os
import socket
import sys
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ablate.ablations import corpora, environment, interrupt, ledger
from ablate.ablations.claims import claims_to_data
from ablate.ablations.design import Decision, Sequential, controls_of
from ablate.ablations.presets import get_preset
from ablate.ablations.record import Layout, Record, now, read_study_json
from ablate.ablations.results import read_finished
from ablate.ablations.storage.queue import Queue, recover_dead
from ablate.ablations.storage.space import ParamSpace
from ablate.ablations.storage.urls import redact, scrub
from ablate.ablations.studies import Row, Study
from ablate.data.errors import AblateError
from ablate.data.export import Exported
from ablate.data.fingerprint import CorpusFingerprint

LIVE_STATES = ("WAITING", "RUNNING", "COMPLETE")


# ------------------------------------------------------------------------------------------------------ the plan
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
    """The study's pinned text (OUT/corpus, `ablations.corpora`): rows that name the corpus it was exported from
    train on this copy (`training_config`). None: nothing pinned (yet)."""
    fingerprints: dict[str, CorpusFingerprint] = field(default_factory=dict)
    """Row -> the fingerprint of the corpus it trains on here, once prepared (`corpora.prepare_rows`): study.json,
    the storage and every record keep it."""
    allocation: Sequential | None = None
    """The study's sequential allocation (`Study.allocation`): the seeds each row trains come from the looks over
    its finished trials (`decision`), not from `seeds`. None: the fixed design."""
    decision: Decision | None = None
    """The last look's decision (`look`); taken from OUT's records on first use."""

    def rows(self) -> list[Row]:
        return list(self.study.rows)

    def controls(self) -> dict[str, list[str]]:
        """Control row -> the rows of this sweep tested against it (`design.controls_of`, within --rows): the
        rows the claims' comparisons test against that control, since its sqrt(k) share of seeds serves the k
        comparisons being tested (the modern study's base: its 12, not the M rows tested against `paper`); a row no
        claim names is in the table to be read, not tested (Table 3: 14 of its 20 rows)."""
        ran = [row.name for row in self.rows() if self.only is None or row.name in self.only]
        pairs = [(comp.row, comp.against) for claim in self.study.claims for comp in claim.compare]
        return controls_of(pairs, self.study.base_name, ran)

    def look(self, queue: Queue | None = None) -> Decision:
        """Take the sequential design's looks again over every finished trial (records other machines wrote come
        from the storage first): what this sweep should run now. Every worker that looks at the same trials decides
        the same, and nothing is kept between looks, so a look lost to a kill costs nothing: the next one is it."""
        assert self.allocation is not None, "a fixed design has no looks"
        if queue is not None:
            sync_records(self, queue)
        ran = [row.name for row in self.rows() if self.only is None or row.name in self.only]
        self.decision = self.allocation.decide(read_finished(self.out), ran, self.controls())
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
        self._check_same_allocation(spec.get("allocation"))
        for row in self.rows():
            if row.name not in before:
                continue
            # As study.json stores it (`ledger.write_json_atomic`: tuples become lists, other values their str).
            now_ = json.loads(json.dumps(self.run_config(row, self.seeds[0]).to_dict(), default=str))
            changed = []
            for section in ("model", "train", "data"):
                old, new = before[row.name].get(section) or {}, now_.get(section, {})
                for key in sorted(set(old) & set(new) - set(_NOT_DESIGN.get(section, ()))):
                    if old[key] != new[key]:
                        changed.append((f"{section}.{key}", old[key], new[key]))
            if changed:
                said = ", ".join(f"{name} {old!r} (now {new!r})" for name, old, new in changed)
                keep = " ".join(f"--{name} {old}" for name, old, _ in changed)
                raise AblateError(
                    f"{self.out} holds trials of another design: row {row.name} was run with {said}; "
                    f"pass --out for a new study, or {keep} to continue this one"
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
            if (old.min_seeds, old.max_seeds, old.design) == (new.min_seeds, new.max_seeds, new.design):
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


_NOT_DESIGN = {
    "model": ("kernels",),
    "train": ("seed", "compile", "compile_scope", "cuda_graphs", "cudnn_attention", "fused_loss", "decoding"),
    "data": ("cache_dir", "num_workers", "corpus", "src", "tgt"),
}
"""Settings that change how a trial is computed or stored, not what it measures: they may differ on resume. Where
the text is read from (data.corpus and its languages) is not what it is: the corpus fingerprint decides that, once
prepared (`ablations.corpora`), so a study pinned to its own copy resumes from it."""


# --------------------------------------------------------------------------------------------------- bookkeeping
def enqueue(plan: Plan, queue: Queue) -> int:
    """Queue every row x seed that has no live trial yet. Returns how many were queued."""
    live = LIVE_STATES if plan.retry_failed else (*LIVE_STATES, "FAIL", "PRUNED")
    have = {ledger.trial_key(t) for t in queue.trials(*live) if not ledger.superseded(t)}
    missing = [(row, seed) for row, seed in plan.keys() if (row.name, seed) not in have]
    space = None
    if missing:
        space, left_out = queue.settle(plan.param_space())
        for line in left_out:
            print(
                f"ablate: the new trials carry no Optuna parameter {line}; a study in a new --out has every axis",
                file=sys.stderr,
            )
    for row, seed in missing:
        queue.enqueue(row.name, seed, row.group, space=space)
    return len(missing)


def wanted(plan: Plan, queue: Queue, key: tuple[str, int]) -> bool:
    """Under the sequential design, whether the looks over the finished trials ask for `key`: a trial queued by an
    older version of the policy (or under other --max_seeds) is not run. The looks only ever add seeds as trials
    finish, so a fresh look asks for everything an earlier one queued, unless the policy itself has changed."""
    if plan.allocation is None:
        return True
    row, seed = key
    decision = plan.decision
    if decision is None or seed not in decision.seeds.get(row, []):
        decision = plan.look(queue)
    return seed in decision.seeds.get(row, [])


def is_duplicate(queue: Queue, trial) -> bool:
    """True if a lower-numbered live trial has the same key: that one is (or will be) the run of this key."""
    key = ledger.trial_key(trial)
    return any(other.number < trial.number and ledger.trial_key(other) == key for other in queue.trials(*LIVE_STATES))


# ------------------------------------------------------------------------------------------ relaunched DDP ranks
@dataclass(frozen=True)
class TrialSpec:
    """What a trial's training needs besides its config, kept in TRIAL_DIR/trial.json. Under plain DDP, Lightning
    relaunches this command once per extra rank as a child of rank 0: the child finds its trial by the file whose
    `pid` is its parent's (`find_for_parent`), trains it as a follower rank, and leaves."""

    run: dict[str, Any]
    trial_dir: str
    name: str
    group: str
    wandb_id: str
    host: str
    pid: int
    slurm_job: str | None = None
    """The SLURM job whose other tasks are this trial's other ranks (a job of several tasks), else None."""
    started_at: float = 0.0

    FILE = "trial.json"

    @classmethod
    def for_trial(cls, trial_dir: Path, run, *, name: str, group: str) -> TrialSpec:
        """The spec of a trial about to train in this process, written to its directory. The W&B run id (in
        TRIAL_DIR/wandb_id) is kept across retries: a resumed trial continues its W&B run."""
        import uuid

        id_file = trial_dir / "wandb_id"
        if not id_file.exists():
            ledger.write_text_atomic(id_file, uuid.uuid4().hex[:12])
        wandb_id = id_file.read_text(encoding="utf-8").strip()
        here = environment.here()
        job = here.incarnation if here.ranks_share_job else None
        spec = cls(run.to_dict(), str(trial_dir), name, group, wandb_id, socket.gethostname(), os.getpid(), job,
                   time.time())  # fmt: skip
        ledger.write_json_atomic(trial_dir / cls.FILE, dataclasses.asdict(spec))
        return spec

    @classmethod
    def read(cls, path: Path) -> TrialSpec | None:
        try:
            return cls(**json.loads(path.read_text(encoding="utf-8")))
        except (OSError, ValueError, TypeError):
            return None

    @classmethod
    def find_for_job(cls, out: Path, job: str, seen: set) -> TrialSpec | None:
        """A trial that task 0 of this run of SLURM job `job` (`WorkerEnv.incarnation`) started, not in `seen`."""
        for path in sorted(Layout(out).trials_dir.glob(f"*/{cls.FILE}")):
            spec = cls.read(path)
            if spec and spec.slurm_job == job and (spec.trial_dir, spec.started_at) not in seen:
                return spec
        return None

    @classmethod
    def find_for_parent(cls, out: Path) -> TrialSpec | None:
        """The trial that this process's parent (rank 0 of a plain-DDP trial) is training, if any."""
        for path in sorted(Layout(out).trials_dir.glob(f"*/{cls.FILE}")):
            spec = cls.read(path)
            if spec and spec.pid == os.getppid() and spec.host == socket.gethostname():
                return spec
        return None


def close_recorded(plan: Plan, queue: Queue) -> int:
    """Close every queued trial whose result OUT's records already hold: a study resumed from its records into a
    fresh storage (benchmarks/runs/*.tar.xz), or a worker that died between writing a record and telling Optuna. The
    counts and the ETA are right from the start, and no worker spends a claim on them. Returns how many."""
    closed = 0
    for trial in queue.trials("WAITING"):
        key = ledger.trial_key(trial)
        record = None if key is None else ledger.read_record(plan.out, *key)
        if record is None or (record.state != "complete" and plan.retry_failed):
            continue
        claimed = queue.claim_trial(trial)
        if claimed is not None:  # run_one closes it from the record (or as a duplicate of a live trial)
            run_one(plan, queue, claimed)
            closed += 1
    return closed


# -------------------------------------------------------------------------------------------------------- trials
def run_one(plan: Plan, queue: Queue, trial) -> str:
    """Run (or close) one claimed trial. Never raises for a failed training: the sweep goes on."""
    from optuna.trial import TrialState

    key = ledger.trial_key(trial)
    assert key is not None, "a sweep's trials name their row and seed"
    row_name, seed = key
    if is_duplicate(queue, trial):
        queue.set_attr(trial, "reason", ledger.DUPLICATE_REASON)
        queue.study.tell(trial.number, state=TrialState.PRUNED)
        return "duplicate"
    record = ledger.read_record(plan.out, row_name, seed)
    if record is not None and (record.state == "complete" or not plan.retry_failed):
        tell(queue, trial, record, plan.out)  # finished earlier; the worker died before telling Optuna
        return record.state
    if record is None and not wanted(plan, queue, key):
        queue.set_attr(trial, "reason", ledger.UNWANTED_REASON)
        queue.study.tell(trial.number, state=TrialState.PRUNED)
        return "unwanted"
    row = plan.study.row(row_name)
    record = Record.started(
        study=plan.study.name, preset=plan.preset, row=row.name, group=row.group, seed=seed,
        overrides=row.flat_overrides(), optuna={"study": plan.name, "trial_number": trial.number},
    )  # fmt: skip
    with queue.heartbeat(trial):
        try:
            record = ledger.write_record(plan.out, _run_trial(plan, queue, record, trial).ended())
        except (interrupt.Interrupted, KeyboardInterrupt) as err:
            _retry_later(queue, trial, f"interrupted ({interrupt.reason()}): retried", getattr(err, "step", None))
            raise
        except SystemExit:  # SIGTERM (scancel, a node going down): Lightning stops the step and exits
            _retry_later(queue, trial, "stopped by SIGTERM: retried")
            raise
        except Exception as err:
            disk = interrupt.disk_error(err)
            if disk is None:
                raise
            _retry_later(queue, trial, f"stopped: {disk}")
            raise disk from None
        tell(queue, trial, record, plan.out)
    _prune(plan, record)
    return record.state


def _retry_later(queue: Queue, trial, reason: str, step: int | None = None) -> None:
    """A trial stopped by its worker (Ctrl-C, preemption, a full disk) is queued again now, so the next run resumes
    it from its checkpoint at once, not after the liveness grace; `step`, where that checkpoint is, is kept on the
    stopped trial (`STOPPED_AT`: status shows the queued one as resuming there). Best effort: on a full disk the
    storage may not take the write either, and then the next run's liveness check does the same."""
    try:
        if step:
            queue.set_attr(trial, ledger.STOPPED_AT, int(step))
        queue.retry(trial, reason)
    except Exception:  # noqa: BLE001 - see above
        pass


def _prune(plan: Plan, record: Record) -> None:
    """A finished trial's checkpoints, cut to train.keep_checkpoints now that its record is written."""
    keep = record.config.get("train", {}).get("keep_checkpoints")
    if keep and record.state == "complete":
        from ablate.ablations.checkpoints import prune

        prune(Layout(plan.out).trial_dir(record.row, record.seed) / "checkpoints", keep)


def _run_trial(plan: Plan, queue: Queue, record: Record, trial) -> Record:
    """Train the trial's row x seed: the record with its config and outcome (complete, or failed with a reason)."""
    row, seed = plan.study.row(record.row), record.seed
    trial_dir = Layout(plan.out).trial_dir(row.name, seed)
    started = time.time()
    try:
        run = plan.run_config(row, seed)
        record = dataclasses.replace(record, config=run.to_dict(), corpus=plan.fingerprints.get(row.name))
        from ablate.ablations.trial_files import scored

        result = _train(plan, plan.training_config(row, seed), row, seed, trial_dir, started, queue.trial_id(trial))
        return scored(record, result, Layout(plan.out))
    except Exception as err:  # noqa: BLE001 - a failed trial must never kill the sweep
        if interrupt.disk_error(err) is not None:  # ... but a full disk would fail every trial after it: stop
            raise
        if interrupt.requested():  # it failed because it was being stopped (SIGTERM reached W&B too): a retry
            raise interrupt.Interrupted() from err
        trial_dir.mkdir(parents=True, exist_ok=True)
        (trial_dir / "error.log").write_text(traceback.format_exc(), encoding="utf-8")
        return record.failed(_reason(err))


def _train(plan: Plan, run, row: Row, seed: int, trial_dir: Path, started: float, trial_id: int):
    """Train one trial (imports torch and Lightning, so only here); its `TrainResult`."""
    from ablate.ablations.callbacks import ProgressToStorage
    from ablate.ablations.tracking import RunIdentity
    from ablate.ablations.train import train

    who = RunIdentity(plan.study.name, plan.preset, row.name, row.group, seed, run.tracking.label)
    spec = TrialSpec.for_trial(trial_dir, run, name=who.name, group=who.group)
    return train(
        run,
        trial_dir,
        name=spec.name,
        group=spec.group,
        tags=who.tags,
        started_at=started,
        wandb_id=spec.wandb_id,
        callbacks=[ProgressToStorage(plan.storage, plan.name, trial_id)],
        prune=False,  # once the record is written (run_one)
        extra_config=who.config(),
    )


def _reason(err: BaseException) -> str:
    """The one-line reason a failed trial's record gives (a URL's password in the error text hidden, terminal colour
    codes, which torch puts in some messages, dropped: the reason goes into tables and web pages)."""
    from ablate.lightning_modules.module import TrainingDiverged
    from rich.text import Text

    text = scrub(" ".join(Text.from_ansi(str(err)).plain.split())) or type(err).__name__
    if isinstance(err, TrainingDiverged):
        return f"diverged: {text}"
    if isinstance(err, AblateError):
        return text
    return f"{type(err).__name__}: {text}"[:500]


def tell(queue: Queue, trial, record: Record, out: Path, *, files: bool = True) -> None:
    """Close a claimed trial from its record. The whole record travels in the storage too, so a coordinator on
    another machine can rebuild it; `files` False keeps its files out of the storage (`ablations.archive`: the
    archive carries them)."""
    from optuna.trial import TrialState

    try:
        shared = ledger.pack_shared(record, out) if files else None
        queue.keep_record(trial, ledger.pack(record, out, files=files), shared)
        if record.state == "complete":
            queue.complete(trial, record.metrics)
        else:
            queue.set_attr(trial, "reason", record.reason)
            queue.study.tell(trial.number, state=TrialState.FAIL)
    except Exception as err:  # told already by a worker that thought this one dead: the record decides
        if "finished" not in str(err).lower():
            raise


# -------------------------------------------------------------------------------------------------------- worker
def work(plan: Plan, *, poll_s: float = 2.0, max_trials: int | None = None, on_trial_end=None) -> dict[str, int]:
    """Claim and run trials until the study has none left (waiting for running ones that might be retried); under
    --rows (`plan.only`), only those rows' trials: another sweep's queued rows stay queued for it.
    Returns counts of trial outcomes run by this worker."""
    queue = Queue.open(plan.storage, plan.name)
    if not plan.fingerprints:  # a worker process: its corpora, as this machine prepares them
        corpora.prepare_rows(plan)
    corpora.check_storage(plan, queue)  # before any claim: a machine with other text trains nothing
    with interrupt.graceful():
        return _work(plan, queue, poll_s, max_trials, on_trial_end)


def _work(plan: Plan, queue: Queue, poll_s: float, max_trials: int | None, on_trial_end) -> dict[str, int]:
    counts: dict[str, int] = {}
    done = 0
    while max_trials is None or done < max_trials:
        if interrupt.requested():  # Ctrl-C between two trials
            raise interrupt.Interrupted()
        if plan.timed_out():
            break
        recover_dead(queue)
        trial = queue.claim(plan.only)
        if trial is None:
            live = queue.trials("RUNNING", "WAITING")
            if not any(plan.only is None or t.user_attrs.get("row") in plan.only for t in live):
                # Nothing left: under the sequential design, look once more (a worker killed between its trial and
                # its look left that look to whoever comes next) before leaving.
                if plan.allocation is None or not look_and_enqueue(plan, queue):
                    break
                continue
            time.sleep(poll_s)
            continue
        state = run_one(plan, queue, trial)
        counts[state] = counts.get(state, 0) + 1
        done += 1
        if plan.allocation is not None:
            look_and_enqueue(plan, queue)
        if on_trial_end is not None:
            on_trial_end(queue)
    return counts


def look_and_enqueue(plan: Plan, queue: Queue) -> int:
    """The sequential design's look after a trial ends (`Plan.look`) and the trials it asks for queued (`enqueue`
    skips any key with a live trial: a look taken twice, by two workers or again after a kill, queues nothing
    twice). Returns how many were newly queued; a look that prints is one that queued something."""
    before = plan.decision
    decision = plan.look(queue)
    queued = enqueue(plan, queue)
    if queued or (before is not None and before.states != decision.states):
        print(f"[sweep] look {decision.looks}: {describe_decision(decision)}; {queued} trial(s) queued",
              file=sys.stderr, flush=True)  # fmt: skip
    return queued


def describe_decision(decision: Decision) -> str:
    """Rows by where they stand after the last look, in one line: 'decided B1, C4; open C1; out of reach -'."""
    by = {k: [row for row, s in decision.states.items() if s == k] for k in ("decided", "open", "out_of_reach")}
    waiting = [row for row in decision.seeds if row not in decision.states and row not in decision.controls]
    text = "; ".join(f"{k.replace('_', ' ')} {', '.join(v) or '-'}" for k, v in by.items())
    if len(waiting) > 6:  # before the first look, every row: a count says it
        return f"{len(waiting)} rows not looked at yet"
    return text + (f"; not looked at yet {', '.join(waiting)}" if waiting else "")


def current_keys(plan: Plan, trials) -> list[tuple[str, int]]:
    """The (row, seed) trials this sweep runs, for progress: the plan's, and under the sequential design every trial
    a worker's look has queued since (the queue grows while rows stay open)."""
    keys = [(row.name, seed) for row, seed in plan.keys()]
    if plan.allocation is None:
        return keys
    seen = set(keys)
    for trial in trials:
        key = ledger.trial_key(trial)
        if key is not None and key not in seen and (plan.only is None or key[0] in plan.only):
            if not ledger.superseded(trial):
                keys.append(key)
                seen.add(key)
    return keys


def sync_records(plan: Plan, queue: Queue) -> int:
    """Write every finished trial's record that is missing from OUT (run by a worker on another machine) from the
    copy in the storage, and study.json. Returns how many records were written."""
    ledger.write_json_atomic(Layout(plan.out).study_file, plan.describe())
    ledger.unpack_shared(queue.shared_files(), plan.out)
    packed = (ledger.stored_copy(t) for t in queue.trials() if ledger.trial_key(t) is not None)
    return sum(ledger.unpack(record, plan.out) for record in packed if record)
