"""The Optuna parameters of a sweep's trials, so optuna-dashboard plots the knobs.

Each sweep trial carries its row, seed and knobs (every config field a row of the plan overrides) as *parameters*
with fixed distributions (`ParamSpace`), so parallel coordinates, importance and slice plots work over the knobs.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ParamSpace:
    """The Optuna parameters of a sweep's trials: 'row' (categorical over the plan's rows, in order), 'seed', and
    every knob ('section.field') that some row overrides, with the row's resolved value. Distributions are fixed
    from the values the plan's rows take (a numeric knob spans min..max, log-scaled when it spans 8x or more, as
    d_model or h do; anything else is categorical), so every trial of a plan shares them and optuna-dashboard plots
    the knobs on common axes."""

    values: dict[str, dict[str, Any]]
    """row -> {knob: value}."""
    seeds: tuple[int, ...]
    distributions: dict[str, Any]

    @classmethod
    def of(cls, values: dict[str, dict[str, Any]], seeds: tuple[int, ...] | list[int]) -> ParamSpace:

        values = {row: {k: _param_value(v) for k, v in knobs.items()} for row, knobs in values.items()}
        seeds = tuple(seeds)
        knobs = list(dict.fromkeys(k for row in values.values() for k in row))
        distributions: dict[str, Any] = {
            "row": _dists().CategoricalDistribution(list(values)),
            "seed": _dists().IntDistribution(min(seeds), max(seeds)),
        }
        for knob in knobs:
            distributions[knob] = _distribution([row.get(knob) for row in values.values()])
        return cls(values, seeds, distributions)

    def params(self, row: str, seed: int) -> dict[str, Any]:
        """The trial's parameters: those its distributions can hold (`settled` may leave a new row's name or a knob
        out: see there)."""
        wanted = {"row": row, "seed": seed, **self.values[row]}
        return {k: v for k, v in wanted.items() if k in self.distributions and _holds(self.distributions[k], v)}

    def settled(self, stored: dict[str, Any]) -> tuple[ParamSpace, list[str]]:
        """This plan's space on the axes a study already has (`stored`: name -> distribution, what earlier plans of
        the study set), and what it cannot put there. An RDB storage refuses a parameter whose categorical choices or
        log scale differ from earlier trials' (Optuna: "dynamic value space"), so a study keeps its axes: numeric
        ones widen to take new values; a categorical one cannot grow, so a new choice (a row added to the study
        since it began) is left out of that trial's parameters, and a knob whose kind changed (a number where text
        was) is left out altogether. Returns the space and a line per parameter left out, for the user."""

        settled, left_out = dict(self.distributions), []
        for name, new in self.distributions.items():
            old = stored.get(name)
            if old is None:
                continue
            if isinstance(old, _dists().CategoricalDistribution) and isinstance(new, _dists().CategoricalDistribution):
                settled[name] = old
                extra = [c for c in new.choices if c not in old.choices]
                if extra:
                    left_out.append(f"{name} = {', '.join(map(str, extra))} (new since the study began)")
                continue
            numeric = (_dists().FloatDistribution, _dists().IntDistribution)
            if (
                isinstance(old, numeric)
                and isinstance(new, numeric)
                and (type(old), type(new)) in _widens()
                and not (old.log and min(old.low, new.low) <= 0)
            ):  # the axis keeps its kind and scale and widens to the new values
                low, high = min(old.low, new.low), max(old.high, new.high)
                if isinstance(old, _dists().IntDistribution):  # then so is `new` (`_widens`)
                    settled[name] = _dists().IntDistribution(int(low), int(high), log=old.log)
                else:
                    settled[name] = _dists().FloatDistribution(low, high, log=old.log)
            else:
                del settled[name]
                left_out.append(f"{name} (its kind changed since the study began)")
        return ParamSpace(self.values, self.seeds, settled), left_out


def _widens() -> set[tuple[type, type]]:

    return {
        (_dists().FloatDistribution, _dists().FloatDistribution),
        (_dists().FloatDistribution, _dists().IntDistribution),
        (_dists().IntDistribution, _dists().IntDistribution),
    }


def _holds(distribution: Any, value: Any) -> bool:

    if isinstance(distribution, _dists().CategoricalDistribution):
        return value in distribution.choices
    return (
        isinstance(value, (int, float))
        and not isinstance(value, bool)
        and distribution.low <= value <= distribution.high
    )


def _param_value(value: Any) -> Any:
    """A config value as an Optuna parameter can hold it (None, bool, int, float, str)."""
    return value if value is None or isinstance(value, (bool, int, float, str)) else json.dumps(value)


def _distribution(values: list[Any]) -> Any:

    numbers = [v for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)]
    if len(numbers) == len(values):
        low, high = min(numbers), max(numbers)
        log = low > 0 and high >= 8 * low
        if all(isinstance(v, int) for v in numbers):
            return _dists().IntDistribution(int(low), int(high), log=log)
        return _dists().FloatDistribution(float(low), float(high), log=log)
    return _dists().CategoricalDistribution(list(dict.fromkeys(values)))


def _dists():
    """`optuna.distributions`, imported on first use: every command's --help loads this module and needs no Optuna."""
    from optuna import distributions  # lazy: optuna costs ~50 ms (its __init__ loads every submodule)

    return distributions
