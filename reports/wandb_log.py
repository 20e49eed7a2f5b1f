"""The report on Weights & Biases: the table as a `wandb.Table`, the plots as images, in one run per report, and a
saved workspace view that compares the rows.

The run goes to the study's project (study.json 'wandb_project') and the sweep's group (study + preset + the user's
`tracking.label`, as the trial runs: `ablations.tracking.run_group`), job_type 'report'. It is offline unless the
environment says otherwise (WANDB_MODE, or WANDB_API_KEY for online); WANDB_MODE=disabled gives a no-op run.

The workspace view (`build_view`, with the `wandb-workspaces` package: `pip install -e '.[workspace]'`) shows the
report table, the curves grouped by row and parallel coordinates over the knobs. Saving a view needs W&B online and
adds a view at each save, so the report does not save it: it writes OUT/wandb/workspace_view.py, which saves it once
when run (after `wandb sync` for offline runs), and says so in one line.

`read_offline_run` reads an offline run back from its `.wandb` file (the transaction log that `wandb sync`
uploads), for tests and for checking what a sweep logged without a server.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import struct
import sys
from pathlib import Path
from typing import Any

from ablate.ablations.results import read_study_json
from ablate.ablations.tracking import run_group
from ablate.data.atomic import write_text_atomic
from ablate.data.errors import AblateError
from ablate.reports.plots import Plot
from ablate.reports.table import ReportTable
from ablate.reports.values import claims_data, table_records

TABLE_KEY = "report/table3"
"""History key of the report table."""
CLAIMS_KEY = "report/claims"
"""History key of the claims table (one line per comparison, with its verdict)."""
STEP_KEY = "trainer/global_step"
"""The x axis of the trial runs' metrics: the optimizer steps done, as the records count them."""
VIEW_SCRIPT = "workspace_view.py"
"""The script that saves the workspace view, in OUT/wandb/ beside the report run."""
CURVES = (("val/bleu", "dev BLEU", False), ("val/ppl", "dev PPL", True), ("train/loss", "training loss", False),
          ("train/lr", "learning rate", False))  # fmt: skip
"""The line plots of the view: metric, title, log-scaled y."""


def _mode() -> str | None:
    """WANDB_MODE if set, else online (None: wandb decides) with WANDB_API_KEY, else 'offline'.

    Read here at each call, not left to wandb: wandb reads the environment once per process, and a sweep that
    calls `build_report` at its end may have set up wandb long before.
    """
    if os.environ.get("WANDB_MODE"):
        return os.environ["WANDB_MODE"]
    return None if os.environ.get("WANDB_API_KEY") else "offline"


def sweep_tracking(meta: dict[str, Any]) -> dict[str, Any]:
    """The tracking settings (label, entity) the sweep's trials ran with, from study.json: its first row's resolved
    config (command-line settings such as `--tracking.label` apply to every row). Empty for a study.json without
    configs."""
    rows = meta.get("rows") or [{}]
    return dict(((rows[0].get("config") or {}).get("tracking")) or {})


def log_report(table: ReportTable, plots: list[Plot], *, project: str, wandb_dir: Path) -> Path | None:
    """Log the table and the plots to a new W&B run in the sweep's group, and write the workspace view's script
    beside it; the run's local directory, or None when W&B is disabled."""
    import wandb  # lazy: W&B costs ~0.4 s, only when logging

    meta = read_study_json(Path(table.out_dir))
    tracking = sweep_tracking(meta)
    label, entity = tracking.get("label"), tracking.get("entity")
    group = run_group(table.study, table.preset, label)
    wandb_dir.mkdir(parents=True, exist_ok=True)
    run_id = report_run_id(group)
    for earlier in (wandb_dir / "wandb").glob(f"offline-run-*-{run_id}"):  # the report of this study, made before
        shutil.rmtree(earlier, ignore_errors=True)
    run = wandb.init(
        project=project,
        entity=entity,
        group=group,
        job_type="report",
        name=f"report-{group}",
        id=run_id,  # one report run per study: a report made again updates it (online) or replaces it (offline)
        resume="allow",
        dir=str(wandb_dir),
        mode=_mode(),  # pyright: ignore[reportArgumentType]  # WANDB_MODE as the user set it: wandb checks it
        reinit="create_new",
        config={
            "study": table.study,
            "preset": table.preset,
            "label": label,
            "seeds": table.seeds,
            "results": table.out_dir,
        },
        settings=wandb.Settings(silent=True, save_code=False, disable_git=True, x_disable_stats=True),
    )
    try:
        if getattr(run, "disabled", False):
            return None
        records, claims = table_records(table), claims_data(table)
        run.log(_logged(records, claims, plots))
        _summarise(run, records, table)
        run_dir = Path(run.dir).parent
        definition = view_definition(meta, project=project, group=group, entity=entity, claims=bool(claims))
        script = write_view_script(run_dir.parent / VIEW_SCRIPT, definition)
        print(_view_line(script, Path(table.out_dir), offline=run.offline), file=sys.stderr, flush=True)
        return run_dir
    finally:
        run.finish()


