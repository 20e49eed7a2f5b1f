"""A sweep: what it runs (`Plan`), what it queues and when (`queueing`: every row x seed once, the sequential
design's looks), its live view and cost (`progress`), and a finished study as one archive (`archive`).

The worker's side, which trains, is imported where a process trains, not here (it brings torch and Lightning):
`worker` (the worker's loop), `trial` (one claimed trial, run or closed exactly once), `ranks` (how a DDP trial's other
ranks find it), `runner` (what every launcher shares), `tune` (calibrating a preset on the base row), `corpora` (a
study's corpus, checked and pinned)."""

from __future__ import annotations

__all__: list[str] = []  # no other package imports this face: each reaches the module it needs by its path
