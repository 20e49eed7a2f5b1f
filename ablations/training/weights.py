"""A trained model as one file, `model.pt` beside a run's result: what `ablate translate` needs on any machine.

It holds the final weights as they were evaluated (after checkpoint averaging, when train.average_last asks for
it), the model's config, the decoding its dev and test scores were taken with (beam, length penalty, length limit)
and the SentencePiece model's bytes, so no corpus or cache is needed to use it. Written atomically once a fit
reaches max_steps, by rank 0; checkpoints may be pruned after (train.keep_checkpoints), this file stays. In float32:
about 4 bytes a parameter plus the tokenizer (sizes at the presets:
docs/reference/code-figures.md, "ablations/training/weights.py").
"""

from __future__ import annotations

import dataclasses
import io
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytorch_lightning as pl
import torch
from ablate.data.atomic import write_atomic
from ablate.data.errors import AblateError
from ablate.data.tokenizer import Tokenizer
from ablate.lightning_modules.config import ModelConfig, TrainConfig
from ablate.lightning_modules.module import TranslationModule

FILE = "model.pt"
FORMAT = "ablate-model-1"
DECODING = ("beam_size", "length_penalty", "max_len_a", "max_len_b")
"""The train.* settings of section 6.1's decoding a model was scored with, kept beside its weights."""


@dataclass
class Trained:
    """A model loaded from its file, ready to decode (`module.translate`, with the decoding it was trained with)."""

    module: TranslationModule
    tokenizer: Tokenizer
    decoding: dict[str, Any]  # beam_size, length_penalty, max_len_a, max_len_b as trained
    steps: int
    path: Path


def save(path: Path, module: Any, tokenizer: Tokenizer, steps: int) -> None:
    """Write `module`'s model (a TranslationModule) with its config, decoding and tokenizer to `path`."""
    state = {k: v.detach().to("cpu", torch.float32 if v.is_floating_point() else v.dtype)
             for k, v in module.model.state_dict().items()}  # fmt: skip
    payload = {
        "format": FORMAT,
        "model": dataclasses.asdict(module.model_config),
        "decoding": {name: getattr(module.train_config, name) for name in DECODING},
        "steps": steps,
        "state_dict": state,
        "tokenizer": tokenizer.model_bytes(),
    }
    write_atomic(path, lambda fh: torch.save(payload, fh))


def load(path: Path) -> Trained:
    """The model in `path` (a model.pt), on the CPU, in eval mode. A file that is not one: a one-line AblateError."""
    try:
        payload = torch.load(io.BytesIO(path.read_bytes()), map_location="cpu", weights_only=True)
    except OSError as err:
        raise AblateError(f"{path}: {err.strerror or err}") from None
    except Exception as err:  # noqa: BLE001 - whatever torch.load cannot read (a text file, a damaged zip) is not one
        raise AblateError(f"{path}: not a model file of ablate ({type(err).__name__})") from None
    if not isinstance(payload, dict) or payload.get("format") != FORMAT:
        raise AblateError(f"{path}: not a model file of ablate (format {FORMAT} expected)")
    known = {f.name for f in dataclasses.fields(ModelConfig)}  # a field added since is left at its default
    config = ModelConfig(**{k: v for k, v in payload["model"].items() if k in known})
    tokenizer = Tokenizer.from_bytes(payload["tokenizer"], str(path))
    decoding: dict[str, Any] = dict(payload["decoding"])
    train = TrainConfig(**decoding)
    module = TranslationModule(config, train, bos_id=tokenizer.bos_id, eos_id=tokenizer.eos_id)
    module.model.load_state_dict(payload["state_dict"])
    return Trained(module.eval(), tokenizer, decoding, int(payload["steps"]), path)


class FinalWeights(pl.Callback):
    """Saves the model as evaluated to `path` once the fit has reached max_steps (rank 0 only)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def on_fit_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if trainer.global_step < (trainer.max_steps or 0) or not trainer.is_global_zero:
            return
        datamodule = getattr(trainer, "datamodule", None)
        tokenizer = getattr(datamodule, "tokenizer", None)
        if tokenizer is not None:
            save(self.path, pl_module, tokenizer, trainer.global_step)


__all__ = ["DECODING", "FILE", "FinalWeights", "Trained", "load", "save"]