def _logged(records: list[dict[str, Any]], claims: list[dict[str, Any]], plots: list[Plot]) -> dict[str, Any]:
    """What the report run logs: the table, the claims' table (if any) and the plots."""
    import wandb  # lazy: W&B costs ~0.4 s, only when logging

    columns = list(records[0]) if records else ["row"]
    data = [[_cell(rec[c]) for c in columns] for rec in records]
    logged: dict[str, Any] = {TABLE_KEY: wandb.Table(columns=[*columns], data=[*data])}
    if claims:
        claim_columns = list(claims[0])
        logged[CLAIMS_KEY] = wandb.Table(
            columns=[*claim_columns], data=[[_cell(c[k]) for k in claim_columns] for c in claims]
        )
    for plot in plots:
        logged[f"report/{plot.name}"] = wandb.Image(str(plot.png), caption=plot.title)
    return logged


def _summarise(run, records: list[dict[str, Any]], table: ReportTable) -> None:
    """The run's summary: each row's BLEU and chrF, each claim's verdict, the precision at each budget."""
    for rec in records:
        if rec["bleu_mean"] is not None:
            run.summary[f"bleu/{rec['row']}"] = rec["bleu_mean"]
        if rec["chrf_mean"] is not None:
            run.summary[f"chrf/{rec['row']}"] = rec["chrf_mean"]
    for cv in table.claims:  # the verdicts, readable on the run's overview page
        run.summary[f"claims/{cv.claim.id}"] = cv.verdict
    for fraction, width in table.precision.items():  # the study's precision at each budget, to quote
        run.summary[f"ci_half_width_bleu/at{fraction:g}"] = width


def report_run_id(group: str) -> str:
    """The W&B run id of a study's report: the same every time it is made, in the characters W&B allows."""
    return "report-" + re.sub(r"[^A-Za-z0-9_-]", "_", group)[:100]


def _view_line(script: Path, out_dir: Path, *, offline: bool) -> str:
    """The one line that says how to save the workspace view."""
    need = "" if importlib.util.find_spec("wandb_workspaces") else " (needs `pip install -e '.[workspace]'`)"
    runs = f"{out_dir}/trials/*/wandb/offline-run-* {out_dir}/wandb/offline-run-*"
    sync = f"`wandb sync {runs}`, then " if offline else ""
    return f"W&B workspace view (table, curves by row, knobs): {sync}`python {script}` saves it{need}"


# --- the workspace view -------------------------------------------------------------------------------------------
def knob_keys(meta: dict[str, Any]) -> list[str]:
    """The config keys ('section.field') on which the study's rows differ, in config order: the knobs of its table
    (for Table 3: N, d_model, d_ff, h, d_k, d_v, P_drop, eps_ls, positions, steps). Read from study.json's resolved
    configs, so d_k and d_v are the values the rows trained with. Tracking settings are not knobs."""
    configs = [row["config"] for row in meta.get("rows") or [] if row.get("config")]
    keys: list[str] = []
    for section, fields in (configs[0] if configs else {}).items():
        if section == "tracking" or not isinstance(fields, dict):
            continue
        for name in fields:
            values = [json.dumps((c.get(section) or {}).get(name), sort_keys=True) for c in configs]
            if len(set(values)) > 1:
                keys.append(f"{section}.{name}")
    return keys


def view_definition(
    meta: dict[str, Any], *, project: str, group: str, entity: str | None = None, claims: bool = False
) -> dict[str, Any]:
    """What the workspace view of a sweep needs, as plain data (written into its script): where the runs are, their
    group, the knobs and whether a claims table was logged."""
    return {
        "entity": entity,
        "project": project,
        "group": group,
        "knobs": knob_keys(meta),
        "claims": claims,
    }


def _workspaces():
    """The `wandb_workspaces` modules (the `workspace` extra), or a one-line error saying how to install them."""
    try:
        import wandb_workspaces.reports.v2 as wr  # the optional [workspace] extra
        import wandb_workspaces.workspaces as ws  # the optional [workspace] extra
    except ImportError:
        raise AblateError(
            "the W&B workspace view needs the wandb-workspaces package: pip install -e '.[workspace]'"
        ) from None
    return wr, ws


