"""`ablate archive OUT`: a study as one file that opens anywhere as the live folder did (status, report, the
dashboard's storage), from a real finished sweep; a journal rebuilt from the records when OUT has none."""

from __future__ import annotations

import shutil
import tarfile

from ablate.ablations import cli


def extract(archive, into):
    with tarfile.open(archive) as tar:
        names = tar.getnames()
        tar.extractall(into, filter="data")
    return names


def test_an_archive_opens_elsewhere_as_the_live_folder(finished_sweep, sweeps, tmp_path, capsys, monkeypatch):
    from optuna_dashboard._storage_url import get_storage

    monkeypatch.setenv("ABLATE_CACHE", sweeps.env["ABLATE_CACHE"])
    live = tmp_path / "live"
    shutil.copytree(finished_sweep, live / "study", ignore=shutil.ignore_patterns("logs"))
    study_json = (live / "study" / "study.json").read_bytes()
    assert cli.main(["status", str(live / "study")]) == 0
    live_status = capsys.readouterr().out

    assert cli.main(["archive", str(live / "study"), "--to", str(tmp_path / "study.tar.xz")]) == 0
    capsys.readouterr()
    names = extract(tmp_path / "study.tar.xz", tmp_path / "elsewhere")
    assert {"study/study.json", "study/optuna.journal", "study/records", "study/hyps", "study/refs"} <= set(names)
    assert not any("/trials" in n or "/checkpoints" in n or "/wandb" in n for n in names)
    moved = tmp_path / "elsewhere" / "study"
    assert (moved / "study.json").read_bytes() == study_json
    monkeypatch.chdir(tmp_path)  # another working directory than the sweep's
    assert cli.main(["status", str(moved)]) == 0
    assert capsys.readouterr().out.splitlines()[:1] == live_status.splitlines()[:1]  # '... 3/3 done, ...'
    assert get_storage(str(moved / "optuna.journal")).get_all_studies()  # what optuna-dashboard opens

    # Without its journal (an archive made before they carried one): rebuilt from the records, status the same.
    (moved / "optuna.journal").unlink()
    again = ["archive", str(moved), "--to", str(tmp_path / "again.tar.xz")]
    assert cli.main(again) == 2  # a study that is not built in: its file is needed to queue its trials
    assert "which is not built in: to rebuild its storage from the records, pass its YAML" in capsys.readouterr().err
    assert cli.main([*again, "--study", str(sweeps.study("sweep_rows.yaml"))]) == 0
    assert "rebuilding" in capsys.readouterr().err
    assert (moved / "study.json").read_bytes() == study_json, "study.json stays as the study ran"
    assert cli.main(["status", str(moved)]) == 0
    rebuilt = capsys.readouterr().out
    assert rebuilt.splitlines()[0] == live_status.splitlines()[0]
    assert rebuilt.count("complete") == live_status.count("complete") > 0


def test_archive_of_a_folder_that_is_not_a_study_is_one_line(tmp_path, capsys):
    assert cli.main(["archive", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "no study.json" in err
