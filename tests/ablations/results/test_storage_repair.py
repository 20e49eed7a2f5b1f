"""A torn Optuna journal (a worker killed mid-append) is repaired when a sweep opens it, never by a read.

The journals are written by real Optuna studies and opened through `ablations.results.storage`; the end-to-end tests run
a real sweep (tests/ablations/studies/sweep_rows.yaml) and then `ablate status` and `ablate sweep` on a copy of its
output directory whose journal was cut."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest
from ablate.ablations import cli
from ablate.ablations.results import ledger
from ablate.ablations.results.storage.opening import load_or_create, load_trials, open_existing, open_storage
from ablate.data.errors import AblateError

NAME = "torn"
STUDY = "sweep_rows.yaml"
OPTUNA_NAME = "sweep-rows-smoke"


# ------------------------------------------------------------------------------------------------------ journals
@pytest.fixture
def journal(tmp_path) -> Path:
    """A journal written by a plain Optuna study: four finished trials, each a few records long."""
    import optuna
    from optuna.storages.journal import JournalFileBackend

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    path = tmp_path / "optuna.journal"
    study = optuna.create_study(
        study_name=NAME, storage=optuna.storages.JournalStorage(JournalFileBackend(str(path))), direction="maximize"
    )
    for i in range(4):
        trial = study.ask()
        trial.set_user_attr("row", f"r{i}")
        study.tell(trial, float(i))
    return path


def lines_of(path: Path) -> list[bytes]:
    return path.read_bytes().splitlines(keepends=True)


def trials_read_by_optuna(path: Path) -> list:
    """The study's trials as plain Optuna reads the file (not through the code under test)."""
    import optuna
    from optuna.storages.journal import JournalFileBackend

    storage = optuna.storages.JournalStorage(JournalFileBackend(str(path)))
    return optuna.load_study(study_name=NAME, storage=storage).get_trials()


