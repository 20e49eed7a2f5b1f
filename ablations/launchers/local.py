"""`ablate sweep --launcher local` (the default): worker processes on this machine, the live table, the final one.

Data is prepared and the rows queued once (`runner.start`); then `--workers` worker processes (default: one per
GPU, else one per CPU core) claim trials from the storage, each with its own log, while this process shows the live
table. Ctrl-C is passed on to the workers once: each saves its running trial and stops. The command returns when
every trial has ended, with the report and the next steps.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from ablate.ablations.launchers import Launch
from ablate.ablations.results import Machine, differs, ledger, machines_of
from ablate.ablations.results.record import Layout
from ablate.ablations.results.storage.queue import Queue, recover_dead
from ablate.ablations.runtime import environment, interrupt, mps, stopping
from ablate.ablations.runtime.urls import ENV_VAR, redact
from ablate.ablations.statistics.sequential import seed_range
from ablate.ablations.study.config import HardwareConfig
from ablate.ablations.study.definition import coverage_summary
from ablate.ablations.sweep import progress, runner
from ablate.ablations.sweep.plan import Plan
from ablate.ablations.sweep.queueing import current_keys, describe_decision, sync_records
from ablate.ablations.sweep.worker import work
from ablate.data.errors import AblateError


class LocalLauncher:
    name = "local"
    help = "worker processes on this machine (the command returns when every trial has ended)"
    settings = None

    def launch(self, plan: Plan, launch: Launch) -> int:
        if launch.wait:
            raise AblateError("--wait goes with a launcher that submits jobs (--launcher slurm)")
        _check_hardware(plan)
        for line in filter(None, (oversubscribed(launch.workers), resumed_elsewhere(plan))):
            print(f"ablate sweep: warning: {line}", file=sys.stderr)
        if launch.dry_run:
            print(describe_plan(plan, launch.workers or default_workers(plan)))
            return 0
        started = time.time()
        trained = coordinate(plan, launch.workers)
        failure = runner.no_success(plan)
        if failure is not None:
            print(f"ablate sweep: {failure}", file=sys.stderr)
            return 1
        if trained or not _report_current(plan):
            launch.finish()
        else:
            print(f"nothing left to train; the report in {plan.out / 'report'} is up to date", file=sys.stderr)
        runner.print_next_steps(plan, time.time() - started)
        return 0


LAUNCHER = LocalLauncher()


def _check_hardware(plan: Plan) -> None:
    """The trials run here: hardware settings this machine cannot run (--hardware.accelerator gpu on a CPU, devices
    0) are refused before any starts, as `ablate train` refuses them, instead of failing every trial. Only settings
    other than the defaults are asked about (Lightning's import costs seconds)."""
    default = HardwareConfig()
    distinct = {}
    for row in plan.rows():
        hw = plan.run_config(row, 0).hardware
        plain = hw.accelerator in ("auto", "cpu") and str(hw.devices) in (str(default.devices), "auto")
        if not (plain and hw.num_nodes == default.num_nodes and hw.strategy == default.strategy):
            distinct.setdefault((hw.accelerator, str(hw.devices), hw.num_nodes, hw.strategy), plan.run_config(row, 0))
    if distinct:
        from ablate.ablations.training.trainer import check_hardware  # lazy: loads torch and Lightning (seconds)

        for run in distinct.values():
            check_hardware(run)


def describe_plan(plan: Plan, workers: int) -> str:
    """What `ablate sweep --dry_run` prints and nothing is written for: each row with its seeds (at the sequential
    design, the first look's and the most the looks can ask), parameters and the settings it changes from the base,
    the claims the rows test, and the cost line the sweep would print first."""
    rows = [row for row in plan.rows() if plan.only is None or row.name in plan.only]
    work = progress.Eta.for_plan(plan).work
    if plan.allocation is not None:
        low, high = seed_range(plan.judged(), plan.controls(), min_seeds=plan.allocation.min_seeds,
                               max_seeds=plan.allocation.max_seeds)  # fmt: skip
        seeds = {name: f"{low[name]}-{high[name]}" if high[name] != low[name] else str(low[name]) for name in low}
        design = f"sequential design, {plan.allocation.min_seeds} to {plan.allocation.max_seeds} seeds a row"
    else:
        seeds = {row.name: str(len(plan.seeds_of(row))) for row in rows}
        design = f"fixed design, {len(plan.seeds)} seed(s) a row"
    lines = [f"ablate sweep {plan.study.name} at preset {plan.preset}: {len(rows)} rows, {design} (dry run)",
             f"  {'row':<10} {'group':<6} {'seeds':>5} {'params':>8}  changes from the base"]  # fmt: skip
    names = [row.name for row in plan.study.rows]
    base = _flat(plan.run_config(plan.study.row("base") if "base" in names else rows[0], 0).to_dict())
    for row in rows:
        config = plan.run_config(row, plan.seeds[0])
        params = work[row.name].params  # built once on the meta device, for the cost line too
        flat = _flat(config.to_dict())  # at this preset's sizes, not the study file's paper units
        changes = ", ".join(f"{k}={v}" for k, v in flat.items() if base.get(k) != v and k != "train.seed") or "-"
        lines.append(f"  {row.name:<10} {row.group or '-':<6} {seeds[row.name]:>5} {params / 1e6:>7.2f}M  {changes}")
    tested = [c.id for c in plan.study.claims if any(cmp.row in {r.name for r in rows} for cmp in c.compare)]
    lines.append(f"  claims tested: {', '.join(tested) or 'none'}")
    cores = None if _gpus() else environment.cpu_cores()
    threads = threads_each(workers)
    lines.append(f"  workers: {workers} here, {threads} thread{'s' if threads != 1 else ''} each, on this machine's "
                 f"{environment.cpu_cores()} core(s)")  # fmt: skip
    lines.append(f"  {progress.cost_line(plan, work, workers, cores)}")
    lines.append(f"  nothing was written; run it without --dry_run (output: {plan.out})")
    return "\n".join(lines)


def _flat(config: dict) -> dict:
    """{section: {field: value}} as {'d_k': v} for the model's fields and {'train.max_steps': v} for the others."""
    return {(k if s == "model" else f"{s}.{k}"): v for s, values in config.items() for k, v in values.items()}


def _report_current(plan: Plan) -> bool:
    """Whether the sweep's report is newer than every record of it (a rerun of a finished sweep need not rebuild it)."""
    reports = list((plan.out / "report").glob("*.json"))
    records = list((plan.out / "records").glob("*.json"))  # an absent folder globs to nothing
    if not reports:
        return False
    return min(p.stat().st_mtime for p in reports) >= max((p.stat().st_mtime for p in records), default=0.0)


def coordinate(plan: Plan, workers: int | None) -> bool:
    """Prepare data once, queue the rows, run the workers, show progress and the final table. (The report is the
    command's: reports build on ablations, not the other way round.) Returns whether any trial was left to train:
    when none is (a finished sweep run again), no worker starts.

    The live table needs the trials in worker processes, whose lines go to their logs: so on a terminal even one
    worker is a child process. Elsewhere (CI logs, pipes) one worker trains here and its lines are the log, with
    a summary line after each trial."""
    queue, queued = runner.start(plan)
    keys = current_keys(plan, queue.trials())
    workers = workers or default_workers(plan)
    eta = progress.Eta.for_plan(plan)
    storage = redact(plan.storage)
    rows = len(plan.study.rows) if plan.only is None else f"{len(plan.only)} of {len(plan.study.rows)}"
    more = {name: len(seeds) for name, seeds in (plan.control_seeds or {}).items() if len(seeds) > len(plan.seeds)}
    control = f" ({', '.join(f'{n} {k}' for n, k in more.items())}: controls, in several comparisons)" if more else ""
    cores = None if _gpus() else environment.cpu_cores()
    cost = progress.cost_line(plan, eta.work, workers, cores, done=runner.recorded(plan))
    if plan.allocation is not None and plan.decision is not None:
        design = (
            f"sequential, {plan.allocation.min_seeds} to {plan.allocation.max_seeds} seeds a row; after "
            f"{plan.decision.looks} look(s): {describe_decision(plan.decision)}"
        )
        shape = f"{rows} rows, {design}: {len(keys)} trials so far"
    else:
        shape = f"{rows} rows x {len(plan.seeds)} seeds{control} = {len(keys)} trials"
    claims = coverage_summary(plan.study, plan.only) if plan.only is not None else None
    print(
        f"sweep {plan.study.name} at preset {plan.preset}: {shape} ({queued} newly queued), {workers} worker(s) here\n"
        + (f"  --rows {','.join(plan.only)} {claims}\n" if plan.only is not None and claims else "")
        + f"  {cost}\n"
        f"  storage {storage}\n"
        f"  output  {plan.out}",
        file=sys.stderr,
    )
    title = f"{plan.study.name} ({plan.preset})"

    def show(queue_now: Queue) -> None:
        trials = queue_now.trials()
        rows = progress.collect(trials, current_keys(plan, trials))
        print(f"[sweep] {progress.summary_line(rows, workers, eta)}", file=sys.stderr, flush=True)

    wanted = set(keys)
    left = [t for t in queue.trials("WAITING", "RUNNING") if ledger.trial_key(t) in wanted]
    if not left:
        print_table(progress.render(progress.collect(queue.trials(), keys), workers, title, eta))
        return False
    try:
        if workers > 1 or sys.stderr.isatty():
            run_workers(plan, queue, workers, title, eta)
        work(plan, on_trial_end=show)  # after worker processes: anything a crashed one left behind
    except interrupt.Interrupted as err:
        saved = runner.saved_summary(plan, current_keys(plan, queue.trials()))
        raise interrupt.Interrupted(err.step, err.checkpoint, saved=saved) from None
    synced = sync_records(plan, queue)
    trials = queue.trials()
    print_table(progress.render(progress.collect(trials, current_keys(plan, trials)), workers, title, eta))
    if synced:
        print(f"{synced} record(s) from other machines written to {plan.out / 'records'}", file=sys.stderr)
    return True


def default_workers(plan: Plan) -> int:
    """One worker per GPU; on a CPU, one single-thread worker per core: single-thread workers side by side train
    more tokens a second than one process on every core (measured at the tiny preset:
    docs/reference/code-figures.md, "ablations/launchers/local.py"). More workers than
    GPUs (`--workers N`) share the cards round-robin (`placement`): what small presets need to fill a GPU."""
    run = plan.run_config(plan.study.rows[0], 0)
    gpus = _gpus()
    if gpus:
        return gpus if gpus > 1 and run.hardware.devices in (1, "1") else 1
    single_process = run.hardware.devices in (1, "1", "auto") and run.hardware.num_nodes == 1
    return max(1, min(environment.cpu_cores(), len(plan.keys()))) if single_process else 1


def _gpus() -> int:
    import torch  # lazy: torch costs ~1 s; --help must not pay it

    return torch.cuda.device_count()


def threads_each(workers: int) -> int:
    """The threads each local worker trains with: its equal share of the cores (`placement`) where there are
    several, torch's own count (every core, or OMP_NUM_THREADS) for a lone one, which `worker.set_threads` leaves."""
    if workers > 1:
        return progress.threads_per_worker(environment.cpu_cores(), workers)
    import torch  # lazy: torch costs ~1 s; --help must not pay it

    return torch.get_num_threads()


def oversubscribed(workers: int | None) -> str | None:
    """One line where `--workers` (None: the default, one per core, which fits) or the threads each would run with
    ask for more threads than this machine's cores, with the count to use: threads that share a core run far slower
    (a smoke trial 20x and more, measured beside another process on 2 cores); None where they fit."""
    cores = environment.cpu_cores()
    if workers is None:  # the default: one per core, each on its share (`default_workers`)
        return None
    if workers > cores:
        return (
            f"--workers {workers} on this machine's {cores} core(s): {workers} trials' threads share {cores} cores "
            f"and run far slower than one per core; use --workers {cores}"
        )
    threads = threads_each(workers)
    if workers * threads > cores:
        return (
            f"{workers} worker(s) of {threads} threads on this machine's {cores} core(s) share them and run far "
            f"slower; set OMP_NUM_THREADS={max(1, cores // workers)}"
        )
    return None


def resumed_elsewhere(plan: Plan) -> str | None:
    """One line where the study's records in OUT ran on another torch version, kernel set (the CPU vector extension
    torch chose) or device type than this machine: its new trials will differ from them within seed noise, and the
    report's method note lists both. None for a new study, or records from a machine like this one."""
    records = ledger.read_records(plan.out) if Layout(plan.out).records_dir.is_dir() else []
    if not records:
        return None
    import torch  # lazy: torch costs ~1 s; --help must not pay it

    accelerator = plan.run_config(plan.study.rows[0], 0).hardware.accelerator
    cuda = bool(_gpus()) and accelerator != "cpu"
    here = Machine(device="", torch=torch.__version__, kernels=torch.backends.cpu.get_cpu_capability(),
                   device_type="cuda" if cuda else "cpu")  # fmt: skip
    said = differs(machines_of(records), here)
    if said is None:
        return None
    return (
        f"{len(records)} record(s) in {Layout(plan.out).records_dir} name {said}: the trials this sweep runs may "
        "differ from them within seed noise (the report's method note lists what each ran on)"
    )


COORDINATOR_GRACE_S = 15.0
"""How much longer than its workers' bound (hardware.stop_within_s) a coordinator asked to stop waits for them."""


def run_workers(plan: Plan, queue: Queue, n: int, title: str, eta: progress.Eta | None = None) -> None:
    """Start n worker processes (one GPU each when there are GPUs) and show the live table until they finish; `eta`
    learns each row's cost per step from what the table shows.

    Workers run in their own sessions, so a terminal's Ctrl-C reaches only this process, which passes it on once
    (a second one, again): each worker saves its running trial and stops. A SIGTERM to this process (`timeout`,
    `kill`) stops them the same way, before it exits. A worker that stops on a full disk
    (exit 2) stops the others the same way, and its one-line message becomes this command's."""
    logs = Layout(plan.out).logs_dir
    logs.mkdir(parents=True, exist_ok=True)
    gpus = visible_gpus()
    # Asked to stop, the coordinator waits for its workers' own bound, then 15 s more; past that they go with it.
    worker_bound = plan.run_config(plan.study.rows[0], 0).hardware.stop_within_s
    stopping.configure(bound_s=worker_bound + COORDINATOR_GRACE_S if worker_bound else 0)
    stopping.doing(f"waiting for {n} worker(s) to save their trials")
    with mps.for_workers(n, gpus) as shared:  # workers sharing a card run side by side on CUDA MPS
        procs = _start_workers(plan, n, logs, gpus, shared)
        print(f"  {n} worker process(es) started; their lines go to {logs}/worker-*.log", file=sys.stderr)
        _follow(plan, queue, procs, n, title, eta)
    _outcome(procs, logs)


def _follow(plan: Plan, queue: Queue, procs: list[subprocess.Popen], n: int, title: str, eta: progress.Eta | None):
    """Show the live table until every worker has ended; pass Ctrl-C and SIGTERM on to them."""
    eta = eta or progress.Eta()
    live = runner.live_view(title, transient=True)  # the command prints the final table
    stopping = False
    try:
        with (
            interrupt.graceful(on_second=lambda: _signal(procs, signal.SIGINT)),
            interrupt.signal_stops(signal.SIGTERM, "SIGTERM"),
        ):
            while any(p.poll() is None for p in procs):
                if not stopping and (interrupt.requested() or any(p.returncode == 2 for p in procs)):
                    stopping = True
                    _signal(procs, signal.SIGINT)
                recover_dead(queue)
                trials = queue.trials()
                rows = progress.collect(trials, current_keys(plan, trials))
                eta.observe(rows)
                live(progress.render(rows, n, title, eta), progress.summary_line(rows, n, eta))
                time.sleep(0.5 if stopping else 3)
    finally:
        live(None, None)
        for p in procs:
            if p.poll() is None:
                p.terminate()
        for p in procs:  # the MPS daemon (if any) stops only once its clients have
            with contextlib.suppress(subprocess.TimeoutExpired):
                p.wait(timeout=30)


def placement(workers: int, gpus: list[str], cores: int) -> list[dict[str, str]]:
    """Where each of `workers` local workers runs, as the environment it starts with: worker i sees one GPU,
    gpus[i % len(gpus)] (round-robin: with fewer GPUs than workers, several trials share a card, which small trials
    leave mostly idle), and every worker gets an equal share of the CPU cores as its threads (torch's and OpenMP's;
    `ablations.sweep.worker.set_threads` applies the same share in the worker). A lone worker keeps every GPU, for
    trials that span several (DDP). `gpus` are the names CUDA_VISIBLE_DEVICES takes: indices, or the UUIDs an outer
    CUDA_VISIBLE_DEVICES lists, so a sweep inside a job restricted to some GPUs stays on them.

    Lightning then trains on the one visible device (`hardware.devices` 1); nothing here schedules trials: each worker
    claims its next trial from the storage (Optuna's queue)."""
    threads = str(progress.threads_per_worker(cores, workers))
    out = []
    for i in range(workers):
        env = {"OMP_NUM_THREADS": threads}
        if gpus and workers > 1:
            env["CUDA_VISIBLE_DEVICES"] = gpus[i % len(gpus)]
        out.append(env)
    return out


def visible_gpus() -> list[str]:
    """The GPUs this process may use, as CUDA_VISIBLE_DEVICES names them (its own list where set, else indices)."""
    count = _gpus()
    outer = [g.strip() for g in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if g.strip()]
    return outer[:count] if len(outer) >= count else [str(i) for i in range(count)]


def _start_workers(plan: Plan, n: int, logs: Path, gpus: list[str], shared: dict[str, str]) -> list[subprocess.Popen]:
    """n `ablate sweep ... --worker` processes in sessions of their own, each writing to logs/worker-<i>.log, each
    on its GPU and its share of the cores (`placement`), with `shared` (the MPS daemon's pipe, when they share one)."""
    procs = []
    for i, place in enumerate(placement(n, gpus, environment.cpu_cores())):
        # The storage travels in the environment, not on a command line that `ps` shows (it may hold a password).
        env = environment.for_local_worker(n, **{ENV_VAR: plan.storage}, **place, **shared)
        cmd = [sys.executable, "-m", "ablate.ablations.cli", "sweep", *runner.worker_argv(plan), "--worker"]
        with open(logs / f"worker-{i}.log", "ab") as log:
            procs.append(subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True))
    return procs


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


def print_table(table) -> None:
    from rich.console import Console  # lazy: rich's console, only for a terminal view

    Console(stderr=True, width=140).print(table)
