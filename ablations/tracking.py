"""Tracking: the W&B run of each training. (The local JSON records that reports read are the ledger's.)"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ablations.config import TrackingConfig


def wandb_mode(cfg: TrackingConfig) -> str:
    """The environment wins: WANDB_MODE if set; else the config's mode; else online with an API key, else offline.

    wandb.init(mode="offline") would override WANDB_MODE=disabled, so the mode is resolved here, once."""
    env = os.environ.get("WANDB_MODE")
    if env:
        return {"dryrun": "offline", "run": "online"}.get(env, env)
    if cfg.mode:
        return cfg.mode
    return "online" if os.environ.get("WANDB_API_KEY") else "offline"


def make_wandb_logger(
    cfg: TrackingConfig,
    *,
    save_dir: Path,
    name: str,
    group: str | None,
    tags: list[str],
    config: dict[str, Any],
    run_id: str | None = None,
):
    """A Lightning WandbLogger. Offline runs land in save_dir/wandb/offline-run-*; `wandb sync` uploads them.

    `run_id` makes a resumed trial continue the same W&B run instead of starting a second one."""
    from pytorch_lightning.loggers import WandbLogger

    save_dir.mkdir(parents=True, exist_ok=True)
    mode = wandb_mode(cfg)
    return WandbLogger(
        project=cfg.project,
        entity=cfg.entity,
        name=name,
        group=group,
        tags=tags,
        save_dir=str(save_dir),
        config=config,
        id=run_id,
        resume="allow" if run_id else None,
        mode=mode,
        log_model=False,  # log_model raises in offline mode; checkpoints stay on disk
        settings={"silent": True, "console": "off", "x_disable_stats": True},
    )
