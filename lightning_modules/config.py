"""Configuration of the model and of its training recipe: one frozen dataclass per concern.

Field names follow the paper (Vaswani et al., 2017, Table 3): N -> `n_layers`, h -> `n_heads`, P_drop -> `p_drop`,
eps_ls -> `label_smoothing`. Every default is the paper's base model; every departure from the paper is a field,
including the later components of a "modern" block (`norm_type`, `activation`, `positions` 'rope', `n_kv_heads`,
`qk_norm`, `bias`: the `modern` study), each with the paper's behaviour as its default.
"""

from __future__ import annotations

import functools
import types
from dataclasses import asdict, dataclass, replace
from typing import Any, Literal, Union, cast, get_args, get_origin, get_type_hints

from ablate.data.errors import ConfigError
from ablate.lightning_modules import card


def _check(cond: bool, name: str, msg: str) -> None:
    if not cond:
        raise ConfigError(f"{name}: {msg}")


def _check_floats(obj: object, section: str) -> None:
    """Every float field holds a number (or null where it may), before a range check compares it: `p_drop: null` in
    a study file is one line naming the field, not a TypeError."""
    for name, hint in _hints(type(obj)).items():
        args = get_args(hint) if get_origin(hint) in (Union, types.UnionType) else (hint,)
        if float not in args:
            continue
        value, nullable = getattr(obj, name), type(None) in args
        number = isinstance(value, (int, float)) and not isinstance(value, bool)
        _check(number or (nullable and value is None), f"{section}.{name}",
               f"must be a number{' or null' if nullable else ''}, got {value!r}")  # fmt: skip


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    return get_type_hints(cls)


@functools.cache
def _choices(cls: type, name: str) -> tuple[str, ...]:
    """The values a Literal field allows, read from its annotation: the one list of a structural choice's names."""
    return get_args(get_type_hints(cls)[name])


