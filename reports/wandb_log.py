"""The report on Weights & Biases: the table as a `wandb.Table`, the plots as images, in one run per report.

The run goes to the study's project (study.json 'wandb_project'), group = study name, job_type 'report'. It is
offline unless the environment says otherwise (WANDB_MODE, or WANDB_API_KEY for online); WANDB_MODE=disabled gives
a no-op run. `read_offline_run` reads an offline run back from its `.wandb` file (the transaction log that
`wandb sync` uploads), for tests and for checking what a sweep logged without a server.
"""

from __future__ import annotations

import json
import os
import struct
from pathlib import Path
from typing import Any

from reports.formats import claims_data, row_record
from reports.plots import Plot
from reports.table import ReportTable

TABLE_KEY = "report/table3"
"""History key of the report table."""
CLAIMS_KEY = "report/claims"
"""History key of the claims table (one line per comparison, with its verdict)."""


def _mode() -> str | None:
    """WANDB_MODE if set, else online (None: wandb decides) with WANDB_API_KEY, else 'offline'.

    Read here at each call, not left to wandb: wandb reads the environment once per process, and a sweep that
    calls `build_report` at its end may have set up wandb long before.
    """
    if os.environ.get("WANDB_MODE"):
        return os.environ["WANDB_MODE"]
    return None if os.environ.get("WANDB_API_KEY") else "offline"


def log_report(table: ReportTable, plots: list[Plot], *, project: str, wandb_dir: Path) -> Path | None:
    """Log the table and the plots to a new W&B run; its local run directory, or None when W&B is disabled."""
    import wandb

    wandb_dir.mkdir(parents=True, exist_ok=True)
    run = wandb.init(
        project=project,
        group=table.study,
        job_type="report",
        name=f"report-{table.study}-{table.preset}",
        dir=str(wandb_dir),
        mode=_mode(),
        reinit="create_new",
        config={"study": table.study, "preset": table.preset, "seeds": table.seeds, "results": table.out_dir},
        settings=wandb.Settings(silent=True, save_code=False, disable_git=True, x_disable_stats=True),
    )
    try:
        if getattr(run, "disabled", False):
            return None
        records = [row_record(r) for r in table.rows]
        columns = list(records[0]) if records else ["row"]
        data = [[_cell(rec[c]) for c in columns] for rec in records]
        logged: dict[str, Any] = {TABLE_KEY: wandb.Table(columns=columns, data=data)}
        claims = claims_data(table)
        if claims:
            claim_columns = list(claims[0])
            logged[CLAIMS_KEY] = wandb.Table(
                columns=claim_columns, data=[[_cell(c[k]) for k in claim_columns] for c in claims]
            )
        for plot in plots:
            logged[f"report/{plot.name}"] = wandb.Image(str(plot.png), caption=plot.title)
        run.log(logged)
        for rec in records:
            if rec["bleu_mean"] is not None:
                run.summary[f"bleu/{rec['row']}"] = rec["bleu_mean"]
            if rec["chrf_mean"] is not None:
                run.summary[f"chrf/{rec['row']}"] = rec["chrf_mean"]
        for cv in table.claims:  # the verdicts, readable on the run's overview page
            run.summary[f"claims/{cv.claim.id}"] = cv.verdict
        return Path(run.dir).parent
    finally:
        run.finish()


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
    """What an offline run holds: run info (project, group, job_type, name, id), config, history rows, summary,
    the media files it wrote (paths relative to `files/`), and whether the run finished (its exit record is there).

    Values are decoded from the JSON the SDK stored; a logged table appears in history as its media reference
    ({'_type': 'table-file', 'path': 'media/table/...table.json', ...}), readable from `files/`. W&B's service
    writes the log behind the SDK: it is complete once the service has shut down (at process exit, or after
    `wandb.teardown()`), so read a run from the process that wrote it only after that.
    """
    from wandb.proto import wandb_internal_pb2

    run_dir = Path(run_dir)
    log = next(run_dir.glob("run-*.wandb"), None)
    if log is None:
        raise FileNotFoundError(f"{run_dir} holds no run-*.wandb file")
    out: dict[str, Any] = {"run": {}, "config": {}, "history": [], "summary": {}, "files": [], "finished": False}
    for payload in _payloads(log):
        record = wandb_internal_pb2.Record()
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
