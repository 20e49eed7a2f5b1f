"""A study folder holds one study (issue 72): a record of another study, preset, row or row configuration is refused
by report, status and compare in one line that names its file; status and report read the same records and say
the same; a sweep pointed at a folder of another study says which study is there."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest
from ablate.ablations.cli import main as ablate

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "reports"))
import reports_fixtures  # noqa: E402  (a sibling folder's helpers: --import-mode=importlib)

ROWS = reports_fixtures.TABLE3_ROWS[:3]  # base, A1, A3


@pytest.fixture
def folder(tmp_path):
    return reports_fixtures.make_study(tmp_path / "table3-smoke", rows=ROWS)


def _edit(path, change) -> None:
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))


def _refused(argv, capsys) -> str:
    assert ablate(argv) == 2, capsys.readouterr()
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    return err


def _foreign_study(folder, tmp_path):
    other = reports_fixtures.make_study(tmp_path / "modern-smoke", rows=ROWS, study="modern", storage=None)
    shutil.copy(other / "records" / "A1__seed0.json", folder / "records" / "A1__seed0.json")
    return "a trial of study modern, but", "A1__seed0.json"


def _other_preset(folder, tmp_path):
    _edit(folder / "records" / "A3__seed1.json", lambda r: r.update(preset="tiny"))
    return "a trial at preset tiny, but", "A3__seed1.json"


def _undeclared_row(folder, tmp_path):
    shutil.copy(folder / "records" / "A1__seed0.json", folder / "records" / "Z9__seed0.json")
    _edit(folder / "records" / "Z9__seed0.json", lambda r: r.update(row="Z9"))
    return "row Z9 is not a row of", "Z9__seed0.json"


def _other_config(folder, tmp_path):
    _edit(folder / "records" / "base__seed1.json", lambda r: r["config"]["model"].update(d_ff=12345))
    return "row base trained with model.d_ff 12345, but", "base__seed1.json"


@pytest.mark.parametrize("make", [_foreign_study, _other_preset, _undeclared_row, _other_config])
@pytest.mark.parametrize("command", ["report", "status", "compare"])
def test_a_record_of_another_design_is_refused_by_every_reader(folder, tmp_path, capsys, make, command):
    """Before, the report mixed it into the base's mean and every delta, or showed a row nothing would run, and
    exited 0; status showed the storage's values."""
    said, name = make(folder, tmp_path)
    other = reports_fixtures.make_study(tmp_path / "b" / "table3-smoke", rows=ROWS, storage=None)
    argv = {"report": ["report", str(folder), "--format", "csv"], "status": ["status", str(folder)],
            "compare": ["compare", str(other), str(folder)]}[command]  # fmt: skip
    err = _refused(argv, capsys)
    assert said in err and name in err and "study.json" in err, err
    assert not (folder / "report").exists()  # nothing half-written


def test_a_trial_of_an_older_ablate_that_names_no_study_is_read_as_the_folders(folder, capsys):
    for path in (folder / "records").glob("*.json"):
        _edit(path, lambda r: (r.pop("study"), r.pop("preset")))
    assert ablate(["report", str(folder), "--format", "csv", "--quiet"]) == 0, capsys.readouterr().err


def test_status_and_report_read_the_same_records(folder, capsys):
    """A record on disk speaks for its trial in status as in the report, whatever the storage's copy says; a trial
    complete in the storage without a record is failed in both."""
    _edit(folder / "records" / "A1__seed1.json", lambda r: r["metrics"].update(bleu=12.5, ppl=99.0))
    (folder / "records" / "A3__seed0.json").unlink()
    assert ablate(["status", str(folder), "--json"]) == 0
    status = {(r["row"], r["seed"]): r for r in json.loads(capsys.readouterr().out)}
    assert ablate(["report", str(folder), "--format", "json", "--quiet"]) == 0
    capsys.readouterr()
    report = json.loads((folder / "report" / "table3-smoke.json").read_text())
    seen = {(row["row"], int(seed)): s for row in report["rows"] for seed, s in row["seeds"].items()}
    assert set(seen) == set(status)
    for key, trial in seen.items():
        assert (status[key]["state"], status[key]["bleu"], status[key]["ppl"]) == (
            trial["state"], trial["bleu"], trial["ppl"]), key  # fmt: skip
    assert status[("A1", 1)]["bleu"] == 12.5 and status[("A3", 0)]["state"] == "failed"
    assert "no record" in status[("A3", 0)]["reason"]


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["modern", "--preset", "smoke"], "to start modern at preset smoke, pass a new --out"),
        (["table3", "--preset", "tiny"], "to start table3 at preset tiny, pass a new --out"),
    ],
)
def test_a_sweep_into_a_folder_of_another_study_says_which_study_is_there(folder, capsys, argv, said):
    """Before: 'holds trials of another design: row base was run with ...' and a dozen overrides to pass."""
    err = _refused(["sweep", *argv, "--out", str(folder), "--dry_run"], capsys)
    assert f"{folder} holds study table3 at preset smoke (6 trials)" in err and said in err, err
    assert f"ablate sweep table3 --preset smoke --out {folder}" in err