@dataclass(frozen=True, kw_only=True)
class ModelConfig:
    """The encoder-decoder Transformer of section 3. Defaults are the base model of Table 3."""

    vocab_size: int = 37000
    """Size of the shared source/target subword vocabulary (section 5.1: about 37000 BPE tokens)."""
    n_layers: int = 6
    """N: identical layers in the encoder and in the decoder (section 3.1)."""
    d_model: int = 512
    """Width of every sub-layer output and of the embeddings (section 3.1)."""
    d_ff: int = 2048
    """Inner width of the position-wise feed-forward network (section 3.3)."""
    n_heads: int = 8
    """h: parallel attention heads (section 3.2.2)."""
    d_k: int | None = None
    """Query/key width per head. None means d_model / h. Independent of d_model / h: row B changes d_k alone."""
    d_v: int | None = None
    """Value width per head. None means d_model / h."""
    n_kv_heads: int | None = None
    """Key/value heads: grouped-query attention, each group of n_heads / n_kv_heads query heads sharing one key and
    value head (Ainslie et al., 2023, arXiv 2305.13245); 1 is multi-query attention (Shazeer, 2019, arXiv
    1911.02150). W_K and W_V project to n_kv_heads * d_k and n_kv_heads * d_v, and the decoder's key/value cache
    holds n_kv_heads heads. None means n_heads: the paper's multi-head attention."""
    qk_norm: bool = False
    """Normalise each head's queries and keys (a `norm_type` norm over d_k, shared by the heads) before their dot
    product (Henry et al., 2020, arXiv 2010.04245; Dehghani et al., 2023, arXiv 2302.05442). The paper has none."""
    bias: bool = True
    """Biases in the attention projections and the feed-forward network, as in the paper's model; false drops them
    (PaLM, Chowdhery et al., 2022, arXiv 2204.02311). LayerNorm keeps its own shift (RMSNorm has none)."""
    p_drop: float = 0.1
    """P_drop: residual dropout on each sub-layer output and on the embedding + position sums (section 5.4)."""
    p_drop_attn: float = 0.0
    """Dropout on the attention weights. The paper uses none; tensor2tensor's later default is 0.1."""
    p_drop_relu: float = 0.0
    """Dropout on the activation's output inside the feed-forward network (in a gated one, on the gated product).
    The paper uses none."""
    label_smoothing: float = 0.1
    """eps_ls of section 5.4: hurts perplexity, helps accuracy and BLEU."""
    norm: Literal["post", "pre"] = "post"
    """'post': LayerNorm(x + Sublayer(x)) as in the paper; 'pre': x + Sublayer(LayerNorm(x)) (row F1)."""
    norm_type: Literal["layernorm", "rmsnorm"] = "layernorm"
    """Which norm `norm` places: 'layernorm' as in the paper (Ba et al., 2016), or 'rmsnorm', x / RMS(x) * g with
    no mean subtraction and no bias (Zhang and Sennrich, 2019, arXiv 1910.07467). Also the norm of `qk_norm`."""
    activation: Literal["relu", "gelu", "swiglu", "geglu"] = "relu"
    """The feed-forward network's nonlinearity: 'relu' as in section 3.3, 'gelu' (Hendrycks and Gimpel, 2016), or
    the gated linear units of Shazeer (2020, arXiv 2002.05202): FFN(x) = (act(x W) * x V) W_2 with act = Swish
    ('swiglu') or GELU ('geglu'). For a gated unit d_ff is the inner width of each of the two input projections W
    and V, so it has three d_model x d_ff matrices against the paper's two: a row that keeps the parameter count
    sets d_ff to about 2/3 of the ungated one (2048 -> 1360 in the `modern` study, a multiple of 16 that scales)."""
    positions: Literal["sinusoidal", "learned", "rope", "none"] = "sinusoidal"
    """Sinusoidal encodings of section 3.5 added to the embeddings, learned position embeddings (row E), 'rope':
    rotary embeddings that rotate the queries and keys of self-attention by their positions, so that q . k depends
    on relative position only (Su et al., 2021, arXiv 2104.09864; cross-attention gets none and nothing is added
    at the input), or 'none' (no position information at all)."""
    max_len: int = 1024
    """Longest sequence the positions cover. Learned positions have exactly this many; longer input is an error."""
    tie_embeddings: bool = True
    """Share one matrix between source embedding, target embedding and pre-softmax projection (section 3.4)."""
    scale_embeddings: bool = True
    """Multiply embeddings by sqrt(d_model) (section 3.4)."""
    layer_norm_eps: float = 1e-6
    """Epsilon of every norm, LayerNorm or RMSNorm (tensor2tensor's value)."""
    pad_id: int = 0
    """Id of the padding token: masked in attention and ignored by the loss."""
    kernels: Literal["auto", "reference", "cpu", "jagged"] = "auto"
    """How attention and dropout are computed (same functions, different speed; `lightning_modules/kernels.py`):
    'reference' = PyTorch's SDPA and nn.Dropout, 'cpu' = the routes measured faster on CPUs, 'jagged' = the
    reference with the source's padded keys dropped (nested jagged tensors) instead of masked in training, so a GPU
    can run the flash kernel (eager; not yet timed on a card: `ablate bench --attention` measures it), 'auto' =
    'reference' where CUDA is available, else 'cpu' ('cpu' also for a run whose hardware.accelerator is 'cpu'; what a
    card takes is listed in `lightning_modules/card.py`). Not a departure from the paper: results differ only in
    rounding."""

    def __post_init__(self) -> None:
        _check_floats(self, "model")
        for name in ("vocab_size", "n_layers", "d_model", "d_ff", "n_heads", "max_len"):
            value = getattr(self, name)
            _check(isinstance(value, int) and value > 0, f"model.{name}", f"must be a positive integer, got {value!r}")
        for name in ("d_k", "d_v"):
            value = getattr(self, name)
            _check(
                value is None or (isinstance(value, int) and value > 0),
                f"model.{name}",
                f"must be a positive integer or null (= d_model / n_heads), got {value!r}",
            )
        if self.d_k is None or self.d_v is None:
            _check(
                self.d_model % self.n_heads == 0,
                "model.n_heads",
                f"d_model={self.d_model} is not divisible by n_heads={self.n_heads}; set d_k and d_v explicitly",
            )
        for name in ("p_drop", "p_drop_attn", "p_drop_relu", "label_smoothing"):
            value = getattr(self, name)
            _check(0.0 <= value < 1.0, f"model.{name}", f"must be in [0, 1), got {value!r}")
        for name in ("norm", "norm_type", "activation", "positions", "kernels"):
            allowed, value = _choices(ModelConfig, name), getattr(self, name)
            _check(value in allowed, f"model.{name}", f"must be one of {', '.join(map(repr, allowed))}, got {value!r}")
        for name in ("qk_norm", "bias"):
            value = getattr(self, name)
            _check(isinstance(value, bool), f"model.{name}", f"must be true or false, got {value!r}")
        _check(
            self.n_kv_heads is None or (isinstance(self.n_kv_heads, int) and self.n_kv_heads > 0),
            "model.n_kv_heads",
            f"must be a positive integer or null (= n_heads), got {self.n_kv_heads!r}",
        )
        _check(
            self.n_heads % self.kv_heads == 0,
            "model.n_kv_heads",
            f"must divide n_heads={self.n_heads} (each key/value head serves a whole group), got {self.n_kv_heads}",
        )
        _check(0 <= self.pad_id < self.vocab_size, "model.pad_id", f"must be an id < vocab_size, got {self.pad_id}")

    @property
    def head_dim_k(self) -> int:
        """d_k resolved: the configured value, or d_model / h (the one place this default is applied)."""
        return self.d_k if self.d_k is not None else self.d_model // self.n_heads

    @property
    def head_dim_v(self) -> int:
        """d_v resolved: the configured value, or d_model / h."""
        return self.d_v if self.d_v is not None else self.d_model // self.n_heads

    @property
    def kv_heads(self) -> int:
        """n_kv_heads resolved: the configured value, or n_heads (multi-head attention)."""
        return self.n_kv_heads if self.n_kv_heads is not None else self.n_heads

    def resolved(self) -> dict:
        """The config as a dict with d_k and d_v filled in: what gets logged and compared."""
        return {**asdict(self), "d_k": self.head_dim_k, "d_v": self.head_dim_v}


