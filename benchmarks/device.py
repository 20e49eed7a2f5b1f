"""The device under a benchmark: which one, at what precision, its peak FLOP/s, and synchronisation for timing."""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any, Literal

import torch
from ablate.ablations.runtime.environment import cpu_model
from ablate.data.errors import AblateError
from ablate.lightning_modules.config import resolve_precision as precision_for

if TYPE_CHECKING:
    from ablate.lightning_modules.config import Precision

PEAK_BF16_FLOPS: list[tuple[str, float]] = [
    ("H100 PCIe", 756e12),
    ("H100", 989e12),
    ("H200", 989e12),
    ("GH200", 989e12),
    ("A100", 312e12),
    ("L40S", 362e12),
    ("A10G", 70e12),
    ("L4", 121e12),
]
"""Dense bf16 tensor-core peak FLOP/s by device-name substring (first match wins; vendor data sheets)."""


def resolve_device(name: str):
    if name == "cuda" and not torch.cuda.is_available():
        raise AblateError("--device cuda: no CUDA device is visible (torch.cuda.is_available() is False)")
    return torch.device("cuda" if name == "cuda" or (name == "auto" and torch.cuda.is_available()) else "cpu")


def resolve_precision(precision: Literal["auto"] | Precision, device: torch.device) -> Precision:
    """The bench's precision on `device`, by training's rule (`lightning_modules.config.resolve_precision`)."""
    return precision_for(precision, cuda_bf16=device.type == "cuda" and torch.cuda.is_bf16_supported())


def autocast(device, precision: str):
    if precision == "bf16-mixed":
        return torch.autocast(device.type, dtype=torch.bfloat16)
    return contextlib.nullcontext()


def synchronize(device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def device_info(device) -> dict[str, Any]:
    """Name, threads and peak bf16 FLOP/s (None where unknown: CPUs and unlisted GPUs)."""
    if device.type == "cuda":
        name = torch.cuda.get_device_name(device)
        peak = next((flops for key, flops in PEAK_BF16_FLOPS if key in name), None)
        return {"type": "cuda", "name": name, "peak_bf16_flops": peak, "torch": torch.__version__}

    return {
        "type": "cpu",
        "name": cpu_model() or "unknown CPU",
        "threads": torch.get_num_threads(),
        "peak_bf16_flops": None,
        "torch": torch.__version__,
    }
