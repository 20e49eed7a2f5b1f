"""Presets: the paper's sizes, and the same study shrunk for a CPU.

A preset scales every width (d_model, d_ff, d_k, d_v) by one factor, the depth N by another and the training steps
by a third. Because each Table 3 row is written in the paper's units and scaled by the same factors, the rows keep
the paper's relations at every preset: h * d_k = d_model in row A, d_k at 1/4 and 1/2 of the base in row B, N at
1/3, 2/3 and 4/3 and widths at half and double in row C, and the big model's doubled widths and tripled steps.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from ablate.data.errors import ConfigError
from ablate.lightning_modules.config import ModelConfig, TrainConfig

WIDTH_FIELDS = ("d_model", "d_ff", "d_k", "d_v")


def default_base() -> dict[str, dict[str, Any]]:
    """The sizes a preset scales when a study's base leaves them out: ModelConfig's and TrainConfig's defaults (the
    paper's base model), in the paper's units. A study's own `base` (table3.yaml's) is layered on top of it."""
    model = ModelConfig()
    sizes = {"n_layers": model.n_layers, "d_model": model.d_model, "d_ff": model.d_ff, "n_heads": model.n_heads}
    return {
        "model": {**sizes, "d_k": model.head_dim_k, "d_v": model.head_dim_v},
        "train": {"max_steps": TrainConfig().max_steps},
    }


@dataclass(frozen=True, kw_only=True)
class Preset:
    """How the paper's configuration is shrunk, plus the settings that only make sense at that size."""

    name: str
    """Name used on the command line (--preset)."""
    description: str
    """One line for `ablate presets` and the help text."""
    width_scale: float = 1.0
    """Factor on d_model, d_ff, d_k and d_v (one factor for all, so ratios between them are kept)."""
    depth_scale: float = 1.0
    """Factor on N (n_layers). The paper's N values 2, 4, 6, 8 must stay whole numbers."""
    step_scale: float = 1.0
    """Factor on the training steps (100K for base, 300K for big in the paper)."""
    model: dict[str, Any] = field(default_factory=dict)
    """Model fields set outright at this preset (after scaling)."""
    train: dict[str, Any] = field(default_factory=dict)
    """Training-recipe fields set outright at this preset (warmup, validation cadence, ...)."""
    data: dict[str, Any] = field(default_factory=dict)
    """Data fields set outright at this preset (vocabulary, token budget, corpus sizes)."""
    seeds: int | None = None
    """Seeds a row at this preset when the study asks for fewer (`ablate sweep` takes the larger; --seeds overrides
    both): what this preset's seed noise needs for the report's intervals to resolve its effects. None: the study's."""
    pipeline_check: str | None = None
    """Set on a preset whose rows are too short to judge anything (smoke): the reason its reports give no verdict."""
    base_step_s: float | None = None
    """Measured seconds per training step of the base row on one CPU core (one thread, the other core idle), for
    the cost a sweep prints before it starts; None where not measured (GPU presets)."""
    base_trial_s: float | None = None
    """Measured seconds of one whole base trial on one CPU core (training, validations, budget branches, test
    decoding), for the same estimate."""

    def scale_model(self, values: dict[str, Any]) -> dict[str, Any]:
        """Scale the width and depth fields of a model override written in the paper's units."""
        out = dict(values)
        for name, value in values.items():
            if value is None:
                continue
            if name in WIDTH_FIELDS:
                out[name] = self._whole(name, value, self.width_scale)
            elif name == "n_layers":
                out[name] = self._whole(name, value, self.depth_scale)
        return out

    def base_layer(self) -> dict[str, dict[str, Any]]:
        """The default base at this preset's size, plus the preset's own settings: the first layer of every run."""
        base = default_base()
        return {
            "model": {**self.scale_model(base["model"]), **self.model},
            "train": {**self.scale_train(base["train"]), **self.train},
            "data": dict(self.data),
        }

    def scale_train(self, values: dict[str, Any]) -> dict[str, Any]:
        """Scale the training steps of a train override written in the paper's units."""
        out = dict(values)
        if values.get("max_steps") is not None:
            out["max_steps"] = max(1, round(values["max_steps"] * self.step_scale))
        return out

    def search_factor(self, section: str, name: str) -> float:
        """How a value of `section.name` written in the paper's units maps to this preset, for `ablate tune`'s
        search space: widths, N and steps by the preset's factors; a recipe field the preset sets outright (warmup,
        lr_factor) by the preset's value over the paper's (TrainConfig's and ModelConfig's defaults are the paper's:
        the paper's 4000 warmup steps are the tiny preset's 800); anything else (dropout, label smoothing) as is."""
        if section == "model" and name in WIDTH_FIELDS:
            return self.width_scale
        if section == "model" and name == "n_layers":
            return self.depth_scale
        if section == "train" and name == "max_steps":
            return self.step_scale
        paper = {"model": ModelConfig(), "train": TrainConfig()}.get(section)
        mine = {"model": self.model, "train": self.train}.get(section, {}).get(name)
        theirs = getattr(paper, name, None)
        numbers = all(isinstance(v, int | float) and not isinstance(v, bool) for v in (mine, theirs))
        return mine / theirs if numbers and theirs else 1.0

    def _whole(self, name: str, value: int, factor: float) -> int:
        scaled = value * factor
        if abs(scaled - round(scaled)) > 1e-9 or round(scaled) < 1:
            raise ConfigError(
                f"preset {self.name!r} scales model.{name}={value} to {scaled:g}, not a positive whole number: "
                f"use a value that is a multiple of {1 / factor:g}, or a study with 'scale: none'"
            )
        return round(scaled)