@dataclass(frozen=True, kw_only=True)
class TrainConfig:
    """The training recipe of section 5 and the decoding of section 6.1. Defaults are the paper's base run."""

    max_steps: int = 100_000
    """Optimizer updates (section 5.2: 100K for base, 300K for big)."""
    warmup_steps: int = 4000
    """warmup_steps of equation (3)."""
    lr_factor: float = 1.0
    """Multiplier on equation (3): lr = factor * d_model^-0.5 * min(step^-0.5, step * warmup^-1.5). Paper: 1."""
    cooldown_frac: float = 0.0
    """Over the last fraction of max_steps, the learning rate of equation (3) is multiplied by a factor falling
    linearly to zero (a warmup-stable-decay cooldown: Hagele et al., 2024, arXiv 2405.18392; a run that ends
    annealed is close to what its budget can give, Li et al., ICLR 2020). 0: the paper's schedule, never annealed."""
    budgets: tuple[float, ...] = ()
    """Shorter budgets scored from the same run, as fractions of max_steps (e.g. [0.5]): the run saves its state
    where that budget's cooldown would begin (the schedules agree up to there), trains the cooldown from it as a
    branch, scores it like the final model (dev, test, per-sentence statistics), and goes on. A branch equals a
    separate run trained to that budget with the same seed. Empty: one budget, max_steps (the paper's)."""
    adam_betas: tuple[float, float] = (0.9, 0.98)
    """Adam beta1, beta2 (section 5.3)."""
    adam_eps: float = 1e-9
    """Adam epsilon (section 5.3)."""
    tokens_per_update: int | None = None
    """Target tokens (source + target) per optimizer update. Gradients are accumulated over
    ceil(tokens_per_update / data.tokens_per_batch / world_size) batches. None: one batch per update."""
    grad_clip: float | None = None
    """Clip the gradient norm to this value. The paper does not clip."""
    val_every: int = 1000
    """Validate (loss, perplexity, BLEU) every this many optimizer updates."""
    val_max_sentences: int | None = None
    """Decode at most this many dev sentences for BLEU during training (None: all). Loss/PPL use the whole set."""
    final_full_validation: bool = True
    """After training, score BLEU on the whole dev set even if val_max_sentences limits the periodic checks."""
    beam_size: int = 4
    """Beam width for dev BLEU (section 6.1: 4). 1 means greedy search."""
    length_penalty: float = 0.6
    """alpha of the GNMT length penalty ((5 + len) / 6) ^ alpha (section 6.1: 0.6)."""
    max_len_a: float = 1.0
    """Maximum output length = max_len_a * source length + max_len_b (section 6.1: input + 50)."""
    max_len_b: int = 50
    """See max_len_a."""
    average_last: int = 0
    """Average the weights of the last k validation checkpoints at the end of training (0: off). The paper
    averages 5 (base) or 20 (big) checkpoints for Table 2, none for Table 3."""
    test_eval: bool = True
    """Once training reaches max_steps, decode the whole test split with the final (or averaged) weights, with the
    dev decoding's beam search (beam_size, length_penalty, max_len_a/b), and score it with sacreBLEU (BLEU and chrF,
    with their signatures): the record's test_* metrics. The paper reports test BLEU (Table 2, newstest2014);
    Table 3 itself is on dev."""
    precision: Literal["auto", "32-true", "bf16-mixed", "16-mixed"] = "auto"
    """'auto': bf16 mixed precision on a GPU that supports it, fp32 on CPU (bf16 is slower on CPUs without AMX:
    docs/reference/code-figures.md, "lightning_modules/config.py").
    What a card takes, and the lease that measured it: `lightning_modules/card.py`."""
    compile: bool = False
    """Compile the training forward with torch.compile, once for every batch shape (dynamic shapes; graphs cached on
    disk for the next trial). Worth it on a GPU: fused element-wise work. On a CPU the hand-written kernels are faster
    than compiled code, and a cold compile adds its own cost
    (docs/reference/code-figures.md, "lightning_modules/config.py")."""
    compile_scope: Literal["model", "layers"] = "layers"
    """What train.compile compiles: 'layers', each encoder and decoder layer in place, the N identical layers sharing
    one graph (PyTorch's regional compilation); 'model', the whole training forward as one graph, which also fuses
    across layers. A cold compile by layers costs a layer's, not the model's: by layers the paper base reached its
    first compiled step where the whole model's compile did not finish on a card, and took far longer on a CPU core
    (docs/reference/code-figures.md, "lightning_modules/config.py").
    Evaluation and decoding stay eager either way."""
    decoding: Literal["auto", "dynamic", "static"] = "auto"
    """How beam search runs (the same hypotheses either way, tested): 'dynamic' (`decoding.beam_search`: finished
    sentences leave the batch, the cache grows), 'static' (`static_decoding.static_beam_search`: fixed shapes, no
    host sync inside a step, each step one replayed CUDA graph on a GPU), 'auto': dynamic, on a card too until a
    lease has measured static decoding there (`lightning_modules/card.py`; a CPU gains nothing from fixed shapes and
    would attend over the whole cache). Greedy search (beam 1) is always the dynamic one."""
    cuda_graphs: bool = False
    """With train.compile, on a GPU: replay the compiled training forward and backward as CUDA graphs (torch.compile's
    'reduce-overhead' mode), one recorded per batch shape, so that a small model's step is a few graph launches
    instead of hundreds of kernel launches the card waits on. Needs fixed batch shapes (data.buckets) and the whole
    model compiled (train.compile_scope 'model': a graph per layer would leave the launches between them). On a CPU
    it is train.compile alone (PyTorch records no graph there)."""
    replay_step: bool = False
    """Record the whole training step (forward, loss, backward and Adam, its learning rate a device tensor) as one
    CUDA graph per batch shape and replay it (`lightning_modules/graphed.py`), on eager kernels: no compile, and a
    small model's step becomes one graph launch instead of hundreds of kernel launches, with no host sync. The step's
    inputs are copied into fixed buffers; the first batch of each shape trains eagerly and records its graph. On a
    CPU the same step runs without a graph (what the tests check against the ordinary step). Off until a lease
    measures it on a card (`card.py`'s rule). Needs one device and no gradient accumulation; with data.buckets a run
    records a handful of graphs."""
    cudnn_attention: bool = False
    """Let PyTorch's attention dispatch pick cuDNN's fused attention on a GPU (its default on Hopper cards). Off: the
    flash and memory-efficient kernels, which need no per-shape plan. cuDNN builds a plan for every new shape, and a
    run sees many: batch shapes, the dev set's eval batches, and beam search's keys, one length longer each step.
    Off, a tiny run on a card was faster, at the same dev perplexity within bf16 noise. Only on CUDA; CPUs have no
    cuDNN. Timed: docs/reference/code-figures.md, "lightning_modules/config.py"."""
    fused_loss: bool = False
    """Compute the pre-softmax projection and the label-smoothed loss together, chunk by chunk of target tokens, so the
    (tokens x vocabulary) logits never exist whole (`kernels.FusedLinearLabelSmoothedNLL`): the same loss within
    float rounding, less memory at a large vocabulary. Off by default so that the archived tiny studies reproduce to
    the digit; the paper preset turns it on."""
    seed: int = 0
    """Seed of the weights' initialisation and of dropout."""
    nan_check: bool = True
    """Stop a run whose training loss becomes NaN or inf, or blows up while staying finite (after warmup, a loss
    above 3x its first value, or a dev perplexity above the vocabulary size, a uniform guess's), as diverged."""
    keep_checkpoints: Literal["last", "best", "none"] = "last"
    """Checkpoints kept once a run has finished: 'last' (the final weights), 'best' (the best dev BLEU's) or 'none'.
    Until then last.ckpt is kept (and rewritten after every validation) so an interrupted run resumes."""

    def __post_init__(self) -> None:
        _check_floats(self, "train")
        for name in ("max_steps", "val_every", "beam_size"):
            value = getattr(self, name)
            _check(isinstance(value, int) and value > 0, f"train.{name}", f"must be a positive integer, got {value!r}")
        _check(self.warmup_steps >= 1, "train.warmup_steps", f"must be >= 1, got {self.warmup_steps}")
        _check(0 <= self.seed < 2**32, "train.seed", f"must be in [0, 2^32) (what seeds a generator), got {self.seed}")
        _check(self.lr_factor > 0, "train.lr_factor", f"must be positive, got {self.lr_factor}")
        _check(
            len(self.adam_betas) == 2 and all(0 <= b < 1 for b in self.adam_betas),
            "train.adam_betas",
            f"must be two values in [0, 1), got {self.adam_betas!r}",
        )
        _check(self.adam_eps > 0, "train.adam_eps", f"must be positive, got {self.adam_eps}")
        _check(
            self.tokens_per_update is None or self.tokens_per_update > 0,
            "train.tokens_per_update",
            f"must be positive or null, got {self.tokens_per_update}",
        )
        _check(self.grad_clip is None or self.grad_clip > 0, "train.grad_clip", "must be positive or null")
        _check(
            self.val_max_sentences is None or self.val_max_sentences > 0,
            "train.val_max_sentences",
            "must be positive or null",
        )
        _check(self.length_penalty >= 0, "train.length_penalty", f"must be >= 0, got {self.length_penalty}")
        _check(self.max_len_a >= 0 and self.max_len_b >= 1, "train.max_len_b", "max_len_a >= 0 and max_len_b >= 1")
        _check(0.0 <= self.cooldown_frac < 1.0, "train.cooldown_frac", f"must be in [0, 1), got {self.cooldown_frac}")
        _check(
            all(0.0 < b < 1.0 for b in self.budgets) and len(set(self.budgets)) == len(self.budgets),
            "train.budgets",
            f"must be distinct fractions of max_steps in (0, 1), got {list(self.budgets)}",
        )
        for fraction in self.budgets:
            _check(
                fork_step(self.max_steps, fraction, self.cooldown_frac) >= 1,
                "train.budgets",
                f"budget {fraction:g} of {self.max_steps} steps is too short to branch from: raise train.max_steps",
            )
        steps = [budget_steps(self.max_steps, f) for f in self.budgets]
        _check(
            len(set(steps)) == len(steps) and self.max_steps not in steps,
            "train.budgets",
            f"{list(self.budgets)} of {self.max_steps} steps round to the same step counts {steps}: use fewer budgets",
        )
        _check(self.average_last >= 0, "train.average_last", f"must be >= 0, got {self.average_last}")
        _check(
            not self.cuda_graphs or (self.compile and self.compile_scope == "model"),
            "train.cuda_graphs",
            "replays the compiled model: set train.compile true and train.compile_scope model with it",
        )
        _check(
            not (self.replay_step and (self.compile or self.cuda_graphs)),
            "train.replay_step",
            "records the eager step itself: set train.compile false and train.cuda_graphs false with it",
        )


