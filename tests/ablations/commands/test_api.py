"""The Python API over a study (`reports.load`): the README's example on a finished smoke sweep of Table 3, typed
records, one DataFrame row per trial, and an output folder written by the previous version of ablate."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from ablate.ablations.results import ledger
from ablate.ablations.results.record import Layout, Record
from ablate.ablations.study.definition import load_study
from ablate.reports import load

REPO = Path(__file__).resolve().parents[3]
LANDED = REPO / "tests" / "reports" / "data" / "landed-smoke"
"""Four trials (base and B1, seeds 0 and 1) of `ablate sweep table3 --preset smoke`, as written by the version before
the typed record (commit 6affaf8), with their hypotheses and references."""

pytest.importorskip("pandas")


@pytest.fixture(scope="module")
def smoke(sweeps, tmp_path_factory) -> Path:
    """A finished smoke sweep of the built-in Table 3, two rows (the others stay pending), two seeds a row and three
    for the base (its extra seeds, fewer than Dunnett's 9 to keep the test short)."""
    out = tmp_path_factory.mktemp("api") / "table3-smoke"
    cmd = [sys.executable, "-m", "ablate.ablations.cli", "sweep", "table3", "--preset", "smoke", "--rows", "base,B1",
           "--seeds", "2", "--control_seeds", "3", "--workers", "1", "--no_report", "--out", str(out)]  # fmt: skip
    done = subprocess.run(cmd, cwd=REPO, env=sweeps.env, capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return out


def readme_example() -> str:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    section = text[text.index("## From Python") :]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def test_the_readmes_example_runs_on_a_finished_smoke_sweep(smoke, capsys):
    code = readme_example()
    assert 'load("runs/table3-tiny")' in code and code.startswith("from ablate.reports import load")
    exec(compile(code.replace("runs/table3-tiny", str(smoke)), "README.md", "exec"), {})
    printed = capsys.readouterr().out
    assert "INCONCLUSIVE" in printed  # the smoke preset judges nothing: every claim is inconclusive
    assert "| base" in printed and "bleu@T/2" in printed


def test_one_row_per_trial_with_the_knobs_as_columns(smoke):
    study = load(smoke)
    df = study.to_pandas()
    table3 = load_study("table3")
    assert len(df) == (len(table3.rows) - 1) * 2 + 3 and df[["row", "seed"]].duplicated().sum() == 0
    assert sorted(df.loc[df.row == "base", "seed"]) == [0, 1, 2]  # the base's extra seed is a trial like any
    assert set(df.loc[df.row.isin(["base", "B1"]), "state"]) == {"complete"}
    assert set(df.loc[~df.row.isin(["base", "B1"]), "state"]) == {"pending"}
    by_row = df.drop_duplicates("row").set_index("row")
    assert {"model.n_layers", "model.d_model", "model.d_k", "model.p_drop", "train.max_steps"} <= set(df.columns)
    assert by_row.loc["B1", "model.d_k"] < by_row.loc["base", "model.d_k"]  # row B: d_k alone
    assert by_row.loc["big", "model.d_model"] == 2 * by_row.loc["base", "model.d_model"]  # pending, knobs known
    assert by_row.loc["big", "train.max_steps"] == 3 * by_row.loc["base", "train.max_steps"]
    complete = df[df.state == "complete"]
    for record in study.trials:  # every metric, at T and T/2, as the records have it
        line = complete[(complete.row == record.row) & (complete.seed == record.seed)].iloc[0]
        assert line["ppl"] == record.metrics["ppl"] and line["wall_time_s"] == record.metrics["wall_time_s"]
        assert line["ppl@T/2"] == record.at_budget(0.5).metrics["ppl"]
        assert line["optuna.number"] == record.optuna["trial_number"]
    assert complete["optuna.duration"].notna().all()  # joined from Optuna's trials_dataframe()
    assert df.loc[df.state == "pending", "ppl"].isna().all()


def test_the_api_gives_the_reports_table_and_verdicts(smoke, capsys):
    from ablate.ablations.cli import main

    study = load(smoke)
    assert [t.label for t in study.trials] == ["base@0", "base@1", "base@2", "B1@0", "B1@1"]
    assert all(isinstance(t, Record) and t.state == "complete" for t in study.trials)
    assert study.trials[0].device.startswith("cpu") and study.trials[0].wall_time_s > 0 < study.trials[0].params
    assert study.budgets == ["T/2", "T"]
    assert main(["report", str(smoke), "--format", "md", "--no_plots", "--quiet"]) == 0
    written = (smoke / "report" / "table3-smoke.md").read_text(encoding="utf-8")
    assert _undated(study.markdown()) == _undated(written)
    verdicts = {v.claim.id: v.verdict for v in study.verdicts()}
    assert verdicts["B-small-dk"] == "inconclusive"  # base and B1 trained: judged, but a pipeline check says nothing
    assert {verdicts[c] for c in verdicts if c != "B-small-dk"} == {"untested"}  # the other rows are pending
    curves = study.curves()
    assert set(curves.split) == {"train", "val"} and {"loss", "ppl", "bleu"} <= set(curves.metric)


def _undated(markdown: str) -> str:
    return re.sub(r"\d{4}-\d\d-\d\dT[\d:]+\+00:00", "<date>", markdown)


def test_a_folder_written_by_the_previous_version_reads_and_round_trips(tmp_path):
    """Records written before the typed record read into it, and its JSON form gives the same file back."""
    for path in ledger.record_paths(LANDED):
        record = Record.read(path)
        assert record.study == "table3" and record.state == "complete" and len(record.budgets) == 1
        assert record.hypotheses.is_file() and record.budgets[0].sentence_nll.is_file()
        text = json.dumps(record.to_json(Layout(LANDED)), indent=2, default=str)
        assert text == path.read_text(encoding="utf-8")
    study = load(LANDED, use_optuna=False)
    df = study.to_pandas()
    assert len(df[df.state == "complete"]) == 4 and df.loc[df.state == "complete", "bleu@T/2"].notna().all()
    assert len(study.verdicts()) > 0


def test_status_counts_the_controls_extra_seeds(smoke, capsys):
    """`ablate status` lists what the sweep queued (--rows base,B1): the base's third seed too, and not the rows no
    sweep queued, which it names in one line instead of listing their trials as pending."""
    import json

    from ablate.ablations.cli import main

    assert main(["status", str(smoke), "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    keys = {(r["row"], r["seed"]) for r in rows}
    assert len(rows) == len(keys) == 5
    assert {("base", 2), ("B1", 1)} <= keys and ("B1", 2) not in keys
    assert main(["status", str(smoke)]) == 0
    others = [r.name for r in load_study("table3").rows if r.name not in ("base", "B1")]
    assert f"{len(others)} row(s) not queued by any sweep: {', '.join(others)}" in capsys.readouterr().out
    assert {r["state"] for r in rows if r["row"] in ("base", "B1")} == {"complete"}
