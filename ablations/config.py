"""The full configuration of one run: one dataclass per concern, merged from layers of overrides.

Sections: model (lightning_modules.config.ModelConfig), train (TrainConfig), data (data.config.DataConfig),
hardware and tracking (below). No torch import here: the CLI's help and study validation stay fast.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from dataclasses import dataclass, field
from typing import Any, Literal

from data.config import DataConfig
from data.errors import ConfigError
from lightning_modules.config import ModelConfig, TrainConfig


@dataclass(frozen=True, kw_only=True)
class HardwareConfig:
    """Where the run executes; passed through to the Lightning Trainer."""

    accelerator: str = "auto"
    """'cpu', 'gpu', 'auto' (a GPU if there is one)."""
    devices: int | str = 1
    """Devices per node: a number, 'auto' (all), or a list like '0,1'. More than one trains with DDP."""
    num_nodes: int = 1
    """Machines taking part in one DDP run."""
    strategy: str = "auto"
    """Lightning strategy: 'auto', 'ddp', 'ddp_spawn', 'fsdp', ..."""

    def __post_init__(self) -> None:
        if self.num_nodes < 1:
            raise ConfigError(f"hardware.num_nodes must be >= 1, got {self.num_nodes}")


@dataclass(frozen=True, kw_only=True)
class TrackingConfig:
    """Weights & Biases and local logging."""

    project: str = "ablate"
    """W&B project."""
    entity: str | None = None
    """W&B entity (team or user); None: your default."""
    mode: Literal["offline", "online", "disabled"] | None = None
    """None: WANDB_MODE from the environment if set, else online if an API key is configured, else offline."""
    log_every: int = 10
    """Log training metrics every this many optimizer steps."""
    progress: bool = True
    """Show a progress bar with steps, loss and ETA."""

    def __post_init__(self) -> None:
        if self.log_every < 1:
            raise ConfigError(f"tracking.log_every must be >= 1, got {self.log_every}")


SECTIONS: dict[str, type] = {
    "model": ModelConfig,
    "train": TrainConfig,
    "data": DataConfig,
    "hardware": HardwareConfig,
    "tracking": TrackingConfig,
}


@dataclass(frozen=True, kw_only=True)
class RunConfig:
    """Everything that determines one training run."""

    model: ModelConfig = field(default_factory=ModelConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    data: DataConfig = field(default_factory=DataConfig)
    hardware: HardwareConfig = field(default_factory=HardwareConfig)
    tracking: TrackingConfig = field(default_factory=TrackingConfig)

    def to_dict(self) -> dict[str, dict[str, Any]]:
        """Plain, JSON-serialisable dict; the model section has d_k and d_v resolved."""
        out = {name: dataclasses.asdict(getattr(self, name)) for name in SECTIONS}
        out["model"] = self.model.resolved()
        return out


def build_run_config(*layers: dict[str, dict[str, Any]]) -> RunConfig:
    """Merge layers of {section: {field: value}} (later layers win) and build the config, checking each value's
    type against its field, so a bad value fails here with the field's name."""
    merged: dict[str, dict[str, Any]] = {name: {} for name in SECTIONS}
    for layer in layers:
        for section, values in (layer or {}).items():
            if section not in SECTIONS:
                raise ConfigError(f"unknown config section {section!r}; use one of {', '.join(SECTIONS)}")
            merged[section].update(values or {})
    if "vocab_size" in merged["data"] or "vocab_size" not in merged["model"]:
        # One vocabulary: the model's embedding size follows the tokenizer's.
        merged["model"]["vocab_size"] = merged["data"].get("vocab_size", DataConfig.vocab_size)
    built = {}
    for section, cls in SECTIONS.items():
        hints = typing.get_type_hints(cls)
        known = {f.name for f in dataclasses.fields(cls)}
        for key, value in merged[section].items():
            if key not in known:
                raise ConfigError(f"unknown field {section}.{key}; {section} fields are {', '.join(sorted(known))}")
            merged[section][key] = _coerce(f"{section}.{key}", value, hints[key])
        built[section] = cls(**merged[section])
    return RunConfig(**built)


def _coerce(name: str, value: Any, hint: Any) -> Any:
    """Accept `value` if it fits the annotation (ints for floats, lists for tuples); else a ConfigError naming it."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        for option in args:
            try:
                return _coerce(name, value, option)
            except ConfigError:
                continue
        raise ConfigError(f"{name}: {value!r} is not a valid {_describe(hint)}")
    if hint is type(None):
        if value is None:
            return None
    elif origin is Literal:
        if value in args:
            return value
        raise ConfigError(f"{name}: must be one of {', '.join(repr(a) for a in args)}, got {value!r}")
    elif origin is tuple:
        if isinstance(value, list | tuple) and len(value) == len(args):
            return tuple(_coerce(name, v, a) for v, a in zip(value, args, strict=True))
    elif hint is bool:
        if isinstance(value, bool):
            return value
    elif hint is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if isinstance(value, float) and value.is_integer():
            return int(value)
    elif hint is float:
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
    elif hint is str:
        if isinstance(value, str):
            return value
    else:
        return value
    raise ConfigError(f"{name}: must be {_describe(hint)}, got {value!r}")


def _describe(hint: Any) -> str:
    if typing.get_origin(hint) is Literal:
        return "one of " + ", ".join(repr(a) for a in typing.get_args(hint))
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return " or ".join(_describe(a) for a in typing.get_args(hint))
    if hint is type(None):
        return "null"
    return {int: "an integer", float: "a number", bool: "true or false", str: "a string"}.get(hint, str(hint))
