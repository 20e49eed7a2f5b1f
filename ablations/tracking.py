"""Tracking: the W&B run of each training, and the local JSON records that reports read (never W&B itself)."""

from __future__ import annotations

import json
import os
import tempfile
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


def write_json_atomic(path: Path, payload: Any) -> None:
    """Write JSON so that readers see the old file or the new one, never half of one (temp file + os.replace)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(payload, fh, indent=2, sort_keys=False, default=str)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_text_atomic(path: Path, text: str) -> None:
    """Same as write_json_atomic, for plain text (hypothesis files)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
