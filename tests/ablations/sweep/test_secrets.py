"""A storage password is used to connect and nowhere else: every command reads the URL the same way (--storage, else
ABLATE_STORAGE, else study.json's), study.json's redacted URL is never used to connect, and no message, note or
report file shows the password.

The results directory is a real sweep of tests/ablations/studies/sweep_rows.yaml on a journal; the PostgreSQL test
copies its study into the server that ABLATE_TEST_POSTGRES_URL names (.ci/run starts one).
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import uuid
from pathlib import Path

import pytest
from ablate.ablations import cli
from ablate.ablations.runtime.urls import ENV_VAR, redact, scrub

STUDY = "sweep_rows.yaml"
OPTUNA_NAME = "sweep-rows-smoke"
SECRET = "PLANTEDSECRET"
UNREACHABLE = f"postgresql://ablate:{SECRET}@127.0.0.1:1/nodb"  # nothing listens on port 1
SHOWN = "postgresql+psycopg2://ablate:***@127.0.0.1:1/nodb"
# Why opening it fails: nothing listens, or, where psycopg2 is not installed (the `postgres` extra; the lent GPU
# machines lack it), the driver is missing. The password stays hidden either way.
OPEN_FAILED = "cannot open storage" if importlib.util.find_spec("psycopg2") else "a driver is missing"


@pytest.fixture
def out(finished_copy) -> Path:
    return finished_copy


def remember(out: Path, storage: str, optuna_study: str = OPTUNA_NAME) -> None:
    """Make study.json name another storage, as a sweep on it would have."""
    spec = json.loads((out / "study.json").read_text(encoding="utf-8"))
    (out / "study.json").write_text(json.dumps({**spec, "storage": storage, "optuna_study": optuna_study}))


def files_holding(secret: str, *roots: Path) -> list[Path]:
    return [p for root in roots for p in sorted(root.rglob("*")) if p.is_file() and secret.encode() in p.read_bytes()]


# ------------------------------------------------------------------------------------------------------- redacting
@pytest.mark.parametrize(
    "url, shown",
    [
        (
            "postgresql+psycopg2://u:p@h:5432/db?sslmode=require",
            "postgresql+psycopg2://u:***@h:5432/db?sslmode=require",
        ),
        ("postgresql://u@h/db", "postgresql://u@h/db"),
        ("postgresql://h/db", "postgresql://h/db"),
        ("postgresql://u:p%40ss@h/db", "postgresql://u:***@h/db"),
        ("postgresql://u:p@ss@h/db", "postgresql://u:***@h/db"),  # an '@' left unescaped: nothing of it shows
        ("journal:/runs/t3/optuna.journal", "journal:/runs/t3/optuna.journal"),
        ("sqlite:///runs/t3.db", "sqlite:///runs/t3.db"),
    ],
)
def test_redact_hides_the_password_of_any_url_form(url, shown):
    assert redact(url) == shown


@pytest.mark.parametrize(
    "spelled", [["--storage", "URL"], ["--storage=URL"], ["--sweep.storage", "URL"], ["--sweep.storage=URL"]]
)
def test_a_storage_password_leaves_the_command_line_however_the_option_is_spelled(monkeypatch, spelled):
    """`ablate sweep`'s storage is in its `sweep` section (--sweep.storage) and keeps its old spelling: either way a
    URL with a password moves into ABLATE_STORAGE and out of sys.argv, which W&B records and DDP relaunches."""
    url = f"postgresql://user:{SECRET}@db-host/ablate"
    argv = ["sweep", "table3", *(a.replace("URL", url) for a in spelled)]
    monkeypatch.setattr("sys.argv", ["ablate", *argv])
    # setenv first, so that teardown removes the variable _keep_storage_secret sets (delenv of an unset variable
    # records nothing to undo, and the URL leaked into every later test's storage)
    monkeypatch.setenv(ENV_VAR, "placeholder")
    monkeypatch.delenv(ENV_VAR)
    cli._keep_storage_secret(argv[1:])
    assert os.environ[ENV_VAR] == url and not any(SECRET in a for a in sys.argv)


def test_scrub_hides_the_password_in_error_texts():
    text = f'connection to {UNREACHABLE} failed (dsn "host=x password={SECRET}"), also {SECRET}!'
    assert SECRET not in scrub(text, UNREACHABLE) and "127.0.0.1:1/nodb" in scrub(text, UNREACHABLE)
    assert SECRET not in scrub(f"see postgresql+psycopg2://bob:{SECRET}@db/x")  # any URL, even when not the one given


# ---------------------------------------------------------------------------------------------------- the commands
def test_status_with_a_redacted_storage_and_no_ablate_storage_asks_for_it(out, capsys):
    remember(out, "postgresql+psycopg2://ablate:***@127.0.0.1:1/nodb")
    assert cli.main(["status", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert ENV_VAR in err and "--storage" in err and str(out / "study.json") in err


@pytest.mark.parametrize("command", ["status", "report", "sweep"])
def test_a_password_with_an_unescaped_at_sign_is_refused_showing_none_of_it(command, out, tmp_path, capsys):
    """Before, SQLAlchemy took the part after its '@' for the host, and the driver's error printed it."""
    url = "postgresql://ablate:PLANTED@SECRET@127.0.0.1:1/nodb"
    argv = {"status": ["status", str(out), "--storage", url], "report": ["report", str(out), "--storage", url],
            "sweep": ["sweep", "table3", "--preset", "smoke", "--out", str(tmp_path / "new"), "--storage", url,
                      "--dry_run"]}[command]  # fmt: skip
    assert cli.main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert "PLANTED" not in err and "SECRET" not in err and "%40" in err and "postgresql://ablate:***@" in err


