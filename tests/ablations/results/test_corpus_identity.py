"""A study's corpus is part of its identity (`ablations.sweep.corpora`): a study started on one corpus refuses a trial
on another, in the sweep, in a worker on another machine and in the report; its gettext text is pinned in OUT/corpus
and a resumed study reads that copy, not the machine's catalogues; a missing or changed pinned file is one line.

Real sweeps (tests/ablations/studies/sweep_corpus.yaml, two tiny rows) on real catalogues compiled with msgfmt: two
locale roots, read through `--data.corpus gettext:xx:ROOT`, stand for two machines' installed packages.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from ablate.ablations import cli

STUDY = "sweep_corpus.yaml"
NAME = "sweep-corpus-smoke"

pytestmark = pytest.mark.slow


def gettext(root: Path) -> str:
    return f"gettext:xx:{root}"


@pytest.fixture(scope="module")
def machines(tmp_path_factory, catalogue_root) -> tuple[Path, Path]:
    """Machine a's and machine b's catalogues of one language."""
    root = tmp_path_factory.mktemp("machines")
    return catalogue_root(root / "a", seed=7), catalogue_root(root / "b", seed=8)


@pytest.fixture(scope="module")
def started(sweeps, machines, tmp_path_factory) -> Path:
    """A study whose first sweep trained row r1 on machine a's catalogues (r2 not yet run)."""
    out = tmp_path_factory.mktemp("started") / "out"
    done = sweeps.run(STUDY, out, "--rows", "r1", "--data.corpus", gettext(machines[0]))
    assert done.returncode == 0, done.stderr[-3000:]
    return out


def copy_of(out: Path, dest: Path) -> Path:
    shutil.copytree(out, dest, ignore=shutil.ignore_patterns("trials"))
    return dest


def one_line_error(done) -> str:
    """The sweep's last stderr line, checked to be its error: exit 2, no traceback."""
    assert done.returncode == 2, done.stderr[-3000:]
    assert "Traceback" not in done.stderr
    return done.stderr.strip().splitlines()[-1]


def fingerprint(out: Path, row: str = "r1") -> dict:
    return next(r["corpus"] for r in json.loads((out / "study.json").read_text())["rows"] if r["name"] == row)


def test_the_first_sweep_pins_its_text_and_every_record_keeps_its_fingerprint(started, machines, sweeps):
    manifest = json.loads((started / "corpus" / "manifest.json").read_text())
    assert manifest["source"] == gettext(machines[0]) and (manifest["src"], manifest["tgt"]) == ("en", "xx")
    kept = fingerprint(started)
    assert kept["source"] == gettext(machines[0]) and kept["valid"] > 0
    assert sweeps.records(started)["r1__seed0"]["corpus"] == kept == fingerprint(started, "r2")
    (trial,) = sweeps.trials(started, NAME)
    storage = sweeps.storage(f"journal:{started / 'optuna.journal'}")
    assert storage.get_study_system_attrs(storage.get_study_id_from_name(NAME))["ablate:corpus"]["r1"] == kept


def test_a_sweep_on_another_corpus_stops_before_training_and_writes_nothing(started, machines, sweeps, tmp_path):
    out = copy_of(started, tmp_path / "out")
    before = sweeps.snapshot(out)
    line = one_line_error(sweeps.run(STUDY, out, "--rows", "r2", "--data.corpus", gettext(machines[1])))
    ours = json.loads((out / "study.json").read_text())["rows"][0]["corpus"]
    assert f"{out} holds trials on corpus {ours['digest'][:12]} ({gettext(machines[0])}; train {ours['train']}" in line
    assert "this sweep's row r2 would train on " in line and f"({gettext(machines[1])}; train " in line
    assert line.endswith(
        f"the study's text is pinned in {out / 'corpus'}: pass --data.corpus {gettext(machines[0])} to read it"
    )
    assert sweeps.snapshot(out) == before


