"""A sequential sweep whose looks the test chooses: `python sequential_judge.py STUDY OUT [sweep options]` runs `ablate
sweep` in this process with one worker, the real queue, storage and training, and `judge` below in place of the
statistics (`ablations.results.evidence.decide`, which smoke-sized rows could not move). The looks follow the real
policy; a row is open until it has OPEN_UNTIL[row] finished seeds, then decided.

SEQ_OPEN_UNTIL=ROW:N,...: OPEN_UNTIL for this run instead.
SEQ_KILL_AT=ROW:SEED: the process SIGKILLs itself at the look that first asks for that seed, after the look and
before anything is queued (a marker file in OUT keeps it to the first time)."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

OPEN_UNTIL = {"C1": 3}


def judge(allocation, results, rows, controls):
    from ablate.ablations.statistics.sequential import Decision, policy

    min_seeds, max_seeds = allocation.min_seeds, allocation.max_seeds

    done = {key: s.record for key, s in (results.status.items() if results is not None else ())}
    finished = {r: sorted(seed for (row, seed), rec in done.items() if row == r and rec is not None and
                          rec.state == "complete") for r in rows}  # fmt: skip
    compared = {r for rs in controls.values() for r in rs}
    spec = os.environ.get("SEQ_OPEN_UNTIL", "")
    open_until = {r: int(n) for r, n in (p.split(":") for p in spec.split(","))} if spec else OPEN_UNTIL
    seeds, states, looks = dict.fromkeys(rows, 0), {}, 0
    while True:
        target = policy(seeds, states, controls, min_seeds=min_seeds, max_seeds=max_seeds)
        if target == seeds or any(n > len(finished[r]) for r, n in target.items()):
            break
        seeds, looks = target, looks + 1
        states = {r: "open" if seeds[r] < open_until.get(r, 0) else "decided" for r in compared}
    kill = os.environ.get("SEQ_KILL_AT", "")
    if kill and results is not None:
        row, seed = kill.split(":")
        marker = Path(results.out_dir) / "killed-at-look"
        if target.get(row, 0) > int(seed) and not marker.exists():
            marker.write_text(f"look {looks}\n")
            os.kill(os.getpid(), signal.SIGKILL)
    return Decision(seeds={r: list(range(n)) for r, n in target.items()}, states=states, looks=looks,
                    finished=target == seeds, controls=tuple(controls))  # fmt: skip


def main(argv: list[str]) -> int:
    from ablate.ablations.commands.options import parse
    from ablate.ablations.commands.sweep import build_parser, make_plan
    from ablate.ablations.launchers.local import coordinate

    plan = make_plan(parse(build_parser(), argv))
    assert plan.allocation is not None
    plan.decide = judge
    from ablate.ablations.sweep.runner import print_next_steps

    coordinate(plan, 1)
    print_next_steps(plan, 0.0)  # the sweep's last lines, as `ablate sweep` prints them
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    raise SystemExit(main(sys.argv[1:]))