PRESETS: dict[str, Preset] = {
    p.name: p
    for p in (
        Preset(
            name="paper",
            description="the paper's sizes and recipe (WMT-scale data, GPUs): base 65M params, 100K steps",
            # Fixed batch shapes (8): a GPU builds attention plans and compiled graphs once a shape.
            data={"vocab_size": 37000, "tokens_per_batch": 50000, "max_len": 256, "buckets": 8},
            train={"val_every": 5000, "val_max_sentences": 500, "fused_loss": True},
        ),
        Preset(
            name="tiny",
            description="Table 3 on a CPU: widths /8, N /2 (base N=3, d_model=64), 2800 steps (big 8400), T/2 and T",
            width_scale=0.125,
            depth_scale=0.5,
            # 100K -> 2800 steps (big: 8400), calibrated on the base row alone (docs/method/presets.md): the
            # fewest steps at which the base's annealed dev BLEU at T/2 is at least 80% of its BLEU at T, and T's is
            # above 40, so the half budget is past early learning and a verdict that holds at both means something.
            step_scale=0.028,
            model={"max_len": 256},
            # The paper's equation (3) with its factor 1, and an 800-step warmup instead of 4000 (a run of 2800 steps
            # would never reach 4000). Post-norm needs a long one: shorter warmups, a higher peak or smaller batches
            # left the base, or the deepest and most dropped rows, near a language model. 800 trains every row, and
            # the base still meets its calibration. Chosen on whether every row leaves the plateau, never on a row's
            # BLEU (docs/method/presets.md; the warmups tried:
            # docs/reference/code-figures.md, "ablations/study/presets.py").
            # The last 20% of the steps anneal the rate to zero, and a branch from 40% scores the half budget, annealed
            # the same way: the two budgets every verdict must hold at (Hagele et al., 2024, on such cooldowns).
            # Validation every 400 steps (the curves are information; the budgets are what is compared).
            # A finished trial's checkpoints go (keep_checkpoints none): its record holds what the report needs.
            train={
                "warmup_steps": 800,
                "lr_factor": 1.0,
                "cooldown_frac": 0.2,
                "budgets": (0.5,),
                "val_every": 400,
                "val_max_sentences": 300,
                "keep_checkpoints": "none",
            },  # fmt: skip
            # A smaller lexicon and shorter sentences than the default built-in corpus, and 5000 training pairs: a
            # data-limited regime where dropout has over-fitting to prevent (row D1). Sentences of at most 15 words
            # (25 before) learn in fewer steps.
            # Intervals (docs/method/noise.md): 3 seeds a row (the base 13) and 8000 dev sentences are the
            # cheapest design projected to bring the median 95% half-width of ΔBLEU at T under 1.5 with a margin, from
            # the seed and sentence noise of the default study; the sentence SE falls as 1/sqrt(sentences), and part
            # of the seed variance is each model's luck on the sentences scored, so two seeds cannot get there at any
            # dev size. The base still meets its calibration on 8000 (the noise, the projection and the cost:
            # docs/reference/code-figures.md, "ablations/study/presets.py").
            data={
                "vocab_size": 1000,
                "tokens_per_batch": 4096,
                "max_len": 96,
                "builtin_lexicon": 0.1,
                "builtin_max_words": 15,
                "builtin_train": 5000,
                "builtin_valid": 8000,
            },
            seeds=3,
            # base_step_s: the base's step time (docs/method/presets.md). base_trial_s: the median of the default
            # study's base trials, each alone on its core with one thread (2800 steps + the T/2 branch's 280,
            # validations on the 8000 dev sentences, test decoding; docs/findings/table3-builtin.md). Their dates and
            # range, and the cost line against the study's real cost:
            # docs/reference/code-figures.md, "ablations/study/presets.py".
            base_step_s=0.145,
            base_trial_s=590.0,
        ),
        Preset(
            name="smoke",
            description="every row in a few minutes, for CI: widths /16, N /2 (base N=3, d_model=32), 60 steps",
            pipeline_check=(
                "the smoke preset is a pipeline check (60 steps: its models have not learnt to translate); "
                "run the tiny preset for verdicts"
            ),
            width_scale=1 / 16,
            depth_scale=0.5,
            step_scale=0.0006,
            model={"max_len": 256},
            train={
                "warmup_steps": 20,
                "lr_factor": 0.1,
                "cooldown_frac": 0.2,
                "budgets": (0.5,),
                "val_every": 30,
                "val_max_sentences": 100,
                "keep_checkpoints": "none",
            },  # fmt: skip
            data={
                "vocab_size": 500,
                "tokens_per_batch": 2048,
                "max_len": 64,
                "builtin_lexicon": 0.1,
                "builtin_max_words": 25,
                "builtin_train": 6000,
                "builtin_valid": 200,
                "builtin_test": 200,
            },
        ),
    )
}


