"""What a training step costs the host, counted where a CPU can count it: the operators a step dispatches, how many
of them would launch a CUDA kernel, and how many read a value back to the host (a sync on a card, which drains the
queue of launched kernels), over whole steps through the Lightning Trainer (its loop, logging and the next batch's
fetch included).

The step runs on the card's path on any device (`ABLATE_CARD=measured`, bf16 autocast, as `auto` resolves them on
a card) and the counts are the card's: a launched operator is a kernel there, an autocast cast is one more kernel,
and `_local_scalar_dense` (`item()`, `float()`, `bool()` of a tensor) or a data-dependent shape (`nonzero`) is a
host sync. Counted below autograd (a `TorchDispatchMode`, which the autograd engine carries into backward), so the
backward pass and the fused optimizer are counted too.
"""

from __future__ import annotations

import os
import statistics
from collections import Counter
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

import pytorch_lightning as pl
from ablate.benchmarks.timing import fit_through_lightning
from torch.utils._python_dispatch import TorchDispatchMode

SYNCS = frozenset({"_local_scalar_dense", "is_nonzero", "nonzero", "masked_select", "unique", "_unique2", "equal"})
"""Operators that read a device value into Python or size a result by the data: a host sync on a card."""
NO_KERNEL = frozenset(
    {
        "view", "_unsafe_view", "reshape", "t", "transpose", "permute", "expand", "squeeze", "unsqueeze", "select",
        "slice", "as_strided", "alias", "detach", "split", "split_with_sizes", "unbind", "chunk", "narrow",
        "empty", "empty_like", "empty_strided", "lift_fresh", "_reshape_alias", "view_as", "diagonal", "unfold",
        "set", "_has_compatible_shallow_copy_type", "is_same_size", "sym_size", "sym_stride", "sym_numel",
    }
)  # fmt: skip
"""Operators that change a tensor's view or allocate, and launch nothing."""


class Counting(TorchDispatchMode):
    """Counts every operator dispatched inside, by name."""

    def __init__(self) -> None:
        super().__init__()
        self.ops: Counter[str] = Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops[func.overloadpacket.__name__.rstrip("_") or func.overloadpacket.__name__] += 1
        return func(*args, **(kwargs or {}))


def step_counts(ops: Counter[str]) -> dict[str, int]:
    """One step's operators: dispatched, kernels (on a card), autocast casts, host syncs."""
    return {
        "ops": sum(ops.values()),
        "kernels": sum(n for name, n in ops.items() if name not in NO_KERNEL),
        "casts": ops.get("_to_copy", 0),
        "syncs": sum(n for name, n in ops.items() if name in SYNCS),
    }


def _step_window(windows: list[Counter[str]]) -> Any:
    """A Lightning callback that counts each step, from one batch's start to the next's, into `windows` (made here:
    this module imports no Lightning at its top)."""

    class StepWindow(pl.Callback):
        mode: Counting | None = None

        def on_train_batch_start(self, *args: Any) -> None:
            self._close()
            self.mode = Counting()
            self.mode.__enter__()

        def on_train_end(self, *args: Any) -> None:
            self._close()

        def _close(self) -> None:
            if self.mode is not None:
                self.mode.__exit__(None, None, None)
                windows.append(self.mode.ops)
                self.mode = None

    return StepWindow()


@contextmanager
def _card_path() -> Any:
    """`auto` resolved as a card resolves it, on any device (lightning_modules/card.py)."""
    before = os.environ.get("ABLATE_CARD")
    os.environ["ABLATE_CARD"] = "measured"
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("ABLATE_CARD", None)
        else:
            os.environ["ABLATE_CARD"] = before


def host_costs(run, steps: int = 12, precision: str = "bf16-mixed", accelerator: str = "cpu") -> dict[str, Any]:
    """Each of `steps` whole steps of `run` through the Lightning Trainer, counted from one batch's start to the
    next's; the first step (Lightning registers its metrics, the loss watch takes its yardstick) is left out of the
    medians. Returns the medians, the most syncs any later step made (with the logging interval, at which the loggers
    read their metrics by design) and the syncing operators by name."""
    windows: list[Counter[str]] = []
    train = replace(run.train, max_steps=steps, compile=False)
    if run.model.kernels == "cpu":  # a CPU's choice (`config.on_cpu`): the card's are what `auto` gives there
        run = replace(run, model=replace(run.model, kernels="auto"))
    with _card_path():
        fit_through_lightning(replace(run, train=train), accelerator, precision, [_step_window(windows)])
    counts = [step_counts(w) for w in windows[1:]]
    syncing: Counter[str] = Counter()
    for w in windows[1:]:
        syncing.update({name: n for name, n in w.items() if name in SYNCS})
    return {
        "path": f"the card's defaults (ABLATE_CARD=measured), {precision}, through Lightning on {accelerator}",
        "steps": len(counts),
        **{f"{k}_per_step": statistics.median(c[k] for c in counts) for k in ("ops", "kernels", "casts", "syncs")},
        "most_syncs_in_a_step": max((c["syncs"] for c in counts), default=0),
        "log_every": run.tracking.log_every,
        "sync_ops": dict(syncing),
    }


__all__ = ["NO_KERNEL", "SYNCS", "Counting", "host_costs", "step_counts"]