@pytest.mark.slow
def test_ablate_storage_comes_before_study_json_and_storage_before_both(out, capsys, monkeypatch):
    journal = f"journal:{out / 'optuna.journal'}"
    remember(out, "postgresql+psycopg2://ablate:***@127.0.0.1:1/nodb")
    monkeypatch.setenv(ENV_VAR, journal)
    assert cli.main(["status", str(out), "--json"]) == 0
    assert {r["row"] for r in json.loads(capsys.readouterr().out)} == {"ok1", "nan", "ok2"}

    monkeypatch.setenv(ENV_VAR, UNREACHABLE)
    assert cli.main(["status", str(out), "--json", "--storage", journal]) == 0
    assert {r["row"] for r in json.loads(capsys.readouterr().out)} == {"ok1", "nan", "ok2"}


@pytest.mark.slow
def test_no_command_shows_the_password_of_an_unreachable_storage(out, tmp_path, capsys, monkeypatch):
    """`ablate report` still writes the report (from the records, with a note); status fails in one line; none of
    their output and no file under OUT or the report directory holds the password."""
    report_dir = tmp_path / "report"
    argv = ["report", str(out), "--storage", UNREACHABLE, "--out", str(report_dir), "--no_plots", "--samples", "50"]
    assert cli.main(argv) == 0
    printed = capsys.readouterr()
    md = next(report_dir.glob("*.md")).read_text(encoding="utf-8")
    assert f"{SHOWN} could not be opened" in md
    assert sorted(p.suffix for p in report_dir.glob("*.*")) == [".csv", ".html", ".json", ".md", ".tex", ".txt"]

    assert cli.main(["status", str(out), "--storage", UNREACHABLE]) == 2
    status = capsys.readouterr()
    assert len(status.err.strip().splitlines()) == 1 and OPEN_FAILED in status.err and SHOWN in status.err
    monkeypatch.setenv(ENV_VAR, UNREACHABLE)
    assert cli.main(["status", str(out)]) == 2
    from_env = capsys.readouterr()

    for text in (printed.out, printed.err, status.out, status.err, from_env.out, from_env.err):
        assert SECRET not in text
    assert files_holding(SECRET, out, report_dir) == []


@pytest.mark.slow
def test_a_sweep_on_an_unreachable_storage_shows_no_password(sweeps, tmp_path):
    out = tmp_path / "out"
    failed = sweeps.run(STUDY, out, "--storage", UNREACHABLE, timeout=120)
    assert failed.returncode == 2 and "Traceback" not in failed.stderr
    assert OPEN_FAILED in failed.stderr and SHOWN in failed.stderr
    assert SECRET not in failed.stdout + failed.stderr
    assert not out.exists() or files_holding(SECRET, out) == []