def test_a_worker_on_another_machine_claims_nothing(started, machines, sweeps, tmp_path):
    """Machine b joins the study through its storage: as a coordinator (`ablate sweep --storage ...`) or as a bare
    worker (`--worker`, as a SLURM task runs), it stops before it claims r2, which stays queued for machine a."""
    out = copy_of(started, tmp_path / "out")
    queued = sweeps.run(STUDY, out, "--rows", "r2", "--timeout", "0s", "--data.corpus", gettext(machines[0]))
    assert queued.returncode == 0, queued.stderr[-3000:]
    assert {t.user_attrs["row"]: t.state.name for t in sweeps.trials(out, NAME)} == {"r1": "COMPLETE", "r2": "WAITING"}
    shared = ("--storage", f"journal:{out / 'optuna.journal'}", "--rows", "r2", "--data.corpus", gettext(machines[1]))
    for worker in ([], ["--worker"]):
        elsewhere = tmp_path / f"machine-b{'-worker' if worker else ''}"
        line = one_line_error(sweeps.run(STUDY, elsewhere, *shared, *worker))
        assert f"Optuna study {NAME} in journal:{out / 'optuna.journal'} holds trials on corpus " in line
        assert "this sweep's row r2 would train on " in line and "reads the catalogues of this machine's" in line
        assert not elsewhere.exists()
    assert {t.user_attrs["row"]: t.state.name for t in sweeps.trials(out, NAME)} == {"r1": "COMPLETE", "r2": "WAITING"}
    # Machine a's catalogues change (a package installed): the study resumes from its pinned copy all the same.
    extra = machines[0] / "xx" / "LC_MESSAGES" / "extra.mo"
    shutil.copy(machines[1] / "xx" / "LC_MESSAGES" / "app.mo", extra)
    try:
        resumed = sweeps.run(STUDY, out, "--rows", "r2", "--data.corpus", gettext(machines[0]))
    finally:
        extra.unlink()
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    records = sweeps.records(out)
    assert records["r2__seed0"]["state"] == "complete" and records["r2__seed0"]["corpus"] == fingerprint(out)
    assert records["r2__seed0"]["config"]["data"]["corpus"] == gettext(machines[0])  # as declared; its text: pinned


@pytest.mark.parametrize("damage", ["missing", "changed"])
def test_a_missing_or_changed_pinned_file_is_one_line(started, machines, sweeps, tmp_path, damage):
    out = copy_of(started, tmp_path / "out")
    train = out / "corpus" / "train.xx"
    if damage == "missing":
        train.unlink()
    else:
        train.write_text(train.read_text(encoding="utf-8").replace("\n", " \n", 1), encoding="utf-8")
    before = sweeps.snapshot(out)
    line = one_line_error(sweeps.run(STUDY, out, "--rows", "r2", "--data.corpus", gettext(machines[0])))
    expected = f"missing file {train}: " if damage == "missing" else f"{train} has changed since it was exported from "
    assert f"ablate sweep: error: {expected}" in line and "from the study's archive" in line
    assert sweeps.snapshot(out) == before


def test_the_report_refuses_trials_of_two_corpora(started, machines, sweeps, tmp_path, capsys):
    other = tmp_path / "other"
    done = sweeps.run(STUDY, other, "--rows", "r2", "--data.corpus", gettext(machines[1]))
    assert done.returncode == 0, done.stderr[-3000:]
    out = copy_of(started, tmp_path / "out")
    for path in (other / "records").glob("r2__*"), (other / "hyps").glob("r2__*"):
        for file in path:
            shutil.copy(file, out / file.parent.name / file.name)
    assert cli.main(["report", str(out), "--format", "md"]) == 2
    err = capsys.readouterr().err.strip()
    a, b = fingerprint(started)["digest"][:12], fingerprint(other, "r2")["digest"][:12]
    assert "\n" not in err and f"{out} mixes two corpora: {a} ({gettext(machines[0])}; " in err
    assert "(study.json, r1@0)" in err and f"and {b} ({gettext(machines[1])}; " in err and "(r2@0)" in err
    assert not (out / "report").exists()


def test_a_study_from_before_fingerprints_is_checked_by_its_references(started, machines, sweeps, tmp_path):
    """What such a study kept of its corpus is its references: another machine's text fails on them."""
    out = copy_of(started, tmp_path / "out")
    spec = json.loads((out / "study.json").read_text())
    for row in spec["rows"]:
        del row["corpus"]
    (out / "study.json").write_text(json.dumps(spec))
    shutil.rmtree(out / "corpus")
    (out / "optuna.journal").unlink()
    before = sweeps.snapshot(out)
    line = one_line_error(sweeps.run(STUDY, out, "--rows", "r2", "--data.corpus", gettext(machines[1])))
    assert sweeps.snapshot(out) == before
    kept = len((out / "refs" / "valid.txt").read_text().splitlines())
    assert f"{out / 'refs' / 'valid.txt'} holds the {kept} references its trials were scored on; " in line
    assert "this sweep's corpus " in line and "reads the catalogues of this machine's installed packages" in line