def _column(key: str) -> str:
    """A config key as a runs-table column: 'model.n_heads' -> 'config:model.value.n_heads' (W&B stores each
    top-level config key as {'value': ...}; wandb_workspaces spells panel accessors the same way)."""
    head, _, rest = key.partition(".")
    return f"config:{head}.value" + (f".{rest}" if rest else "")


def build_view(definition: dict[str, Any], entity: str | None = None):
    """The workspace view (a `wandb_workspaces.workspaces.Workspace`) of a sweep's runs, built offline: the runs of
    its group, grouped by row, in a runs table with row, seed and the knobs beside final BLEU and PPL; a section
    with the report's table (and claims); the dev and training curves over the optimizer steps, grouped by row
    (mean over seeds, min-max band); parallel coordinates over the knobs, ending in final PPL and BLEU."""
    wr, ws = _workspaces()
    entity = entity or definition.get("entity")
    if not entity:
        raise AblateError("the W&B workspace view needs an entity: set tracking.entity, or log in (wandb login)")
    knobs = list(definition["knobs"])
    tables = [wr.WeavePanelSummaryTable(table_name=TABLE_KEY, layout=wr.Layout(w=24, h=12))]
    if definition.get("claims"):
        tables.append(wr.WeavePanelSummaryTable(table_name=CLAIMS_KEY, layout=wr.Layout(w=24, h=10)))
    curves = [
        wr.LinePlot(
            title=title,
            x=STEP_KEY,
            y=[metric],
            log_y=log_y or None,
            groupby=wr.Config("row"),
            groupby_aggfunc="mean",
            groupby_rangefunc="minmax",
        )  # fmt: skip
        for metric, title, log_y in CURVES
    ]
    columns = [wr.ParallelCoordinatesPlotColumn(metric=wr.Config(k), display_name=k) for k in knobs]
    columns += [
        wr.ParallelCoordinatesPlotColumn(metric=wr.SummaryMetric("final/ppl"), display_name="dev PPL", log=True),
        wr.ParallelCoordinatesPlotColumn(metric=wr.SummaryMetric("final/bleu"), display_name="dev BLEU"),
    ]
    knobs_plot = wr.ParallelCoordinatesPlot(title="knobs -> dev PPL, dev BLEU", columns=columns,
                                            layout=wr.Layout(w=24, h=10))  # fmt: skip
    step_axis = ws.SectionPanelSettings(x_axis=STEP_KEY)
    return ws.Workspace(
        entity=entity,
        project=definition["project"],
        name=f"ablate {definition['group']}",
        sections=[
            ws.Section(name="Table", panels=tables, is_open=True),
            ws.Section(name="Curves by row", panels=curves, is_open=True, panel_settings=step_axis),
            ws.Section(name="Knobs", panels=[knobs_plot], is_open=True),
        ],
        settings=ws.WorkspaceSettings(x_axis=STEP_KEY),
        runset_settings=ws.RunsetSettings(
            filters=[ws.Metric("Group") == definition["group"]],
            groupby=[ws.Config("row")],
            order=[ws.Ordering(ws.Metric("CreatedTimestamp"), ascending=True)],  # queue order: the table's
            pinned_columns=[
                "run:displayName",
                *(_column(k) for k in ("row", "seed", "row_group", *knobs)),
                "summary:final/bleu",
                "summary:final/ppl",
            ],
        ),
    )


def save_view(definition: dict[str, Any]) -> str:
    """Save the workspace view to W&B (online, logged in) as a new view; its URL."""
    import wandb  # lazy: W&B costs ~0.4 s, only when logging
    from wandb.errors import UsageError  # lazy: W&B costs ~0.4 s, only when logging

    _workspaces()  # the install hint first
    try:
        api = wandb.Api()
    except UsageError as err:
        raise AblateError(f"saving the W&B workspace view needs a W&B login: {err}") from None
    view = build_view(definition, entity=definition.get("entity") or api.default_entity)
    return view.save().url


def save_view_main(definition: dict[str, Any]) -> int:
    """What the written script runs: save the view and print its URL; bad setup is one line and exit code 2."""
    try:
        print(save_view(definition))
    except AblateError as err:
        print(f"W&B workspace view: error: {err}", file=sys.stderr)
        return 2
    return 0


def write_view_script(path: Path, definition: dict[str, Any]) -> Path:
    """Write the script that saves the workspace view (its definition inline, so it can be read and edited)."""
    text = (
        f'"""Saves the W&B workspace view of the runs in group {definition["group"]!r} (project '
        f"{definition['project']!r}): the report's table, the\n"
        "curves grouped by row, parallel coordinates over the knobs. Written by `ablate report --wandb`; run it once\n"
        "the runs are on W&B (offline runs: `wandb sync` them first), with `pip install -e '.[workspace]'`:\n\n"
        f"    python {path}\n\n"
        "Each run saves one more view. Set 'entity' below to save into another entity than your default.\n"
        '"""\n\n'
        "from ablate.reports.wandb_log import save_view_main\n\n"
        "DEFINITION = {\n" + "".join(f"    {key!r}: {value!r},\n" for key, value in definition.items()) + "}\n\n"
        'if __name__ == "__main__":\n'
        "    raise SystemExit(save_view_main(DEFINITION))\n"
    )
    write_text_atomic(path, text)
    return path


