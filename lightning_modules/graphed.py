"""The training step a card replays (`train.replay_step`): forward, loss, backward and Adam recorded as one CUDA graph
per batch shape, on eager kernels, and replayed every step. A speed trick for one device, kept out of the model code.

Why: a tiny model's step is about 750 kernel launches (`ablate bench`'s host counts), each a few microseconds of host
work the card waits on; replayed, the step is one launch. What makes the step replayable:
- its inputs are copied into fixed buffers (one set per batch shape: `data.buckets` gives a handful);
- the learning rate is a device tensor the schedule fills (`fill_`, no host read) and Adam is capturable and fused,
  so the update reads it inside the graph;
- the gradients are zeroed in place, never set to None, so backward writes into the same memory every replay;
- nothing in it reads a value back to the host (the loss watch and the logs read the step's outputs afterwards);
- under bf16 autocast the graph is recorded with autocast's weight cache off, as PyTorch requires.

The first batch of each shape trains eagerly (on a side stream: the warm-up a capture needs, and a real step), then
its graph is recorded, which runs nothing; every later batch of that shape replays it. A graph holds the addresses
of the weights, the gradients and Adam's state: `ReplayedStep` is made anew for each fit (a resume, the T/2 branch),
so graphs are recorded again after a checkpoint is loaded.

On a CPU the same step runs without a graph, through the same buffers: the tests check it against the ordinary step.
This follows PyTorch's whole-network capture (the CUDA graphs notes: "Whole-network capture") and NeMo's CUDA-graph
callback, without their stream and DDP machinery: one device, no accumulation.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from torch import Tensor

Body = Callable[[dict[str, Tensor]], dict[str, Tensor]]


class ReplayFailed(RuntimeError):
    """Recording the step as a CUDA graph failed (something in it reads a value back to the host, say)."""


@dataclass
class _Shape:
    inputs: dict[str, Tensor]
    graph: torch.cuda.CUDAGraph | None = None
    outputs: dict[str, Tensor] = field(default_factory=dict)


class ReplayedStep:
    """Runs `body` (forward, loss, backward and the optimizer's step on a dict of input tensors; returns the step's
    output tensors) once per batch: recorded per batch shape and replayed on CUDA (`record`), eagerly elsewhere."""

    def __init__(self, body: Body, optimizer: torch.optim.Optimizer, record: bool) -> None:
        self.body, self.optimizer, self.record = body, optimizer, record
        self.shapes: dict[tuple, _Shape] = {}
        self.recorded = 0
        """How many graphs this fit recorded."""

    def __call__(self, batch: dict[str, Tensor]) -> dict[str, Tensor]:
        tensors = {k: v for k, v in batch.items() if isinstance(v, Tensor)}
        key = tuple((k, tuple(v.shape), v.dtype) for k, v in sorted(tensors.items()))
        shape = self.shapes.get(key)
        if shape is None:
            shape = self.shapes[key] = _Shape({k: v.clone() for k, v in tensors.items()})
            return self._first(shape)
        for name, buffer in shape.inputs.items():
            buffer.copy_(tensors[name], non_blocking=True)
        if shape.graph is None:  # a CPU: the same step, no graph
            return self._step(shape.inputs)
        shape.graph.replay()
        return shape.outputs

    def _step(self, inputs: dict[str, Tensor]) -> dict[str, Tensor]:
        self.optimizer.zero_grad(set_to_none=False)  # in place: a graph's backward writes into the same gradients
        return self.body(inputs)

    def _first(self, shape: _Shape) -> dict[str, Tensor]:
        """The first batch of a shape: a real step, eagerly; on CUDA then its graph, recorded (which runs nothing)."""
        if not self.record:
            return self._step(shape.inputs)
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            outputs = self._step(shape.inputs)
        torch.cuda.current_stream().wait_stream(side)
        shape.graph = torch.cuda.CUDAGraph()
        try:
            with torch.cuda.graph(shape.graph), _autocast_uncached():
                shape.outputs = self._step(shape.inputs)
        except Exception as err:  # noqa: BLE001 - any failure to record: one line naming the switch
            raise ReplayFailed(f"recording the training step as a CUDA graph failed ({_first_line(err)})") from err
        self.recorded += 1
        return {k: v.clone() for k, v in outputs.items()}  # the eager outputs' memory is the side stream's


def _autocast_uncached():
    """Autocast as it is, with its weight cache off: a cast cached inside a capture would outlive its graph."""
    if torch.is_autocast_enabled("cuda"):
        return torch.autocast("cuda", dtype=torch.get_autocast_dtype("cuda"), cache_enabled=False)
    return torch.autocast("cuda", enabled=False)


def _first_line(err: BaseException) -> str:
    text = " ".join(str(err).split()) or type(err).__name__
    return text[:200]


def capturable_adam(params, betas: tuple[float, float], eps: float, fused: bool | None) -> torch.optim.Adam:
    """Adam whose learning rate is a device tensor read inside the step (fused; capturable, so its step counts stay
    on the device too). `initial_lr` is a float, so the schedule computes floats and fills the device tensor with
    them (`LambdaLR` writes a tensor learning rate with `fill_`: no host read)."""
    params = list(params)
    device = params[0].device
    opt = torch.optim.Adam(
        params, lr=torch.tensor(1.0, device=device), betas=betas, eps=eps, fused=fused, capturable=True
    )
    for group in opt.param_groups:
        group["initial_lr"] = 1.0
    return opt


def set_lr(group: dict, value: float, device: torch.device) -> None:
    """Set a group's learning rate: a float, or a tensor on `device` (a checkpoint's load may have left the tensor it
    saved on another device; graphs are recorded again after a load anyway)."""
    if not isinstance(group["lr"], Tensor):
        group["lr"] = value
    elif group["lr"].device != device:
        group["lr"] = torch.tensor(value, device=device)
    else:
        group["lr"].fill_(value)


__all__ = ["ReplayFailed", "ReplayedStep", "capturable_adam", "set_lr"]
