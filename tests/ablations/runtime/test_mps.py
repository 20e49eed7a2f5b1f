"""CUDA MPS for local workers that share a card (`ablations/runtime/mps.py`): started only when workers outnumber the
cards, the workers pointed at it, stopped when they are done (also when the sweep stops on an error), or one line saying
why not. The lifecycle runs against a stand-in control program (a shell script that keeps a log of its calls and of the
environment it got); the real daemon is tested on a GPU."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest
from ablate.ablations.runtime import mps


def stand_in(tmp_path: Path, fail_start: bool = False) -> tuple[Path, Path]:
    """A control program that appends '<args> pipe=<CUDA_MPS_PIPE_DIRECTORY> stdin=<its input>' to a log."""
    log = tmp_path / "calls.log"
    program = tmp_path / "nvidia-cuda-mps-control"
    exit_code = 'if [ "$1" = "-d" ]; then echo "cannot open /dev/nvidiactl" >&2; exit 3; fi' if fail_start else ""
    program.write_text(
        "#!/bin/sh\n"
        f'input=""; if [ "$1" != "-d" ]; then input=$(cat); fi\n'
        f'echo "args=$* pipe=$CUDA_MPS_PIPE_DIRECTORY stdin=$input" >> {log}\n'
        f"{exit_code}\n"
    )
    program.chmod(program.stat().st_mode | stat.S_IEXEC)
    return program, log


PROBE_OK = ["true"]
"""A client that reaches a GPU (there is none here: the stand-in daemon serves nothing)."""


def test_no_daemon_when_every_worker_has_a_card_of_its_own(tmp_path, capsys):
    program, log = stand_in(tmp_path)
    for workers, gpus in ((4, []), (1, ["0"]), (2, ["0", "1"])):
        with mps.for_workers(workers, gpus, str(program), PROBE_OK) as env:
            assert env == {}
    assert not log.exists() and capsys.readouterr().err == ""


def test_workers_sharing_a_card_get_a_daemon_of_their_own_stopped_after(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("CUDA_MPS_PIPE_DIRECTORY", raising=False)
    monkeypatch.delenv(mps.OFF_SWITCH, raising=False)
    program, log = stand_in(tmp_path)
    with mps.for_workers(8, ["0"], str(program), PROBE_OK) as env:
        pipe = Path(env["CUDA_MPS_PIPE_DIRECTORY"])
        assert pipe.is_dir() and Path(env["CUDA_MPS_LOG_DIRECTORY"]).is_dir()
        # a worker started with this environment reaches the same daemon
        seen = subprocess.run(
            ["sh", "-c", "echo $CUDA_MPS_PIPE_DIRECTORY"], env={**os.environ, **env}, text=True, capture_output=True
        ).stdout.strip()
        assert seen == str(pipe)
        assert log.read_text().splitlines() == [f"args=-d pipe={pipe} stdin="]
    assert log.read_text().splitlines()[1] == f"args= pipe={pipe} stdin=quit"
    assert not pipe.parent.exists(), "the daemon's temporary folder is removed"
    assert "8 workers share 1 GPU(s) through CUDA MPS" in capsys.readouterr().err


def test_the_daemon_stops_when_the_sweep_stops_on_an_error(tmp_path, monkeypatch):
    monkeypatch.delenv("CUDA_MPS_PIPE_DIRECTORY", raising=False)
    monkeypatch.delenv(mps.OFF_SWITCH, raising=False)
    program, log = stand_in(tmp_path)
    with pytest.raises(KeyboardInterrupt), mps.for_workers(3, ["0"], str(program), PROBE_OK):
        raise KeyboardInterrupt
    assert [line.split()[0] for line in log.read_text().splitlines()] == ["args=-d", "args="]


def test_why_not_in_one_line(tmp_path, capsys, monkeypatch):
    """No control program, a daemon that does not start, the off switch, a daemon already serving the machine:
    the workers share the card in turns (no environment), and one line says why."""
    monkeypatch.delenv("CUDA_MPS_PIPE_DIRECTORY", raising=False)
    monkeypatch.delenv(mps.OFF_SWITCH, raising=False)
    with mps.for_workers(4, ["0"], str(tmp_path / "no-such-program")) as env:
        assert env == {}
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "share 1 GPU(s) in turns: CUDA MPS is not installed" in err

    program, log = stand_in(tmp_path, fail_start=True)
    with mps.for_workers(4, ["0"], str(program), PROBE_OK) as env:
        assert env == {}
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "exited 3: cannot open /dev/nvidiactl" in err
    assert len(log.read_text().splitlines()) == 1, "a daemon that never started is not asked to quit"

    monkeypatch.setenv(mps.OFF_SWITCH, "0")
    with mps.for_workers(4, ["0"], str(program), PROBE_OK) as env:
        assert env == {}
    assert "MPS is off (ABLATE_MPS=0)" in capsys.readouterr().err
    monkeypatch.delenv(mps.OFF_SWITCH)

    monkeypatch.setenv("CUDA_MPS_PIPE_DIRECTORY", str(tmp_path / "theirs"))
    with mps.for_workers(4, ["0"], str(program), PROBE_OK) as env:
        assert env == {}
    assert "through the running MPS daemon" in capsys.readouterr().err
    assert len(log.read_text().splitlines()) == 1, "a daemon already there is neither started nor stopped"


@pytest.mark.gpu
def test_the_real_daemon_starts_serves_and_stops(monkeypatch):
    if shutil.which(mps.CONTROL) is None:
        pytest.skip(f"{mps.CONTROL} not installed")
    monkeypatch.delenv("CUDA_MPS_PIPE_DIRECTORY", raising=False)
    with mps.for_workers(2, ["0"]) as env:
        assert env, "the daemon started"
        probe = "import torch; x = torch.ones(4, device='cuda'); print(float(x.sum()))"
        out = subprocess.run(["python", "-c", probe], env={**os.environ, **env}, capture_output=True, text=True)
        assert out.stdout.strip() == "4.0", out.stderr
        servers = subprocess.run(
            [mps.CONTROL], input="get_server_list\n", env={**os.environ, **env}, capture_output=True, text=True
        )
        assert servers.stdout.strip(), "a client's first CUDA call started an MPS server"
    pipe = Path(env["CUDA_MPS_PIPE_DIRECTORY"])
    assert not pipe.exists()


def test_a_daemon_whose_server_serves_no_client_is_stopped_and_said_in_one_line(tmp_path, capsys, monkeypatch):
    """`-d` answers even where the server cannot start: a client must reach a GPU through it before the workers go
    on it. (Here none can: the default probe, CUDA from torch, finds no GPU on this machine.)"""
    monkeypatch.delenv("CUDA_MPS_PIPE_DIRECTORY", raising=False)
    monkeypatch.delenv(mps.OFF_SWITCH, raising=False)
    program, log = stand_in(tmp_path)
    with mps.for_workers(4, ["0"], str(program)) as env:
        assert env == {}
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert "share the GPU in turns: the MPS server did not serve a client: no GPU through the MPS daemon" in err
    assert [line.split()[0] for line in log.read_text().splitlines()][:2] == ["args=-d", "args="]  # started, quit


def test_a_worker_on_the_daemon_that_sees_no_gpu_stops_in_one_line(monkeypatch):
    from ablate.data.errors import AblateError

    monkeypatch.setenv(mps.WORKER_MARK, "1")
    monkeypatch.setenv("CUDA_MPS_PIPE_DIRECTORY", "/tmp/ablate-mps-x/pipe")
    with pytest.raises(AblateError, match="sees no GPU through it: rerun with ABLATE_MPS=0"):
        mps.check_worker()
    monkeypatch.delenv(mps.WORKER_MARK)
    mps.check_worker()  # a worker not on a daemon of ours trains wherever its accelerator says


def test_a_coordinator_killed_outright_leaves_no_daemon(tmp_path):
    """SIGKILL runs no `finally`: the watcher the daemon was started with stops it and removes its folder."""
    import signal
    import sys
    import time

    program, log = stand_in(tmp_path)
    code = (
        "import sys, time\n"
        "from ablate.ablations.runtime import mps\n"
        f"with mps.for_workers(4, ['0'], {str(program)!r}, ['true']) as env:\n"
        "    print(env['CUDA_MPS_PIPE_DIRECTORY'], flush=True)\n"
        "    time.sleep(600)\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("CUDA_MPS_PIPE_DIRECTORY", mps.OFF_SWITCH)}
    coordinator = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, env=env)
    assert coordinator.stdout is not None
    pipe = Path(coordinator.stdout.readline().strip())
    assert pipe.is_dir()
    coordinator.send_signal(signal.SIGKILL)
    coordinator.wait()
    deadline = time.time() + 20
    while time.time() < deadline and (pipe.parent.exists() or "stdin=quit" not in log.read_text()):
        time.sleep(0.2)
    assert log.read_text().splitlines()[-1] == f"args= pipe={pipe} stdin=quit"
    assert not pipe.parent.exists(), "the daemon's folder is removed"