# ------------------------------------------------------------------------------------------------------ PostgreSQL
@pytest.mark.postgres
def test_status_and_report_read_a_postgresql_study_given_either_way(out, tmp_path, capsys, monkeypatch, postgres_url):
    """The study lives in PostgreSQL; study.json remembers its URL redacted. The URL is given as users write it
    (postgresql://, no driver), once through ABLATE_STORAGE and once through --storage."""
    import optuna

    name = f"secrets-{uuid.uuid4().hex[:10]}"
    plain = "postgresql://" + postgres_url.split("://", 1)[1]
    optuna.copy_study(
        from_study_name=OPTUNA_NAME, from_storage=_journal(out), to_storage=postgres_url, to_study_name=name
    )
    remember(out, redact(postgres_url), optuna_study=name)
    try:
        for given in (["--storage", plain], []):
            if not given:
                monkeypatch.setenv(ENV_VAR, plain)
            assert cli.main(["status", str(out), "--json", *given]) == 0
            states = {r["row"]: r["state"] for r in json.loads(capsys.readouterr().out)}
            assert states == {"ok1": "complete", "nan": "failed", "ok2": "complete"}
            report_dir = tmp_path / f"report{len(given)}"
            argv = ["report", str(out), *given, "--out", str(report_dir), "--no_plots", "--samples", "50", "--quiet"]
            assert cli.main(argv) == 0
            capsys.readouterr()
            md = next(report_dir.glob("*.md")).read_text(encoding="utf-8")
            assert "could not be opened" not in md and "keeps no password" not in md  # the storage was read
        monkeypatch.delenv(ENV_VAR)
        assert cli.main(["report", str(out), "--out", str(tmp_path / "bare"), "--no_plots", "--quiet"]) == 0
        assert "keeps no password" in next((tmp_path / "bare").glob("*.md")).read_text(encoding="utf-8")
    finally:
        optuna.delete_study(study_name=name, storage=postgres_url)


def _journal(out: Path):
    import optuna
    from optuna.storages.journal import JournalFileBackend

    return optuna.storages.JournalStorage(JournalFileBackend(str(out / "optuna.journal")))


@pytest.mark.postgres
@pytest.mark.slow
def test_a_two_worker_postgresql_sweep_writes_its_password_nowhere(sweeps, tmp_path):
    """A real sweep on a PostgreSQL role whose password is planted (.ci/run creates it): the password given on the
    command line, as the README shows, reaches no file under OUT (records, study.json, checkpoints, W&B runs, worker
    logs, the journal of nothing), no report format and no line the commands print."""
    url = os.environ.get("ABLATE_TEST_POSTGRES_SECRET_URL")
    if not url:
        pytest.skip("ABLATE_TEST_POSTGRES_SECRET_URL is not set (.ci/run creates a role with a planted password)")
    secret = url.split("://", 1)[1].split("@", 1)[0].split(":", 1)[1]
    assert len(secret) >= 12  # long enough that it cannot turn up in a file by chance
    out, name = tmp_path / "out", f"secret-{uuid.uuid4().hex[:8]}"
    try:
        swept = sweeps.run("sweep_split.yaml", out, "--workers", "2", "--storage", url, "--name", name)
        assert swept.returncode == 0, swept.stderr[-3000:]
        # One more seed, trained by the command's own process (one worker): W&B records that command line.
        more = sweeps.run("sweep_split.yaml", out, "--workers", "1", "--seeds", "3", "--storage", url, "--name", name)
        assert more.returncode == 0, more.stderr[-3000:]
        assert len(list((out / "records").glob("*__seed2.json"))) == 2
        report = sweeps_cli(sweeps, "report", str(out), "--storage", url, "--no_plots")
        status = sweeps_cli(sweeps, "status", str(out), env={ENV_VAR: url})
        assert report.returncode == 0 and status.returncode == 0, report.stderr + status.stderr
        assert "s1" in status.stdout and "complete" in status.stdout
        outputs = (swept, more, report, status)
        printed = "".join(o.stdout + o.stderr for o in outputs)
        assert secret not in printed
        assert list((out / "logs").glob("worker-*.log")) and list((out / "trials").rglob("*.wandb"))
        assert files_holding(secret, out) == []
        assert json.loads((out / "study.json").read_text())["storage"] == redact(url.replace("://", "+psycopg2://"))
    finally:
        import optuna
        from ablate.ablations.runtime.urls import with_driver

        optuna.delete_study(study_name=name, storage=with_driver(url))


def sweeps_cli(sweeps, *args: str, env: dict[str, str] | None = None):
    import subprocess
    import sys

    return subprocess.run(
        [sys.executable, "-m", "ablate.ablations.cli", *args],
        cwd=Path(__file__).resolve().parents[3], env={**sweeps.env, **(env or {})}, capture_output=True, text=True,
        timeout=300, check=False,
    )  # fmt: skip