def torn_variants(whole: list[bytes]) -> dict[str, tuple[bytes, bytes]]:
    """How a journal ends torn -> (its bytes, the bytes the repair must cut). The body is every line but the last."""
    body, last = b"".join(whole[:-1]), whole[-1]
    half = last[: len(last) // 2]
    return {
        "last line cut in half": (body + half, half),
        # What a rerun before the repair existed left: its own append landed on the end of the torn line.
        "an append landed on the torn line": (body + half + last, half + last),
        "last line is not JSON": (body + b'{"op_code": 6, "trial\n', b'{"op_code": 6, "trial\n'),
    }


@pytest.mark.parametrize("how", ["last line cut in half", "an append landed on the torn line", "last line is not JSON"])
def test_a_torn_last_record_is_cut_kept_aside_and_the_study_goes_on(journal, capsys, how):
    whole = lines_of(journal)
    torn, cut = torn_variants(whole)[how]
    journal.write_bytes(torn)

    storage = open_storage(f"journal:{journal}")

    assert journal.read_bytes() == b"".join(whole[:-1])
    (side,) = journal.parent.glob("optuna.journal.torn-*")
    assert side.read_bytes() == cut
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and str(journal) in err and str(side) in err and f"{len(cut)} bytes" in err
    # The last trial's final record was the torn one: it is running again, as Optuna saw it before the cut.
    study = load_or_create(storage, NAME)
    assert [t.state.name for t in study.get_trials()] == ["COMPLETE"] * 3 + ["RUNNING"]

    trial = study.ask()
    study.tell(trial, 9.0)
    assert all(json.loads(line) and line.endswith(b"\n") for line in lines_of(journal))
    assert [t.value for t in trials_read_by_optuna(journal)] == [0.0, 1.0, 2.0, None, 9.0]


def test_a_whole_journal_is_left_alone(journal, capsys):
    before = journal.read_bytes()
    storage = open_storage(f"journal:{journal}")
    assert journal.read_bytes() == before and capsys.readouterr().err == ""
    assert len(load_or_create(storage, NAME).get_trials()) == 4
    assert sorted(p.name for p in journal.parent.iterdir()) == ["optuna.journal"]


def test_garbage_in_the_middle_names_the_byte_offset_and_the_way_out(journal, tmp_path):
    whole = lines_of(journal)
    journal.write_bytes(b"".join([*whole[:3], b"\x00\x00 garbage\n", *whole[3:]]))
    before = journal.read_bytes()
    offset = len(b"".join(whole[:3]))

    for open_it in (lambda: open_storage(f"journal:{journal}"), lambda: open_existing(f"journal:{journal}", tmp_path)):
        with pytest.raises(AblateError) as caught:
            open_it()
        message = str(caught.value)
        assert "\n" not in message and f"byte {offset}" in message and str(journal) in message
        assert f"mv {journal} {journal}.damaged" in message and "ablate sweep" in message and "records" in message
    assert journal.read_bytes() == before
    assert sorted(p.name for p in journal.parent.iterdir()) == ["optuna.journal"]


def test_a_read_only_open_of_a_torn_journal_changes_nothing(journal, tmp_path, capsys):
    whole = lines_of(journal)
    torn, _ = torn_variants(whole)["last line cut in half"]
    journal.write_bytes(torn)

    trials = load_trials(f"journal:{journal}", NAME, tmp_path)

    assert [t.state.name for t in trials] == ["COMPLETE"] * 3 + ["RUNNING"]  # Optuna skips the torn last line
    assert journal.read_bytes() == torn and capsys.readouterr().err == ""
    assert sorted(p.name for p in journal.parent.iterdir()) == ["optuna.journal"]


def test_the_repair_waits_for_a_worker_holding_optunas_journal_lock(journal):
    """Another worker in the middle of an append holds Optuna's lock: the repair must not cut its record."""
    from optuna.storages.journal import JournalFileSymlinkLock

    whole = lines_of(journal)
    torn, _ = torn_variants(whole)["last line cut in half"]
    journal.write_bytes(torn)
    lock = JournalFileSymlinkLock(str(journal))
    lock.acquire()
    opened = threading.Thread(target=open_storage, args=(f"journal:{journal}",))
    try:
        opened.start()
        time.sleep(0.5)
        assert opened.is_alive() and journal.read_bytes() == torn
    finally:
        lock.release()
    opened.join(timeout=30)
    assert not opened.is_alive() and journal.read_bytes() == b"".join(whole[:-1])


# ------------------------------------------------------------------------------------------- through the commands
@pytest.fixture
def out(finished_copy) -> Path:
    return finished_copy


def tear(journal: Path) -> bytes:
    """Cut the journal's last line in half, as a worker killed mid-append leaves it; returns the torn bytes."""
    whole = lines_of(journal)
    torn = b"".join(whole[:-1]) + whole[-1][: len(whole[-1]) // 2]
    journal.write_bytes(torn)
    return torn


@pytest.mark.slow
def test_status_reads_a_torn_journal_without_touching_it(out, capsys):
    torn = tear(out / "optuna.journal")
    assert cli.main(["status", str(out), "--json"]) == 0
    captured = capsys.readouterr()
    rows = {r["row"]: r["state"] for r in json.loads(captured.out)}
    assert rows["ok1"] == "complete" and rows["nan"] == "failed" and set(rows) == {"ok1", "nan", "ok2"}
    assert (out / "optuna.journal").read_bytes() == torn and not list(out.glob("optuna.journal.*"))
    assert "Traceback" not in captured.err


@pytest.mark.slow
def test_status_on_a_journal_damaged_in_the_middle_is_one_line_and_exit_2(out, capsys):
    journal = out / "optuna.journal"
    whole = lines_of(journal)
    journal.write_bytes(b"".join([*whole[:5], whole[5][:40], *whole[5:]]))  # a torn line an append landed after
    assert cli.main(["status", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    offset = len(b"".join(whole[:5]))
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert err.startswith("ablate status: error:") and f"byte {offset}" in err and f"mv {journal}" in err


@pytest.mark.slow
def test_a_sweep_rerun_on_a_torn_journal_repairs_it_and_trains_nothing(out, sweeps):
    torn = tear(out / "optuna.journal")
    records = {p.name: p.stat().st_mtime_ns for p in (out / "records").iterdir()}

    rerun = sweeps.run(STUDY, out)

    assert rerun.returncode == 0, rerun.stderr[-3000:]
    repaired = [line for line in rerun.stderr.splitlines() if "torn last record" in line]
    assert len(repaired) == 1 and "Traceback" not in rerun.stderr
    (side,) = out.glob("optuna.journal.torn-*")
    kept = torn[: len(torn) - len(side.read_bytes())]
    assert kept + side.read_bytes() == torn and (out / "optuna.journal").read_bytes().startswith(kept)
    assert not (out / "trials").exists()  # the trial whose last record was cut was closed from its record
    assert {p.name: p.stat().st_mtime_ns for p in (out / "records").iterdir()} == records
    states = {key: trial.state.name for key, trial in ledger.resolve(sweeps.trials(out, OPTUNA_NAME)).items()}
    assert states == {("ok1", 0): "COMPLETE", ("nan", 0): "FAIL", ("ok2", 0): "COMPLETE"}
