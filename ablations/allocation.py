"""Which trials a sequential sweep runs next, from where each row stands (`reports.sequential` judges that).

The sweep runner asks `policy` for the seeds each row should have; the statistics that say whether a row is decided,
open or out of reach stay in `reports.sequential`, which reads finished results. Nothing here imports reports.
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
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
    below `max_seeds`, its seeds for the others; a row that no control is compared with (where some are: a row no
    claim tests, `Plan.controls`) one seed, a cell of the table like the paper's own single runs. A control (the
    base) starts at Dunnett's round(sqrt(k) min_seeds), k the rows compared with it that this sweep runs, and then
    keeps round(sqrt(k_open) n) for the k_open rows still open at n seeds: the comparisons still being tested are the
    ones its extra seeds serve (n from the tested rows: a compared row that is a control itself counts in k only). It
    never loses seeds."""
    tested = {r for compared in controls.values() for r in compared}
    target = {}
    for row, n in seeds.items():
        if row in controls:
            continue
        if tested and row not in tested:  # in the table to be read, as the paper's single runs: no test to feed
            target[row] = max(n, 1)
            continue
        grow = states.get(row) == "open" and min_seeds <= n < max_seeds
        target[row] = max(n, min_seeds) + (1 if grow else 0)
    for control, compared in controls.items():
        ran = [r for r in compared if r in seeds]
        still = [r for r in ran if states.get(r, "open") == "open"]
        # A compared row that is a control itself (modern's base, tested against E1 for the RoPE claim) counts among
        # the k comparisons, but its seeds are its own share, not what a tested row has: they must not set n.
        n = max((target[r] for r in still if r not in controls), default=0)
        if still and not n:  # only other controls still open: the seed an open row would get
            n = min(max(seeds.get(control, 0), min_seeds) + 1, max_seeds)
        share = round(math.sqrt(len(still)) * n)
        start = round(math.sqrt(max(len(ran), 1)) * min_seeds)
        target[control] = max(seeds.get(control, 0), start, share)
    return target


def controls_of(
    comparisons: Iterable[tuple[str, str | None]], base: str | None, rows: Sequence[str]
) -> dict[str, list[str]]:
    """Control row -> the rows of `rows` tested against it, from the claims' comparisons as (row, against) pairs:
    each names its reference row, the base where `against` is None. Without comparisons, the base with every other
    row. Only controls among `rows`, the base first. What `Plan.controls` (a sweep) and `ablate replay` (a
    study.json) both use: the control's sqrt(k) share serves the k comparisons made against it."""
    pairs = list(comparisons)
    ran_base = base if base in rows else None
    if not pairs:
        return {ran_base: [r for r in rows if r != ran_base]} if ran_base is not None else {}
    tested: dict[str, set[str]] = {ran_base: set()} if ran_base is not None else {}
    for row, against in pairs:
        control = against or base
        if control is not None:
            tested.setdefault(control, set()).add(row)
    return {c: [r for r in rows if r in compared] for c, compared in tested.items() if c in rows}


@dataclass(frozen=True)
class Decision:
    """What a sequential sweep runs now, from the looks over its finished trials (`reports.sequential.judge`)."""

    seeds: dict[str, list[int]]
    """Row -> the seeds it should have now: the finished ones the looks read and the ones the next look waits on."""
    states: dict[str, State] = field(default_factory=dict)
    """Row -> where it stood at its last look (rows not looked at yet are missing)."""
    why: dict[str, str] = field(default_factory=dict)
    """Row -> why it stopped or goes on, in words."""
    looks: int = 0
    """Looks taken so far."""
    finished: bool = False
    """No row is open: nothing beyond `seeds` will be asked for."""
    controls: tuple[str, ...] = ()
    """The control rows (the base): they keep their share of the open rows' seeds and are not judged themselves."""


JUDGE = "ablate.reports.sequential:judge"
"""Where the statistics that judge a look live. The runner reaches them by name, as `ablate report` is reached from
ablations/cli.py: the statistics stay in reports, which may import this layer and not the other way round."""


@dataclass(frozen=True)
class Sequential:
    """A study's sequential allocation as a sweep runs it (`Study.allocation`)."""

    min_seeds: int
    max_seeds: int
    design: Literal["spending", "confseq"] = "spending"
    judge: str = JUDGE
    """'module:function' called as judge(out, rows, controls, min_seeds=, max_seeds=, design=) -> Decision."""

    def decide(self, out: Path, rows: Sequence[str], controls: Mapping[str, Sequence[str]]) -> Decision:
        """The looks over OUT's records, taken again from the first: see `reports.sequential.walk`."""
        module, _, name = self.judge.partition(":")
        judge: Callable[..., Decision] = getattr(importlib.import_module(module), name)
        return judge(out, list(rows), controls, min_seeds=self.min_seeds, max_seeds=self.max_seeds, design=self.design)

    def most_seeds(self, compared: int) -> int:
        """The most seeds a control of `compared` rows can be asked for (its sqrt(k) share of max_seeds)."""
        return max(self.max_seeds, round(math.sqrt(max(compared, 1)) * self.max_seeds))


__all__ = ["Decision", "JUDGE", "Sequential", "State", "controls_of", "policy"]
