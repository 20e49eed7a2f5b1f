"""What a study's trials ran on, from their records: the device, the torch version and the kernel set (the CPU's
vector extension torch chose), as the report's method note lists them (`ran_on`, `machines_of`), and whether a
machine about to resume the study differs from them (`differs`).

The same recipe reproduces a trial to the digit only on the same kernels; elsewhere the rounding differs at some
step and the run drifts within seed noise (ablations/training/recorder.py, `kernels_ran_on`). A study resumed on
another machine is still one study, but its reader should know. No torch import here: the caller says what this
machine is (`Machine`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

from ablate.ablations.results.record import Record


@dataclass(frozen=True, order=True)
class Machine:
    """What one trial ran on."""

    device: str
    """The device as the record names it ('cpu (1 thread)', 'NVIDIA H200'); '' where it does not."""
    torch: str | None = None
    """torch's version ('2.13.0+cpu'); None where the record does not say (records before it kept it)."""
    kernels: str | None = None
    """The CPU vector extension torch's kernels used ('AVX512', 'AVX2'); None where the record does not say."""
    device_type: str = "cpu"
    """'cpu' or 'cuda'."""

    def text(self) -> str:
        """'cpu (1 thread), torch 2.13.0+cpu, AVX512 kernels' ('torch version not recorded' for older records)."""
        torch = f"torch {self.torch}" if self.torch else "torch version not recorded"
        kernels = f", {self.kernels} kernels" if self.kernels else ""
        return f"{self.device or self.device_type}, {torch}{kernels}"


def ran_on(record: Record) -> Machine:
    """The machine a record says its trial ran on (`metrics.device`, `metrics.kernels`, `metrics.path`)."""
    kernels = record.metrics.get("kernels") or {}
    path = record.metrics.get("path") or {}
    device = record.device or ""
    cuda = bool(kernels.get("gpu")) or bool(device) and not device.startswith("cpu")  # 'NVIDIA H200', '2x ...'
    return Machine(
        device=device,
        torch=kernels.get("torch") or path.get("torch"),
        kernels=kernels.get("cpu_capability"),
        device_type="cuda" if cuda else "cpu",
    )


def machines_of(records: Iterable[Record]) -> Counter[Machine]:
    """Each machine the records ran on, with how many trials did."""
    return Counter(ran_on(r) for r in records)


def differs(found: Counter[Machine], here: Machine) -> str | None:
    """One line saying how the records' machines differ from `here` in torch version, kernel set or device type
    (what a record does not say is not compared); None where they do not."""
    said = []
    for name, label in (("torch", "torch"), ("kernels", "kernel set"), ("device_type", "device type")):
        value, other = getattr(here, name), Counter[str]()
        for machine, n in found.items():
            if getattr(machine, name) not in (None, value):
                other[getattr(machine, name)] += n
        if value is not None and other:
            them = ", ".join(f"{v} ({n} trial{'s' if n != 1 else ''})" for v, n in other.most_common())
            said.append(f"{label} {them}, here {value}")
    return "; ".join(said) or None


__all__ = ["Machine", "differs", "machines_of", "ran_on"]