def paper_lr(step: int, d_model: int, warmup_steps: int, factor: float = 1.0) -> float:
    """Equation (3): lrate = factor * d_model^-0.5 * min(step^-0.5, step * warmup_steps^-1.5), step counted from 1."""
    step = max(step, 1)
    return factor * d_model**-0.5 * min(step**-0.5, step * warmup_steps**-1.5)


def cooldown_steps(max_steps: int, cooldown_frac: float) -> int:
    """How many of a run's last updates are annealed (train.cooldown_frac of max_steps, rounded)."""
    return round(max_steps * cooldown_frac)


def cooldown_factor(step: int, max_steps: int, cooldown_frac: float) -> float:
    """The multiplier on equation (3) at update `step` (counted from 1) of a run of max_steps: 1 until the cooldown
    begins, then falling linearly, 1 - j / (C + 1) at its j-th update, so the last update still moves the weights and
    the next one would have had a learning rate of zero."""
    length = cooldown_steps(max_steps, cooldown_frac)
    into = step - (max_steps - length)
    return 1.0 if into <= 0 else max(0.0, 1.0 - into / (length + 1))


def budget_steps(max_steps: int, fraction: float) -> int:
    """The steps of a shorter budget (train.budgets) of a run of max_steps."""
    return max(1, round(max_steps * fraction))


