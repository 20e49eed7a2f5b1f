"""Running a sweep on this machine: data prepared once, rows queued, worker processes, the live view, the report.

`ablate sweep` parses its arguments into a `Plan` (commands/sweep.py) and calls `coordinate`; a worker process
(`--worker`) calls `sweep.work`; a rank that Lightning relaunched for plain DDP calls `ddp_rank`.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from ablations import interrupt, ledger, progress
from ablations.storage import ENV_VAR, Queue, recover_dead, redact
from ablations.sweep import Plan, TrialSpec, enqueue, slurm_incarnation, sync_records, work
from data.errors import AblateError


def start(plan: Plan) -> tuple[Queue, int]:
    """Prepare data once and queue the rows that have no live trial: what every launcher does first. Returns the
    queue and how many trials were newly queued."""
    created = not plan.out.exists()
    plan.out.mkdir(parents=True, exist_ok=True)
    try:
        prepare_data(plan)
    except AblateError:  # bad data: leave no empty output directory behind
        if created:
            shutil.rmtree(plan.out, ignore_errors=True)
        raise
    queue = Queue.open(plan.storage, plan.name)
    recover_dead(queue)
    queued = enqueue(plan, queue)
    sync_records(plan, queue)
    return queue, queued


def coordinate(plan: Plan, workers: int | None) -> None:
    """Prepare data once, queue the rows, run the workers, show progress and the final table. (The report is the
    command's: reports build on ablations, not the other way round.)

    The live table needs the trials in worker processes, whose lines go to their logs: so on a terminal even one
    worker is a child process. Elsewhere (CI logs, pipes) one worker trains here and its lines are the log, with
    a summary line after each trial."""
    queue, queued = start(plan)
    keys = [(row.name, seed) for row, seed in plan.keys()]
    workers = workers or default_workers(plan)
    eta = progress.Eta.for_plan(plan)
    storage = redact(plan.storage)
    rows = len(plan.study.rows) if plan.only is None else f"{len(plan.only)} of {len(plan.study.rows)}"
    print(
        f"sweep {plan.study.name} at preset {plan.preset}: {rows} rows x {len(plan.seeds)} seeds = "
        f"{len(keys)} trials ({queued} newly queued), {workers} worker(s) here\n"
        f"  {progress.cost_line(plan, eta.work, workers, None if _gpus() else _cpu_cores(), done=_recorded(plan))}\n"
        f"  storage {storage}\n"
        f"  output  {plan.out}",
        file=sys.stderr,
    )
    title = f"{plan.study.name} ({plan.preset})"

    def show(queue_now: Queue) -> None:
        rows = progress.collect(queue_now.trials(), keys)
        print(f"[sweep] {progress.summary_line(rows, workers, eta)}", file=sys.stderr, flush=True)

    try:
        if workers > 1 or sys.stderr.isatty():
            run_workers(plan, queue, workers, keys, title, eta)
        work(plan, on_trial_end=show)  # after worker processes: anything a crashed one left behind
    except interrupt.Interrupted as err:
        raise interrupt.Interrupted(err.step, err.checkpoint, saved=saved_summary(plan, keys)) from None
    synced = sync_records(plan, queue)
    print_table(progress.render(progress.collect(queue.trials(), keys), workers, title, eta))
    if synced:
        print(f"{synced} record(s) from other machines written to {plan.out / 'records'}", file=sys.stderr)


def _recorded(plan: Plan) -> int:
    """The plan's trials that already have a record (a resumed sweep)."""
    return sum(ledger.record_path(plan.out, row.name, seed).exists() for row, seed in plan.keys())


def saved_summary(plan: Plan, keys: list[tuple[str, int]]) -> str:
    """What an interrupted sweep leaves: finished trials (records) and running ones (checkpoints to resume from)."""
    from ablations import ledger

    done = sum(ledger.record_path(plan.out, row, seed).is_file() for row, seed in keys)
    started = [
        key for key in keys
        if not ledger.record_path(plan.out, *key).is_file()
        and (plan.out / "trials" / ledger.key_of(*key) / "checkpoints" / "last.ckpt").is_file()
    ]  # fmt: skip
    text = f"{done} of {len(keys)} trials finished (records in {plan.out / 'records'})"
    if started:
        text += f"; {len(started)} unfinished trial(s) resume from their checkpoints in {plan.out / 'trials'}"
    return text


def work_here(plan: Plan) -> int:
    """A worker process (started by `run_workers`, or a SLURM job's task): share the cores, claim and run trials
    until none are left. In a SLURM job of several tasks, task 0 claims the trials and the others follow it as the
    DDP ranks of each trial (`follow`)."""
    set_threads(int(os.environ.get("ABLATE_WORKERS", "1")))
    if os.environ.get("SLURM_JOB_ID"):  # SLURM warns with USR2 before preemption or the time limit (slurm.py)
        interrupt.on_signal(signal.SIGUSR2, "SLURM's warning signal (preemption or time limit)")
    # SIGTERM (scancel, a coordinator stopping, a shutdown) stops the trial as a Ctrl-C does: what fails after it
    # (W&B's service gets it too) is the stop, not the trial's fault. Lightning's own SIGTERM handler calls this one.
    interrupt.on_signal(signal.SIGTERM, "SIGTERM (scancel, or the machine shutting down)")
    tasks, rank = int(os.environ.get("SLURM_NTASKS", "1")), int(os.environ.get("SLURM_PROCID", "0"))
    if tasks > 1 and rank > 0:
        return follow(plan)
    try:
        work(plan)
    finally:
        if tasks > 1:  # the followers stop when this appears
            from ablations.ledger import write_text_atomic

            write_text_atomic(_done_file(plan), str(time.time()))
    return 0


def _done_file(plan: Plan) -> Path:
    return plan.out / "slurm" / f"{slurm_incarnation()}.done"


def follow(plan: Plan, poll_s: float = 0.5) -> int:
    """A SLURM task other than 0: train, as a follower rank, each trial task 0 of this job starts (its
    TRIAL_DIR/trial.json names the job), until task 0 says it is done."""
    from ablations.config import build_run_config
    from ablations.train import train

    job, seen = slurm_incarnation(), set()
    while True:
        spec = TrialSpec.find_for_job(plan.out, job, seen)
        if spec is not None:
            seen.add((spec.trial_dir, spec.started_at))
            try:
                train(build_run_config(spec.run), Path(spec.trial_dir), name=spec.name, group=spec.group,
                      wandb_id=spec.wandb_id)  # fmt: skip
            except Exception as err:  # noqa: BLE001 - task 0 records the failure; this rank must stay for the next
                print(f"follower rank: trial {spec.name} failed ({type(err).__name__}); waiting for the next",
                      file=sys.stderr, flush=True)  # fmt: skip
            continue
        if _done_file(plan).is_file():
            return 0
        time.sleep(poll_s)


def prepare_data(plan: Plan) -> None:
    """Build the corpus, tokenizer and encoded caches once, before any worker starts (workers then only read)."""
    from ablations.ledger import write_text_atomic
    from data.prepare import prepare

    seen = set()
    for row in plan.study.rows:
        data_cfg = plan.run_config(row, 0).data
        if data_cfg in seen:
            continue
        seen.add(data_cfg)
        corpus = prepare(data_cfg, progress=True)
        refs = plan.out / "refs" / "valid.txt"
        if not refs.exists():
            write_text_atomic(refs, "\n".join(corpus.references("valid")) + "\n")


def default_workers(plan: Plan) -> int:
    """One worker per GPU; on a CPU, one single-thread worker per core. Measured on the 2-core machine (tiny
    preset): two 1-thread workers train 42k tokens/s together, one 2-thread process 30k."""
    run = plan.run_config(plan.study.rows[0], 0)
    gpus = _gpus()
    if gpus:
        return gpus if gpus > 1 and run.hardware.devices in (1, "1") else 1
    single_process = run.hardware.devices in (1, "1", "auto") and run.hardware.num_nodes == 1
    return max(1, min(_cpu_cores(), len(plan.keys()))) if single_process else 1


def _gpus() -> int:
    import torch

    return torch.cuda.device_count()


def _cpu_cores() -> int:
    """The CPU cores this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def set_threads(workers: int) -> None:
    """Share the CPU cores between local workers (each trial otherwise starts one thread per core)."""
    if workers <= 1:
        return
    import torch

    torch.set_num_threads(max(1, (os.cpu_count() or 1) // workers))


def run_workers(plan: Plan, queue: Queue, n: int, keys, title: str, eta: progress.Eta | None = None) -> None:
    """Start n worker processes (one GPU each when there are GPUs) and show the live table until they finish; `eta`
    learns each row's cost per step from what the table shows.

    Workers run in their own sessions, so a terminal's Ctrl-C reaches only this process, which passes it on once
    (a second one, again): each worker saves its running trial and stops. A worker that stops on a full disk
    (exit 2) stops the others the same way, and its one-line message becomes this command's."""
    import torch

    logs = plan.out / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    gpus = torch.cuda.device_count()
    procs = []
    for i in range(n):
        # The storage travels in the environment, not on a command line that `ps` shows (it may hold a password).
        env = {**os.environ, "ABLATE_WORKERS": str(n), "PYTHONUNBUFFERED": "1", ENV_VAR: plan.storage}
        if gpus > 1 and n > 1:  # one GPU each; a lone worker (the live view's) keeps them all for its DDP trials
            env["CUDA_VISIBLE_DEVICES"] = str(i % gpus)
        cmd = [sys.executable, "-m", "ablations.cli", "sweep", *worker_argv(plan), "--worker"]
        with open(logs / f"worker-{i}.log", "ab") as log:
            procs.append(subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True))
    print(f"  {n} worker process(es) started; their lines go to {logs}/worker-*.log", file=sys.stderr)
    eta = eta or progress.Eta()
    live = live_view(title, transient=True)  # the command prints the final table
    stopping = False
    try:
        with interrupt.graceful(on_second=lambda: _signal(procs, signal.SIGINT)):
            while any(p.poll() is None for p in procs):
                if not stopping and (interrupt.requested() or any(p.returncode == 2 for p in procs)):
                    stopping = True
                    _signal(procs, signal.SIGINT)
                recover_dead(queue)
                rows = progress.collect(queue.trials(), keys)
                eta.observe(rows)
                live(progress.render(rows, n, title, eta), progress.summary_line(rows, n, eta))
                time.sleep(0.5 if stopping else 3)
    finally:
        live(None, None)
        for p in procs:
            if p.poll() is None:
                p.terminate()
    _outcome(procs, logs)