def _rung(tiny: Preset, **changes: Any) -> Preset:
    """A preset one rung up the scale ladder from tiny (issue 42): tiny's recipe, data and depth, wider, so that
    across the rungs only the width changes, and the steps where the base's calibration asks for more."""
    return dataclasses.replace(tiny, **{"seeds": None, "base_step_s": None, "base_trial_s": None, **changes})


PRESETS = dict(
    [
        *((name, preset) for name, preset in PRESETS.items() if name != "smoke"),
        (
            "small",
            _rung(
                PRESETS["tiny"],
                name="small",
                description="the scale ladder's second rung: tiny at widths /4 (base N=3, d_model=128), 5600 steps "
                "(big 16800), calibrated on gettext:de",
                width_scale=0.25,
                # 100K -> 5600 steps, by tiny's rule on the base alone on gettext:de (docs/method/presets.md): the
                # fewest steps tried at which the annealed dev BLEU at T/2 is at least 80% of T's (the steps
                # tried: docs/reference/code-figures.md, "ablations/study/presets.py").
                # Tiny's 800-step warmup and every other setting unchanged, so the rungs differ in width and steps only.
                step_scale=0.056,
                # The base trial at 5600 steps on one core (one thread, the other core training too; its date:
                # docs/reference/code-figures.md, "ablations/study/presets.py").
                base_trial_s=1705.0,
            ),
        ),
        (
            "medium",
            _rung(
                PRESETS["tiny"],
                name="medium",
                description="the scale ladder's third rung: tiny at widths /2 (base N=3, d_model=256), 8400 steps "
                "(big 25200), calibrated on gettext:de",
                width_scale=0.5,
                # 100K -> 8400 steps, by tiny's rule on the base alone on gettext:de (docs/method/presets.md):
                # the fewest steps tried at which the annealed dev BLEU at T/2 is at least 80% of T's (the steps tried:
                # docs/reference/code-figures.md, "ablations/study/presets.py").
                step_scale=0.084,
                # The base trial at 8400 steps on one core (one thread, the other core training too; its date, and
                # its step time against shorter probes:
                # docs/reference/code-figures.md, "ablations/study/presets.py").
                base_trial_s=11552.0,
            ),
        ),
        ("smoke", PRESETS["smoke"]),
    ]
)
"""Presets in the order `ablate presets` lists them: the paper, the CPU rungs from small to larger, the CI check."""


def get_preset(name: str) -> Preset:
    """The preset called `name`, or a one-line error listing the presets there are."""
    try:
        return PRESETS[name]
    except KeyError:
        raise ConfigError(f"unknown preset {name!r}: choose one of {', '.join(PRESETS)}") from None
