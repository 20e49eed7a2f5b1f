"""An output folder that is a file, or lies under one: one line naming it, exit 2, nothing written (the commands
made the folder first and met FileExistsError or NotADirectoryError, exit 1 with a traceback)."""

from __future__ import annotations

from pathlib import Path

import pytest
from ablate.ablations import cli

LANDED = Path(__file__).resolve().parents[2] / "reports" / "data" / "landed-smoke"


@pytest.mark.parametrize("under", [False, True], ids=["is-a-file", "under-a-file"])
@pytest.mark.parametrize(
    "command",
    [
        ["report", str(LANDED), "--format", "md", "--out"],
        ["train", "--preset", "smoke", "--train.max_steps", "2", "--out"],
    ],
    ids=["report", "train"],
)
def test_an_output_folder_that_is_a_file_is_one_line(tmp_path, capsys, monkeypatch, command, under):
    """Refused before any work: a report with nothing scored yet says nothing of scoring."""
    monkeypatch.setenv("ABLATE_CACHE", str(tmp_path.parent / f"{tmp_path.name}-cache"))
    blocker = tmp_path / "results.txt"
    blocker.write_text("mine\n")
    target = blocker / "run" if under else blocker
    assert cli.main([*command, str(target)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    in_the_way = f"the file {blocker} is" if under else "a file is"
    assert f"cannot make the folder {target}: {in_the_way} in its way" in err, err
    assert blocker.read_text() == "mine\n" and sorted(p.name for p in tmp_path.iterdir()) == ["results.txt"]
