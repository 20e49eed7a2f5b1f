"""What `ablate bench` measures (`BenchConfig`, the command's options) and what every measurement shares (`Setup`:
the benchmarked run, its device and precision), passed as one object instead of a (cfg, precision, device) tuple."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Literal

from ablate.data.errors import AblateError
from ablate.lightning_modules.config import Precision


@dataclass(frozen=True, kw_only=True)
class BenchConfig:
    """What `ablate bench` measures and how."""

    study: str = "table3"
    """Study whose row is benchmarked (built-in name or YAML file)."""
    row: str = "base"
    """Row of the study."""
    preset: str = "tiny"
    """Size preset of the row (tiny, smoke, paper)."""
    peers: tuple[str, ...] = ("hf", "torch")
    """Peers measured in the same run: 'hf' (MarianMT, needs the [bench] extra), 'torch' (nn.Transformer), and
    'row:NAME' (our model as another row of the study builds it, e.g. 'row:paper' beside the modern base)."""
    warmup: int = 5
    """Untimed training steps per system before the timed ones (allocator, caches, torch.compile)."""
    repeats: int = 30
    """Timed training steps per system, one per batch."""
    decode_sentences: int = 32
    """Dev sentences in the decoding batch."""
    decode_repeats: int = 7
    """Timed decoding runs per system (one warm-up run each before); the systems take turns in every round."""
    beam_size: int = 4
    """Beam width of the beam-search measurement (section 6.1: 4)."""
    full_length: bool = True
    """Hold eos back (logit -1e4) in every decoder until the length limit forces it, so that all systems decode
    the same number of steps: with random weights, where a model happens to emit eos is arbitrary."""
    device: Literal["auto", "cpu", "cuda"] = "auto"
    """'auto': CUDA if available, else CPU."""
    precision: Literal["auto", "32-true", "bf16-mixed"] = "auto"
    """'auto': bf16 autocast on a bf16-capable GPU, fp32 on CPU (bf16 is slower on CPUs without AMX)."""
    threads: int | None = None
    """CPU threads of torch (torch.set_num_threads); None: torch's default (one per core)."""
    compile: bool = False
    """torch.compile every trained model (ours and the peers); the first warm-up step then includes compilation."""
    compile_scope: Literal["model", "layers"] = "layers"
    """What --compile compiles (train.compile_scope): each layer in place (the identical layers share one graph: a
    layer's cold compile, not the model's), or the whole model as one graph."""
    lightning: bool = True
    """Also time our training through the Lightning Trainer, as `ablate train` runs it."""
    host: bool = True
    """Also count what a step on the card's path costs the host (`benchmarks.host`): operators dispatched, CUDA
    kernels they would launch, autocast casts and host syncs a step, over whole steps through the Lightning Trainer."""
    attention: bool = False
    """Also time the ways to attend over padded sources (today's masked SDPA, nested jagged tensors, FlexAttention,
    the unpadded bound) forward and backward on the timed batches' shapes (`benchmarks.attention`)."""
    overhead: bool = True
    """Measure per-trial overhead with `ablate train` subprocesses (about three trials of the trial preset)."""
    trial_preset: str = "smoke"
    """Preset of the trial whose overhead and wall time are measured."""
    trial_args: tuple[str, ...] = ()
    """Extra `ablate train` overrides for the overhead trials (tests use them to shorten the trial)."""
    corpus: str | None = None
    """Override data.corpus (a directory, a .tsv file); None: the preset's corpus."""
    settings: dict[str, dict[str, Any]] = field(default_factory=dict)
    """The row's settings overridden at the preset ({section: {field: value}}; --data.buckets 8 and the like)."""
    seed: int = 0
    """Seed of weights, dropout, the batch order and the choice of dev sentences."""

    def __post_init__(self) -> None:
        for name in ("warmup", "repeats", "decode_sentences", "decode_repeats", "beam_size"):
            minimum = 0 if name == "warmup" else 1
            if getattr(self, name) < minimum:
                raise AblateError(f"--{name} must be >= {minimum}, got {getattr(self, name)}")


@dataclass(frozen=True)
class Setup:
    """The benchmarked run (its resolved config), the torch device and the precision every measurement uses."""

    run: Any
    """The row's `RunConfig` at the preset, its model's vocabulary set to the prepared corpus's."""
    device: Any
    """torch.device."""
    precision: Precision
    """'32-true' or 'bf16-mixed' (resolved from BenchConfig.precision)."""
    rows: dict[str, Any] = field(default_factory=dict)
    """The `row:NAME` peers' model configs (`ModelConfig`), by peer name."""

    @property
    def cfg(self):
        """The model's config (`ModelConfig`)."""
        return self.run.model

    def of_row(self, peer: str) -> Setup:
        """This setup with a `row:NAME` peer's model config in place of the benchmarked row's."""
        return replace(self, run=replace(self.run, model=self.rows[peer]))
