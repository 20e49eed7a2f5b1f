"""Which trials a sequential sweep runs next, from where each row stands (`reports.sequential` judges that).

The sweep runner asks `policy` for the seeds each row should have; the statistics that say whether a row is decided,
open or out of reach stay in `reports.sequential`, which reads finished results. Nothing here imports reports.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Literal

State = Literal["decided", "open", "out_of_reach"]
"""Where a row stands after a look: every comparison decided, one still open (it gets a seed), or none open and one
that more seeds up to max_seeds would not settle."""


def policy(
    seeds: Mapping[str, int],
    states: Mapping[str, State],
    controls: Mapping[str, Sequence[str]],
    *,
    min_seeds: int,
    max_seeds: int,
) -> dict[str, int]:
    """The seeds each row should have after this look: `min_seeds` for a row not yet there, one more for an open row
    below `max_seeds`, its seeds for the others. A control (the base) starts at Dunnett's round(sqrt(k) min_seeds),
    k the rows compared with it that this sweep runs, and then keeps round(sqrt(k_open) n) for the k_open rows still
    open at n seeds: the comparisons still being tested are the ones its extra seeds serve. It never loses seeds."""
    target = {}
    for row, n in seeds.items():
        if row in controls:
            continue
        grow = states.get(row) == "open" and min_seeds <= n < max_seeds
        target[row] = max(n, min_seeds) + (1 if grow else 0)
    for control, compared in controls.items():
        ran = [r for r in compared if r in target]
        still = [target[r] for r in ran if states.get(r, "open") == "open"]
        share = round(math.sqrt(len(still)) * max(still)) if still else 0
        start = round(math.sqrt(max(len(ran), 1)) * min_seeds)
        target[control] = max(seeds.get(control, 0), start, share)
    return target


__all__ = ["State", "policy"]