def worker_argv(plan: Plan, **sections: dict[str, Any]) -> list[str]:
    """A worker's `ablate sweep` arguments, written from the plan rather than copied from the command line, whose
    options are the coordinator's (launcher, --storage with its password, relative paths). `sections` adds
    settings (a SLURM job's DDP shape)."""
    args = [str(Path(plan.study.source).resolve()), "--preset", plan.preset, "--seeds", str(len(plan.seeds)),
            "--out", str(plan.out.resolve()), "--name", plan.name, "--no_report"]  # fmt: skip
    if plan.retry_failed:
        args.append("--retry_failed")
    if plan.only is not None:
        args += ["--rows", ",".join(plan.only)]
    for section in {**plan.extra, **sections}:
        for field, value in {**plan.extra.get(section, {}), **sections.get(section, {})}.items():
            args += ["--set", f"{section}.{field}={json.dumps(value)}"]  # JSON is YAML, which --set reads
    return args


def _signal(procs: list[subprocess.Popen], sig: int) -> None:
    for p in procs:
        if p.poll() is None:
            p.send_signal(sig)


def _outcome(procs: list[subprocess.Popen], logs: Path) -> None:
    """A worker's full disk (exit 2) or Ctrl-C (130) becomes this command's; a crash is left to the liveness check
    (its trial is retried by the work that follows)."""
    codes = [p.returncode for p in procs]
    if 2 in codes:
        log = logs / f"worker-{codes.index(2)}.log"
        last = _last_line(log)
        raise AblateError(last.split(": error: ", 1)[-1] if last else f"a worker stopped with exit 2; see {log}")
    if 130 in codes or interrupt.requested():
        raise interrupt.Interrupted()


