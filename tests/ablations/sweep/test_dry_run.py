"""`ablate sweep --dry_run` on this machine: the plan before any compute (rows, seeds, parameters, what each row
changes at this preset, the claims it tests, the cost), and nothing written."""

from __future__ import annotations

from ablate.ablations import cli


def test_a_dry_run_prints_the_plan_and_writes_nothing(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "study"
    assert cli.main(["sweep", "table3", "--preset", "tiny", "--out", str(out), "--dry_run"]) == 0
    printed = capsys.readouterr().out.splitlines()
    assert printed[0] == "ablate sweep table3 at preset tiny: 21 rows, sequential design, 2 to 4 seeds a row (dry run)"
    rows = {line.split()[0]: line for line in printed[2:23]}
    assert len(rows) == 21 and rows["base"].split()[2] == "7-15" and rows["A2"].split()[2] == "1"
    assert rows["B1"].endswith("d_k=2")  # the preset's size (d_model 64, h 8: d_k 8 -> 2), not the paper's 16
    assert "train.max_steps=8400" in rows["big"]
    assert any(line.startswith("  claims tested: A-single-head") for line in printed)
    assert any(line.startswith("  cost: 41 trials") for line in printed)
    assert not out.exists() and list(tmp_path.iterdir()) == []

    assert cli.main(["sweep", "table3", "--preset", "smoke", "--seeds", "2", "--rows", "base,B1", "--dry_run",
                     "--out", str(out)]) == 0  # fmt: skip
    printed = capsys.readouterr().out.splitlines()
    assert printed[0].endswith("2 rows, fixed design, 2 seed(s) a row (dry run)") and not out.exists()


def test_more_workers_than_cores_is_said_in_one_line_with_the_count_to_use_and_the_plan_states_its_threads(
    tmp_path, capsys
):
    """`--workers 3` on a 2-core machine got no word, and its trials' threads ran 20-50x slower: one warning line
    names the cores and the count to use, and the dry run states the workers and the threads each gets."""
    from ablate.ablations.runtime.environment import cpu_cores

    cores = cpu_cores()
    argv = ["sweep", "table3", "--preset", "smoke", "--out", str(tmp_path / "study"), "--dry_run"]
    assert cli.main([*argv, "--workers", str(cores + 1)]) == 0
    printed = capsys.readouterr()
    assert printed.err.splitlines() == [
        f"ablate sweep: warning: --workers {cores + 1} on this machine's {cores} core(s): {cores + 1} trials' threads "
        f"share {cores} cores and run far slower than one per core; use --workers {cores}"
    ]
    assert f"  workers: {cores + 1} here, 1 thread each, on this machine's {cores} core(s)" in printed.out.splitlines()
    assert cli.main(argv) == 0  # the default: one worker a core, each on its share of them
    printed = capsys.readouterr()
    assert "warning" not in printed.err
    workers = min(cores, 41)  # a worker a core, at most one a trial (41 at the first look)
    threads = "1 thread" if workers > 1 else None
    line = next(line for line in printed.out.splitlines() if line.startswith("  workers: "))
    assert line.startswith(f"  workers: {workers} here, ") and (threads is None or threads in line), line