def fork_step(max_steps: int, fraction: float, cooldown_frac: float) -> int:
    """Where a budget's branch leaves the main run: the start of that budget's own cooldown, up to which its
    schedule and the main run's are the same."""
    steps = budget_steps(max_steps, fraction)
    return steps - cooldown_steps(steps, cooldown_frac)


__all__ = [
    "ModelConfig",
    "TrainConfig",
    "budget_steps",
    "cooldown_factor",
    "cooldown_steps",
    "for_compile",
    "fork_step",
    "paper_lr",
]


def on_cpu(model: ModelConfig) -> ModelConfig:
    """The model as it runs on a CPU: 'auto' kernels are CUDA's wherever a GPU is visible, so a run or a bench told
    to use the CPU takes the CPU's (unless ABLATE_CARD asks for the card's: `card`); kernels asked for by name are
    kept."""
    return replace(model, kernels="cpu") if model.kernels == "auto" and not card.on_card(False) else model


def for_compile(model: ModelConfig) -> ModelConfig:
    """The model as train.compile builds it: 'auto' kernels are the reference ones on every device (inductor fuses
    dropout and attention itself, and the CPU kernels' random draws would break its graph); named kernels are kept."""
    return replace(model, kernels="reference") if model.kernels == "auto" else model


Precision = Literal["32-true", "bf16-mixed", "16-mixed"]
"""A resolved precision, as Lightning's Trainer takes it."""


def resolve_precision(choice: Literal["auto"] | Precision, *, cuda_bf16: bool) -> Precision:
    """train.precision (or `ablate bench --precision`) resolved: 'auto' is bf16 autocast on a bf16-capable CUDA
    device (or under ABLATE_CARD, `card`) and fp32 elsewhere (bf16 is slower on CPUs without AMX: see
    `TrainConfig.precision`); anything else as given. The one rule for training and the benchmark alike; the caller
    says whether it runs on a bf16-capable GPU."""
    return cast(Precision, card.resolve("train.precision", choice, cuda_bf16))