def _last_line(path: Path) -> str:
    try:
        lines = [line for line in path.read_text(encoding="utf-8", errors="replace").splitlines() if line.strip()]
    except OSError:
        return ""
    return lines[-1].strip() if lines else ""


def live_view(title: str, every_s: float = 60.0, transient: bool = False):
    """A refreshing rich table on a terminal (`transient`: gone when it stops); otherwise (CI logs, files) a summary
    line whenever a trial changes state, and at most every `every_s` seconds while only the ETA moves."""
    if sys.stderr.isatty():
        from rich.console import Console
        from rich.live import Live

        live = Live(console=Console(stderr=True), refresh_per_second=1, transient=transient)
        live.start()

        def update(table, line):
            if table is None:
                live.stop()
            else:
                live.update(table)

        return update
    last = {"line": "", "states": "", "at": 0.0}

    def update_plain(table, line):
        if not line or line == last["line"]:
            return
        states = re.sub(r"ETA [^,;]*", "ETA", line)  # the line without the ETA's value
        if states == last["states"] and time.monotonic() - last["at"] < every_s:
            return
        last.update(line=line, states=states, at=time.monotonic())
        print(f"[sweep] {line}", file=sys.stderr, flush=True)

    return update_plain


def print_table(table) -> None:
    from rich.console import Console

    Console(stderr=True, width=140).print(table)


def print_next_steps(plan: Plan, seconds: float) -> None:
    runs = f"{plan.out}/trials/*/wandb/offline-run-*"
    if (plan.out / "wandb").is_dir():  # the report's run
        runs += f" {plan.out}/wandb/offline-run-*"
    dashboard = redact(plan.storage.removeprefix("journal:"))
    print(
        f"sweep finished in {seconds / 60:.1f} min. Next:\n"
        f"  ablate report {plan.out}                       # rebuild the table (md, tex, csv, json, html)\n"
        f"  wandb sync {runs}    # upload the offline W&B runs\n"
        f"  optuna-dashboard {dashboard}  # browse the study",
        file=sys.stderr,
    )


def ddp_rank(out: Path) -> int | None:
    """If this process is a rank that Lightning relaunched for plain DDP (a child of rank 0, LOCAL_RANK > 0), train
    the trial rank 0 is running (TRIAL_DIR/trial.json) and return 0; else None."""
    if os.environ.get("LOCAL_RANK", "0") == "0":
        return None
    spec = TrialSpec.find_for_parent(out)
    if spec is None:
        return None
    from ablations.config import build_run_config
    from ablations.train import train

    run = build_run_config(spec.run)
    train(run, Path(spec.trial_dir), name=spec.name, group=spec.group, wandb_id=spec.wandb_id)
    return 0
