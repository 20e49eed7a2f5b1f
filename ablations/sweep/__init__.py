"""A sweep: what it runs (`Plan`), what it queues and when (`queueing`: every row x seed once, the sequential
design's looks), its live view and cost (`progress`), and a finished study as one archive (`archive`).

The worker's side, which trains, is imported where a process trains, not here (it brings torch and Lightning):
`worker` (the worker's loop), `trial` (one claimed trial, run or closed exactly once), `ranks` (how a DDP trial's other
ranks find it), `runner` (what every launcher shares), `tune` (calibrating a preset on the base row), `corpora` (a
study's corpus, checked and pinned)."""

from __future__ import annotations

from ablate.ablations.sweep.archive import (  # noqa: F401 - the public face
    pack,
    rebuild_storage,
)
from ablate.ablations.sweep.plan import (  # noqa: F401 - the public face
    Plan,
)
from ablate.ablations.sweep.progress import (  # noqa: F401 - the public face
    Eta,
    RowStatus,
    Work,
    collect,
    cost_line,
    render,
    summary_line,
)
from ablate.ablations.sweep.queueing import (  # noqa: F401 - the public face
    current_keys,
    describe_decision,
    enqueue,
    look,
    look_and_enqueue,
    sync_records,
)

__all__ = [
    "Eta",
    "Plan",
    "RowStatus",
    "Work",
    "collect",
    "cost_line",
    "current_keys",
    "describe_decision",
    "enqueue",
    "look",
    "look_and_enqueue",
    "pack",
    "rebuild_storage",
    "render",
    "summary_line",
    "sync_records",
]
