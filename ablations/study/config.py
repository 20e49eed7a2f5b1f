"""The full configuration of one run: one dataclass per concern, merged from layers of overrides.

Sections: model (lightning_modules.config.ModelConfig), train (TrainConfig), data (data.config.DataConfig),
hardware and tracking (below). No torch import here: the CLI's help and study validation stay fast.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import re
import types
import typing
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

from ablate.data.config import DataConfig
from ablate.data.errors import ConfigError, did_you_mean
from ablate.lightning_modules.config import ModelConfig, TrainConfig


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
    stop_within_s: float = 30.0
    """Seconds a run asked to stop (SIGTERM, Ctrl-C, SLURM's warning, a sweep stopping its workers) has to save and
    exit. It saves at the end of the running step; one that cannot get there (a compile, a long decode) is ended at
    this bound with every thread's stack in its log, one line saying what it was doing, what was saved and how to
    resume, its child processes with it, exit 124. A sweep's coordinator waits 15 s more for its workers. 0: no
    bound."""
    stall_s: float = 1800.0
    """Seconds without progress (a training step, a validation or decoding batch) after which a run is failed as
    hung, with every thread's stack in its log and one line naming what it was doing; in a sweep the trial is
    recorded as failed and the sweep goes on. Longer than any cold compile measured. 0: no watchdog."""

    def __post_init__(self) -> None:
        if self.num_nodes < 1:
            raise ConfigError(f"hardware.num_nodes must be >= 1, got {self.num_nodes}")
        for name in ("stop_within_s", "stall_s"):
            if getattr(self, name) < 0:
                raise ConfigError(f"hardware.{name} must be >= 0 (0: off), got {getattr(self, name)}")


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
    label: str | None = None
    """A user label that separates repeats in W&B, e.g. `--tracking.label rerun2`: the runs' group becomes
    `<study>-<preset>-<label>` (without it, `<study>-<preset>`), and the label is in each run's config."""

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

    def __post_init__(self) -> None:
        if self.train.cuda_graphs and not self.data.buckets:
            raise ConfigError(
                "train.cuda_graphs records a graph per batch shape and needs fixed shapes: set data.buckets (e.g. 8)"
            )
        if self.model.kernels == "jagged" and self.train.compile:
            raise ConfigError(
                "model.kernels jagged runs eagerly (its nested tensors break a compiled graph at every attention): "
                "drop train.compile, or keep model.kernels auto"
            )

    def to_dict(self) -> dict[str, dict[str, Any]]:
        """Plain, JSON-serialisable dict; the model section has d_k and d_v resolved."""
        out = {name: dataclasses.asdict(getattr(self, name)) for name in SECTIONS}
        out["model"] = self.model.resolved()
        return out


def build_run_config(*layers: dict[str, dict[str, Any]]) -> RunConfig:
    """Merge layers of {section: {field: value}} (later layers win) and build the config, checking each value's
    type against its field (jsonargparse, as on the command line), so a bad value fails here with the field's name."""
    merged: dict[str, dict[str, Any]] = {name: {} for name in SECTIONS}
    for layer in layers:
        for section, values in check_sections({s: v or {} for s, v in (layer or {}).items()}).items():
            merged[section].update(values)
    if "vocab_size" in merged["data"] or "vocab_size" not in merged["model"]:
        # One vocabulary: the model's embedding size follows the tokenizer's.
        merged["model"]["vocab_size"] = merged["data"].get("vocab_size", DataConfig.vocab_size)
    return RunConfig(**{section: cls(**merged[section]) for section, cls in SECTIONS.items()})


def add_sections(parser: Any, sections: Iterable[str] = tuple(SECTIONS)) -> None:
    """Add --SECTION.FIELD for every field of the named sections to a jsonargparse parser, with the field's
    docstring as help and null (unset) as default: an unset field keeps the value of the layers below it."""
    for section in sections:
        cls = SECTIONS[section]
        doc = (cls.__doc__ or "").strip().splitlines()[0]
        parser.add_class_arguments(cls, section, help=f"{doc} Unset (null) fields keep the study row's value.")
    parser.set_defaults({f"{s}.{f.name}": None for s in sections for f in dataclasses.fields(SECTIONS[s])})


@functools.lru_cache(maxsize=1024)
def _typed(layer: str) -> dict[str, dict[str, Any]]:
    """The jsonargparse check of a layer given as JSON, remembered: a study resolves the same preset and row layers
    for every seed and preset, and each check costs milliseconds (timed:
    docs/reference/code-figures.md, "ablations/study/config.py"). The values are immutable
    (numbers, strings, tuples), so sharing them is safe; callers copy the dicts."""
    values = json.loads(layer)
    try:
        checked = _checker().parse_object(values)
    except argparse.ArgumentError as err:
        given = {f"{s}.{k}": v for s, fields in values.items() for k, v in fields.items()}
        raise ConfigError(describe_error(err, given)) from None
    return {s: {k: checked[s][k] for k in fields} for s, fields in values.items()}


@functools.cache
def _checker() -> Any:
    from jsonargparse import ArgumentParser  # lazy: jsonargparse costs ~0.1 s; readers of a study need none

    parser = ArgumentParser(prog="config", exit_on_error=False, print_config=None)
    add_sections(parser)
    return parser


def check_sections(layer: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Check a {section: {field: value}} layer against the fields' type annotations and return it with values
    converted (a tuple for a list, a float for an int). jsonargparse does the checking, the same as for command-line
    values, so study files and the command line accept the same things. Raises ConfigError naming the field."""
    for section, values in layer.items():
        if section not in SECTIONS:
            raise ConfigError(f"unknown config section {section!r}; use one of {', '.join(SECTIONS)}")
        if not isinstance(values, dict):
            raise ConfigError(f"section {section!r} must map field names to values, got {values!r}")
        known = {f.name for f in dataclasses.fields(SECTIONS[section])}
        for key in values:
            if key not in known:
                raise ConfigError(
                    f"unknown field {section}.{key}{did_you_mean(key, known)}; {section} fields are "
                    f"{', '.join(sorted(known))}"
                )
    typed = _typed(json.dumps(layer, sort_keys=True, default=str))
    return {s: dict(fields) for s, fields in typed.items()}


def describe_error(err: Exception, given: dict[str, Any] | None = None) -> str:
    """jsonargparse's error on one line, in our words when it names a config field: "model.norm: must be one of
    'post', 'pre', got 'mid'". `given`: the values as written ({"model.norm": ...}), to quote the one that failed."""
    message = " ".join(str(err).split())
    found = re.match(r'Parser key "(\w+)\.(\w+)": .*(?:Got|Given) value: (.*)$', message)
    if found is None or found.group(1) not in SECTIONS:
        return message
    section, name, got = found.groups()
    hint = typing.get_type_hints(SECTIONS[section])[name]
    return f"{section}.{name}: must be {_describe(hint)}, got {(given or {}).get(f'{section}.{name}', got)!r}"


def _describe(hint: Any) -> str:
    if typing.get_origin(hint) is Literal:
        return "one of " + ", ".join(repr(a) for a in typing.get_args(hint))
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return " or ".join(_describe(a) for a in typing.get_args(hint))
    if typing.get_origin(hint) is tuple:
        return f"a list of {len(typing.get_args(hint))} values"
    if hint is type(None):
        return "null"
    return {int: "an integer", float: "a number", bool: "true or false", str: "a string"}.get(hint, str(hint))
