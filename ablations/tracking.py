"""Tracking: the W&B run of each training. (The local JSON records that reports read are the ledger's.)"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ablate.ablations.study.config import TrackingConfig


def wandb_mode(cfg: TrackingConfig) -> str:
    """The environment wins: WANDB_MODE if set; else the config's mode; else online with an API key, else offline.

    wandb.init(mode="offline") would override WANDB_MODE=disabled, so the mode is resolved here, once."""
    env = os.environ.get("WANDB_MODE")
    if env:
        return {"dryrun": "offline", "run": "online"}.get(env, env)
    if cfg.mode:
        return cfg.mode
    return "online" if os.environ.get("WANDB_API_KEY") else "offline"


def run_group(study: str, preset: str, label: str | None = None) -> str:
    """The W&B group of a sweep's runs and its report run: study + preset (+ the user's label), so a smoke sweep, a
    paper sweep and a labelled repeat never share one group."""
    return "-".join(part for part in (study, preset, label) if part)


def run_name(row: str, seed: int) -> str:
    """A trial's W&B run name: its row and seed, also when a sweep has one seed (`B1-s0`), so names never change
    meaning between sweeps of one and of several seeds."""
    return f"{row}-s{seed}"


@dataclass(frozen=True)
class RunIdentity:
    """Who a training run is in W&B: a row x seed of a study at a preset (+ the user's label). The one definition
    of a run's name, group, tags and identifying config keys, for sweep trials and `ablate train` alike."""

    study: str
    preset: str
    row: str
    row_group: str
    seed: int
    label: str | None = None

    @property
    def name(self) -> str:
        return run_name(self.row, self.seed)

    @property
    def group(self) -> str:
        return run_group(self.study, self.preset, self.label)

    @property
    def tags(self) -> list[str]:
        """study, preset, row, row group (+ label), each once (the base row's group is 'base' too)."""
        return list(
            dict.fromkeys([self.study, self.preset, self.row, self.row_group, *([self.label] if self.label else [])])
        )

    def config(self) -> dict[str, Any]:
        """The keys added to the run's config ('row_group', not 'group': W&B's own group is the sweep)."""
        return {
            "study": self.study,
            "row": self.row,
            "row_group": self.row_group,
            "seed": self.seed,
            "preset": self.preset,
            "label": self.label,
        }


def make_wandb_logger(
    cfg: TrackingConfig,
    *,
    save_dir: Path,
    name: str,
    group: str | None,
    tags: list[str],
    config: dict[str, Any],
    run_id: str | None = None,
    job_type: str = "train",
):
    """A Lightning WandbLogger. Offline runs land in save_dir/wandb/offline-run-*; `wandb sync` uploads them.

    `run_id` makes a resumed trial continue the same W&B run instead of starting a second one. `job_type` tells a
    training run from the report run that shares its group ('report', `reports.wandb_log`).

    W&B plots these runs over `trainer/global_step`, the step Lightning passes to the logger; the module logs
    `step` (the optimizer steps done, as the records count them) so that this axis reads 10, 20, ... and not
    Lightning's default, the count before the step's update (9, 19, ...)."""
    from pytorch_lightning.loggers import WandbLogger  # lazy: Lightning costs seconds, only when training

    save_dir.mkdir(parents=True, exist_ok=True)
    mode = wandb_mode(cfg)
    logger = WandbLogger(
        project=cfg.project,
        entity=cfg.entity,
        name=name,
        group=group,
        tags=tags,
        save_dir=str(save_dir),
        config=config,
        id=run_id,
        job_type=job_type,
        resume="allow" if run_id else None,
        mode=mode,
        log_model=False,  # log_model raises in offline mode; checkpoints stay on disk
        settings={"silent": True, "console": "off", "x_disable_stats": True},
    )
    # Lightning always passes anonymous=None to wandb.init, and W&B 0.31 answers any value with "The anonymous
    # setting has no effect" in every run's log. Lightning keeps wandb.init's arguments in `_wandb_init` (no public
    # way to leave one out), so the no-op argument is dropped there.
    getattr(logger, "_wandb_init", {}).pop("anonymous", None)
    return logger
