"""The studies' finished trials kept in the repository (`benchmarks/runs/*.tar.xz`, docs/findings/table3-builtin.md):
a long study goes on from them in a fresh clone, so each must be committed, whole, and of the design a sweep of the
same study and preset runs today. (A `.gitignore` line once kept them out of every commit while the docs told
readers to extract them.)"""

from __future__ import annotations

import json
import subprocess
import tarfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
ARCHIVES = sorted((REPO / "benchmarks" / "runs").glob("*.tar.xz"))


def test_the_archives_science_md_names_are_there():
    named = {"table3-tiny.tar.xz", "modern-tiny.tar.xz"}
    assert named <= {path.name for path in ARCHIVES}
    if (REPO / ".git").exists():  # a clone has them only if they were committed; a working tree, also untracked
        tracked = subprocess.run(["git", "ls-files", "benchmarks/runs"], cwd=REPO, capture_output=True, text=True)
        assert {f"benchmarks/runs/{name}" for name in named} <= set(tracked.stdout.split()), "not committed"


@pytest.mark.parametrize("archive", ARCHIVES, ids=[path.name for path in ARCHIVES])
def test_an_archive_resumes_under_today_s_design(archive, tmp_path):
    from ablate.ablations.statistics.sequential import Sequential
    from ablate.ablations.study.definition import load_study
    from ablate.ablations.sweep import corpora
    from ablate.ablations.sweep.plan import Plan

    with tarfile.open(archive) as tar:
        tar.extractall(tmp_path, filter="data")
    (out,) = [path.parent for path in tmp_path.glob("*/study.json")]
    study = json.loads((out / "study.json").read_text())
    names = {row["name"] for row in study["rows"]}
    records = sorted((out / "records").glob("*.json"))
    assert records
    for path in records:
        record = json.loads(path.read_text())
        assert record["row"] in names and record["state"] == "complete", path.name
        assert (out / "hyps" / f"{path.stem}.txt").is_file(), path.name  # the report's bootstrap reads them
    # The corpus is the one setting our archived sweeps gave on the command line (--data.corpus gettext:de)
    corpus = study["rows"][0]["config"]["data"]["corpus"]
    stored = Sequential.from_json(study.get("allocation"))  # the seeds' design is the design too
    plan = Plan(study=load_study(study["study"]), preset=study["preset"], seeds=study["seeds"], out=out, storage="",
                name=study["optuna_study"], control_seeds=study.get("control_seeds"),
                extra={"data": {"corpus": corpus}}, pin=corpora.read_pin(out),
                allocation=stored[0] if stored else None)  # fmt: skip
    plan.check_same_design()  # raises, naming the row and fields, if the preset has moved on since the trials ran
    # ... and on its own corpus: the fingerprint study.json keeps (or, before fingerprints, its references), from
    # its pinned copy where its text depends on the machine, never from this machine's catalogues.
    corpora.check_out(plan, corpora.prepare_rows(plan))
    if corpora.machine_dependent(plan.run_config(plan.rows()[0], 0).data):
        assert plan.pin is not None, (
            f"{archive.name} does not carry its corpus (corpus/, `ablations.sweep.corpora.pin`)"
        )
        kept = {row["name"]: row.get("corpus") for row in study["rows"]}
        for path in records:
            record = json.loads(path.read_text())
            assert record.get("corpus") is not None and record["corpus"] == kept[record["row"]], path.name


def _under_way(out: Path) -> bool:
    """An archive packed while its sweep ran (a study longer than a session): its storage still queues trials."""
    import optuna
    from optuna.storages import JournalStorage
    from optuna.storages.journal import JournalFileBackend

    name = json.loads((out / "study.json").read_text())["optuna_study"]
    storage = JournalStorage(JournalFileBackend(str(out / "optuna.journal")))
    trials = optuna.load_study(study_name=name, storage=storage).get_trials(deepcopy=False)
    return any(t.state in (optuna.trial.TrialState.WAITING, optuna.trial.TrialState.RUNNING) for t in trials)


@pytest.mark.parametrize("archive", ARCHIVES, ids=[path.name for path in ARCHIVES])
def test_a_finished_sequential_archive_read_from_its_records_has_no_row_waiting_on_a_seed(archive, tmp_path):
    """An archive keeps no queue: at the sequential design, the report takes each row's seeds from the records and
    the design's first look (a row no claim tests has one seed), not study.json's min_seeds for every row."""
    from ablate.ablations.results.load import load_results

    with tarfile.open(archive) as tar:
        tar.extractall(tmp_path, filter="data")
    (out,) = [path.parent for path in tmp_path.glob("*/study.json")]
    if (json.loads((out / "study.json").read_text()).get("allocation") or {}).get("design") != "sequential":
        pytest.skip("a fixed design")
    if _under_way(out):
        pytest.skip("a study under way: its queue is kept, and its rows wait on seeds")
    results = load_results(out)
    ran = {row for (row, _), status in results.status.items() if status.state == "complete"}
    pending = [key for key, status in results.status.items() if status.state != "complete" and key[0] in ran]
    assert ran and not pending  # (rows a --rows sweep left out have no record, and stay shown as to come)


@pytest.mark.parametrize("archive", ARCHIVES, ids=[path.name for path in ARCHIVES])
def test_an_archive_opens_as_a_live_study_folder(archive, tmp_path, capsys, monkeypatch):
    """Each archive carries its Optuna storage (`ablate archive`): status reads it wherever the archive is extracted,
    every record shows as complete there, and optuna-dashboard's storage guess opens it."""
    from ablate.ablations import cli
    from optuna_dashboard._storage_url import get_storage

    with tarfile.open(archive) as tar:
        tar.extractall(tmp_path, filter="data")
    (out,) = [path.parent for path in tmp_path.glob("*/study.json")]
    assert (out / "optuna.journal").is_file(), f"{archive.name} carries no storage: repack it with ablate archive"
    monkeypatch.chdir(tmp_path)
    assert cli.main(["status", str(out), "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    records = {path.stem for path in (out / "records").glob("*.json")}
    complete = {f"{r['row']}__seed{r['seed']}" for r in rows if r["state"] == "complete"}
    assert complete == records
    assert get_storage(str(out / "optuna.journal")).get_all_studies()


def test_the_readmes_base_figures_are_the_archives():
    """README quotes the default study's base, seed 0, at T/2 and T: the archived record's dev BLEU to the hundredth."""
    with tarfile.open(REPO / "benchmarks" / "runs" / "table3-tiny.tar.xz") as tar:
        member = tar.extractfile("table3-tiny/records/base__seed0.json")
        assert member is not None
        record = json.loads(member.read())
    at_t = record["metrics"]["bleu"]
    (half,) = [b["metrics"]["bleu"] for b in record["budgets"] if b["fraction"] == 0.5]
    readme = " ".join((REPO / "README.md").read_text(encoding="utf-8").split())
    assert f"dev BLEU {half:.2f} at T/2 and {at_t:.2f} at T (seed 0 of the archived study" in readme
