"""`--wandb`: the table and plots go to an offline W&B run, read back here from its `.wandb` log and files."""

from __future__ import annotations

import json

import pytest
import wandb
from reports_fixtures import TABLE3_ROWS, make_study

from reports.build import build_report
from reports.wandb_log import CLAIMS_KEY, TABLE_KEY, read_offline_run


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
    assert run["run"]["group"] == "table3" and run["run"]["job_type"] == "report"
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
    assert all(x["verdict"] == "inconclusive" for x in lines)  # the fixture's curves still rise: no plateau
    assert lines[0]["effect"] < 0 and lines[0]["ci_low"] < lines[0]["effect"] < lines[0]["ci_high"]
    assert run["summary"]["claims/shallow"] == "inconclusive" and "chrf/base" in run["summary"]


def test_wandb_disabled_by_environment_is_a_no_op(tmp_path, clean_wandb_env, monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "disabled")
    out = make_study(tmp_path / "s", rows=TABLE3_ROWS[:2], seeds=(0,), storage=None)
    written = build_report(out, ["md"], wandb=True, plots=False, n_samples=100)
    assert "wandb" not in written and written["md"].is_file()
    assert not (out / "wandb").exists() or not list((out / "wandb").glob("*run-*"))