def _cell(value: Any) -> Any:
    """Table cells as W&B types them: numbers stay numbers, missing values become None, the rest strings."""
    if value is None or isinstance(value, (int, float, str, bool)):
        return value
    return str(value)


# --- reading an offline run back ----------------------------------------------------------------------------------

_BLOCK = 32768
_HEADER = struct.Struct("<4sHB")  # ':W&B', magic 0xBEE1, version
_RECORD = struct.Struct("<IHB")  # crc32, length, type (1 full, 2 first, 3 middle, 4 last)


def _payloads(path: Path):
    """The protobuf payloads of a `.wandb` file (a LevelDB-style log of 32 KiB blocks)."""
    data = path.read_bytes()
    ident, magic, _ = _HEADER.unpack_from(data, 0)
    if ident != b":W&B" or magic != 0xBEE1:
        raise ValueError(f"{path} is not a W&B transaction log")
    pos, pending = _HEADER.size, b""
    while pos + _RECORD.size <= len(data):
        left_in_block = _BLOCK - pos % _BLOCK
        if left_in_block < _RECORD.size:  # block trailer padding
            pos += left_in_block
            continue
        _, length, kind = _RECORD.unpack_from(data, pos)
        if length == 0 and kind == 0:  # zero padding at the end of the last block
            pos += left_in_block
            continue
        chunk = data[pos + _RECORD.size : pos + _RECORD.size + length]
        pos += _RECORD.size + length
        pending = chunk if kind in (1, 2) else pending + chunk
        if kind in (1, 4):
            yield pending
            pending = b""


def read_offline_run(run_dir: str | Path) -> dict[str, Any]:
    """What an offline run holds: run info (project, group, job_type, name, id, tags), config, history rows, summary,
    the media files it wrote (paths relative to `files/`), and whether the run finished (its exit record is there).

    Values are decoded from the JSON the SDK stored; a logged table appears in history as its media reference
    ({'_type': 'table-file', 'path': 'media/table/...table.json', ...}), readable from `files/`. W&B's service
    writes the log behind the SDK: it is complete once the service has shut down (at process exit, or after
    `wandb.teardown()`), so read a run from the process that wrote it only after that.
    """
    from wandb.proto import wandb_internal_pb2  # lazy: W&B costs ~0.4 s, only when logging

    run_dir = Path(run_dir)
    log = next(run_dir.glob("run-*.wandb"), None)
    if log is None:
        raise FileNotFoundError(f"{run_dir} holds no run-*.wandb file")
    out: dict[str, Any] = {"run": {}, "config": {}, "history": [], "summary": {}, "files": [], "finished": False}
    for payload in _payloads(log):
        # protobuf makes the message classes when the module loads; wandb ships no stub that names them
        record = wandb_internal_pb2.Record()  # pyright: ignore[reportAttributeAccessIssue]
        record.ParseFromString(payload)
        kind = record.WhichOneof("record_type")
        if kind == "run":
            run = record.run
            out["run"] = {
                "project": run.project,
                "group": run.run_group,
                "job_type": run.job_type,
                "name": run.display_name,
                "id": run.run_id,
                "tags": list(run.tags),
            }
            out["config"].update({item.key: json.loads(item.value_json) for item in run.config.update})
        elif kind == "config":
            out["config"].update({item.key: json.loads(item.value_json) for item in record.config.update})
        elif kind == "history":
            row: dict[str, Any] = {}
            for item in record.history.item:
                _set(row, item, json.loads(item.value_json))
            out["history"].append(row)
        elif kind == "summary":
            for item in record.summary.update:
                _set(out["summary"], item, json.loads(item.value_json))
        elif kind == "exit":
            out["finished"] = True
    files = run_dir / "files"
    out["files"] = sorted(str(p.relative_to(files)) for p in files.rglob("*") if p.is_file()) if files.is_dir() else []
    return out


def _set(target: dict[str, Any], item: Any, value: Any) -> None:
    """Store an item under its key, or under its nested key path (media are logged field by field)."""
    path = [item.key] if item.key else list(item.nested_key)
    for part in path[:-1]:
        target = target.setdefault(part, {})
    target[path[-1]] = value
