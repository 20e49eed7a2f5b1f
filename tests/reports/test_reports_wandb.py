"""`--wandb`: the table and plots go to an offline W&B run in the sweep's group, read back here from its `.wandb`
log and files; the workspace view the report writes (built offline with wandb-workspaces, never saved here)."""

from __future__ import annotations

import json
import os
import runpy
import subprocess
import sys

import pytest
import wandb
from ablate.data.errors import AblateError
from ablate.reports.build import build_report
from ablate.reports.wandb_log import CLAIMS_KEY, STEP_KEY, TABLE_KEY, build_view, read_offline_run
from reports_fixtures import TABLE3_ROWS, make_study


@pytest.fixture
def clean_wandb_env(monkeypatch, tmp_path):
    for name in ("WANDB_MODE", "WANDB_API_KEY", "WANDB_DIR", "WANDB_PROJECT", "WANDB_RUN_GROUP", "WANDB_JOB_TYPE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("WANDB_CONFIG_DIR", str(tmp_path / "wandb-config"))
    monkeypatch.setenv("WANDB_CACHE_DIR", str(tmp_path / "wandb-cache"))


def test_offline_run_holds_the_table_and_plots(tmp_path, clean_wandb_env):
    out = make_study(tmp_path / "table3-smoke", rows=TABLE3_ROWS[:4], plan={("B1", 1): "running"})
    written = build_report(out, ["md"], wandb=True, n_samples=100)
    run_dir = written["wandb"]
    assert run_dir.parent == out / "wandb" and run_dir.name.startswith("offline-run-")

    wandb.teardown()  # as at process exit: W&B's service flushes the run's log
    run = read_offline_run(run_dir)
    assert run["finished"]
    assert run["run"]["project"] == "ablate-test"  # from study.json
    assert run["run"]["group"] == "table3-smoke" and run["run"]["job_type"] == "report"  # the trials' group
    assert run["run"]["name"] == "report-table3-smoke" and run["config"]["label"] is None
    assert run["config"]["study"] == "table3" and run["config"]["seeds"] == [0, 1]

    logged = run["history"][0]
    table_ref = logged[TABLE_KEY]
    assert table_ref["_type"] == "table-file" and table_ref["nrows"] == 4
    table = json.loads((run_dir / "files" / table_ref["path"]).read_text())
    columns = table["columns"]
    rows = {r[columns.index("row")]: dict(zip(columns, r, strict=True)) for r in table["data"]}
    assert list(rows) == ["base", "A1", "A3", "B1"]
    record = json.loads((out / "records/A1__seed0.json").read_text())
    other = json.loads((out / "records/A1__seed1.json").read_text())
    assert rows["A1"]["bleu_mean"] == pytest.approx((record["metrics"]["bleu"] + other["metrics"]["bleu"]) / 2)
    assert rows["B1"]["state"] == "running" and rows["A1"]["paper_bleu"] == 24.9

    images = {k: v for k, v in logged.items() if isinstance(v, dict) and v.get("_type") == "image-file"}
    assert {"report/bleu_vs_params", "report/bleu_deltas", "report/curves_A"} <= set(images)
    for image in images.values():
        assert (run_dir / "files" / image["path"]).read_bytes().startswith(b"\x89PNG")
    assert run["summary"]["bleu/base"] == pytest.approx(rows["base"]["bleu_mean"])


def test_offline_run_holds_the_claims_and_their_verdicts(tmp_path, clean_wandb_env):
    out = make_study(tmp_path / "table3-smoke", rows=TABLE3_ROWS[:5])
    claims = tmp_path / "claims.yaml"
    claims.write_text(
        "claims:\n  - {id: shallow, text: t, compare: [{row: C1, metric: chrf, expect: lower}]}\n"
        "  - {id: heads, text: t, compare: [{row: A1, metric: bleu, expect: lower},\n"
        "                                   {row: B1, metric: ppl, expect: higher}]}\n"
    )
    run_dir = build_report(out, ["md"], wandb=True, n_samples=100, claims=claims)["wandb"]
    wandb.teardown()
    run = read_offline_run(run_dir)
    ref = run["history"][0][CLAIMS_KEY]
    table = json.loads((run_dir / "files" / ref["path"]).read_text())
    columns = table["columns"]
    lines = [dict(zip(columns, r, strict=True)) for r in table["data"]]
    assert [(x["claim"], x["row"], x["metric"]) for x in lines] == [
        ("shallow", "C1", "chrf"),
        ("heads", "A1", "bleu"),
        ("heads", "B1", "ppl"),
    ]
    assert [x["verdict"] for x in lines[:2]] == ["reproduced", "reproduced"]  # C1 and A1 are clearly worse
    assert lines[0]["effect"] < 0 and lines[0]["ci_low"] < lines[0]["effect"] < lines[0]["ci_high"]
    assert lines[0]["mde"] > 0 and lines[0]["budgets"] == "T" and "reason" in columns
    assert run["summary"]["claims/shallow"] == "reproduced" and "chrf/base" in run["summary"]
    assert run["summary"]["ci_half_width_bleu/at1"] > 0


def test_wandb_disabled_by_environment_is_a_no_op(tmp_path, clean_wandb_env, monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "disabled")
    out = make_study(tmp_path / "s", rows=TABLE3_ROWS[:2], seeds=(0,), storage=None)
    written = build_report(out, ["md"], wandb=True, plots=False, n_samples=100)
    assert "wandb" not in written and written["md"].is_file()
    assert not (out / "wandb").exists() or not list((out / "wandb").glob("*run-*"))


def _label(out, label: str) -> None:
    """study.json as a sweep run with `--tracking.label LABEL` writes it: the label in every row's config."""
    meta = json.loads((out / "study.json").read_text())
    for row in meta["rows"]:
        row["config"]["tracking"] = {"project": "ablate-test", "entity": None, "label": label}
    (out / "study.json").write_text(json.dumps(meta))


def test_the_report_run_takes_the_label_of_the_sweep(tmp_path, clean_wandb_env):
    out = make_study(tmp_path / "table3-smoke", rows=TABLE3_ROWS[:2], seeds=(0,), storage=None)
    _label(out, "rerun2")
    run_dir = build_report(out, ["md"], wandb=True, plots=False, n_samples=100)["wandb"]
    wandb.teardown()
    run = read_offline_run(run_dir)
    assert (run["run"]["group"], run["run"]["name"]) == ("table3-smoke-rerun2", "report-table3-smoke-rerun2")
    assert run["config"]["label"] == "rerun2"


# ------------------------------------------------------------------------------------------ the workspace view
def _view(out):
    """The definition in the view script the report wrote, and the view built from it (offline)."""
    definition = runpy.run_path(str(out / "wandb" / "workspace_view.py"))["DEFINITION"]
    return definition, build_view(definition, entity="someone")


def _panels(view, kind: str) -> list:
    return [p for section in view.sections for p in section.panels if type(p).__name__ == kind]


def test_the_report_writes_a_view_of_the_table_the_curves_by_row_and_the_knobs(tmp_path, clean_wandb_env, capsys):
    out = make_study(tmp_path / "table3-smoke", seeds=(0,), storage=None)
    build_report(out, ["md"], wandb=True, plots=False, n_samples=100)
    wandb.teardown()
    script = out / "wandb" / "workspace_view.py"
    (line,) = [x for x in capsys.readouterr().err.splitlines() if "workspace view" in x]
    assert f"python {script}` saves it" in line and "wandb sync" in line  # offline: upload the runs first

    definition, view = _view(out)
    assert (definition["group"], definition["project"], view.entity) == ("table3-smoke", "ablate-test", "someone")
    # The knobs: every config key on which the fixture's Table 3 rows differ, in config order.
    knobs = ["model.n_layers", "model.d_model", "model.d_ff", "model.n_heads", "model.d_k", "model.d_v",
             "model.p_drop", "model.norm", "model.positions", "train.max_steps"]  # fmt: skip
    assert definition["knobs"] == knobs

    # The runs: this sweep's group only, grouped by row; the runs table shows row, seed, knobs and final scores.
    runset = view.runset_settings
    assert runset.filters == "Metric(\"Group\") == 'table3-smoke'"
    assert [g.to_key().name for g in runset.groupby] == ["row"]
    columns = runset.pinned_columns
    assert columns[:3] == ["run:displayName", "config:row.value", "config:seed.value"]
    assert {"config:model.value.n_heads", "config:train.value.max_steps", "summary:final/bleu"} <= set(columns)

    # The report's table, then the curves over optimizer steps grouped by row, then parallel coordinates.
    assert [t.table_name for t in _panels(view, "WeavePanelSummaryTable")] == [TABLE_KEY]  # no claims logged
    curves = _panels(view, "LinePlot")
    assert [c.y for c in curves] == [["val/bleu"], ["val/ppl"], ["train/loss"], ["train/lr"]]
    assert all(c.x == STEP_KEY and c.groupby.name == "row" and c.groupby_aggfunc == "mean" for c in curves)
    (knobs_plot,) = _panels(view, "ParallelCoordinatesPlot")
    axes = [c.metric.name for c in knobs_plot.columns]
    assert axes == [*knobs, "final/ppl", "final/bleu"]
    model = view._to_model().model_dump(by_alias=True, exclude_none=True)  # what save() would send
    sent = [p for s in model["spec"]["section"]["panelBankConfig"]["sections"] for p in s["panels"]]
    accessors = [
        c["accessor"] for p in sent if p["viewType"] == "Parallel Coordinates Plot" for c in p["config"]["columns"]
    ]
    assert accessors[0] == "config:model.value.n_layers" and accessors[-1] == "summary:final/bleu"


def test_the_view_shows_the_claims_table_when_claims_were_judged(tmp_path, clean_wandb_env):
    out = make_study(tmp_path / "table3-smoke", rows=TABLE3_ROWS[:5], seeds=(0,), storage=None)
    claims = tmp_path / "claims.yaml"
    claims.write_text("claims:\n  - {id: shallow, text: t, compare: [{row: C1, metric: bleu, expect: lower}]}\n")
    build_report(out, ["md"], wandb=True, plots=False, n_samples=100, claims=claims)
    wandb.teardown()
    _, view = _view(out)
    assert [t.table_name for t in _panels(view, "WeavePanelSummaryTable")] == [TABLE_KEY, CLAIMS_KEY]


def test_the_view_script_without_a_wandb_login_says_so_in_one_line(tmp_path, clean_wandb_env):
    out = make_study(tmp_path / "table3-smoke", rows=TABLE3_ROWS[:2], seeds=(0,), storage=None)
    build_report(out, ["md"], wandb=True, plots=False, n_samples=100)
    wandb.teardown()
    env = {k: v for k, v in os.environ.items() if not k.startswith("WANDB_")}
    env.update(HOME=str(tmp_path / "home"), WANDB_CONFIG_DIR=str(tmp_path / "wandb-config"))  # no netrc, no key
    done = subprocess.run(
        [sys.executable, str(out / "wandb" / "workspace_view.py")], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 2, done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("W&B workspace view: error: saving the W&B workspace view needs a W&B login")


def test_a_view_without_an_entity_is_refused():
    with pytest.raises(AblateError, match="needs an entity"):
        build_view({"entity": None, "project": "p", "group": "g", "knobs": [], "claims": False})


def test_a_report_made_again_is_the_same_run_not_a_second_one(tmp_path, clean_wandb_env):
    """`ablate report --wandb` twice: one report run of the study (its id fixed by the study's group), holding the
    second report's table; the trials' own runs are untouched."""
    out = make_study(tmp_path / "table3-smoke", rows=TABLE3_ROWS[:3])
    first = build_report(out, ["md"], wandb=True, n_samples=50)["wandb"]
    wandb.teardown()
    again = build_report(out, ["md"], wandb=True, n_samples=50)["wandb"]
    wandb.teardown()
    runs = sorted((out / "wandb").glob("offline-run-*"))
    assert runs == [again], runs  # the first report's run was replaced, not kept beside it
    assert first.name.endswith("report-table3-smoke")
    run = read_offline_run(again)
    assert run["finished"] and run["run"]["id"] == "report-table3-smoke"
    assert run["history"][0][TABLE_KEY]["nrows"] == 3
