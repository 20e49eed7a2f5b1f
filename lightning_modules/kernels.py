"""Kernels: how the model's attention, dropout and decoding cache are computed, chosen once when it is built.

`transformer.py` is the paper's model written with PyTorch's own operators (`F.scaled_dot_product_attention`,
`nn.Dropout`). This module holds the faster routes measured on CPUs, behind one switch, `ModelConfig.kernels`:

- "reference": PyTorch's operators. The GPU path (fused flash / memory-efficient SDPA, fused dropout).
- "cpu": batched-matmul attention with a hand-written backward for short sequences (`MatmulAttention`), dropout
  masks from 15-bit draws (`cpu_dropout`), cache rows gathered straight into their new buffer.
- "auto" (the default): "reference" where a CUDA GPU is visible, else "cpu".

Both compute the same functions and differ only in rounding and in which random numbers dropout draws.

Both routes support every model knob, with no fallback: the kernels see only what section 3.2 defines, queries,
keys and values of shape (B, h, L, d) and a padding mask. Norms (model.norm_type, model.qk_norm), gated FFNs
(model.activation), biases (model.bias) and rotary positions (model.positions 'rope': queries and keys are rotated
before attention, keys before they are cached) are computed in the model's own modules (`modern.py`), the same on
either route; grouped-query attention (model.n_kv_heads) caches n_kv_heads heads, which `gather_rows` reorders
whatever their number, and repeats them to h heads just before `attention` (`modern.RepeatKV`).
`ablate bench` (benchmarks/bench.py: `cpu_choices`) measures the "cpu" route against the reference one.
The label-smoothed loss (`LabelSmoothedNLL`) saves memory on every device and is chosen in `module.py`; with
`train.fused_loss` the output projection joins it (`FusedLinearLabelSmoothedNLL`), and `train.compile` goes through
`compile_for_training`.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Literal, cast

import torch
import torch.nn.functional as F
from ablate.lightning_modules import card
from torch import Tensor, nn
from torch._inductor import config as inductor

KernelChoice = Literal["auto", "reference", "cpu", "jagged"]


@dataclass(frozen=True)
class Kernels:
    """The three device-specific operations the model delegates; built by `kernels_for`."""

    name: str
    """'reference', 'cpu' or 'jagged' ('auto' resolved)."""
    attention: Callable[[Tensor, Tensor, Tensor, Tensor | None, bool, float], Tensor]
    """softmax(Q K^T / sqrt(d_k)) V over (B, h, L, d) tensors; mask (B, 1, 1, S) True = attend."""
    dropout: Callable[[float], nn.Module]
    """A dropout layer with probability p (training mode drops, eval mode is the identity)."""
    gather_rows: Callable[[Tensor, Tensor, Tensor], None]
    """gather_rows(prefix, rows, out): out[:] = prefix.index_select(0, rows) (beam search's cache reorder)."""


def kernels_for(choice: KernelChoice, reference_parts: tuple[str, ...] = ()) -> Kernels:
    """Resolve the config switch: 'auto' takes the reference kernels when CUDA is available (or under ABLATE_CARD:
    `card`), the CPU ones else.

    `reference_parts` (names of Kernels fields: 'attention', 'dropout', 'gather_rows') swaps single parts back to
    the reference ones: `ablate bench` measures what each CPU kernel buys on its own that way."""
    if choice == "auto":
        choice = cast(KernelChoice, card.resolve("model.kernels", choice, torch.cuda.is_available()))
    reference = Kernels("reference", sdpa_attention, nn.Dropout, _gather_copy)
    if choice == "reference":
        return reference
    if choice == "jagged":
        return replace(reference, name="jagged", attention=jagged_attention)
    if choice != "cpu":
        raise ValueError(f"unknown kernels {choice!r}: use 'auto', 'reference', 'cpu' or 'jagged'")
    cpu = Kernels("cpu", cpu_attention, CpuDropout, _gather_into)
    return replace(cpu, **{part: getattr(reference, part) for part in reference_parts})


# ----------------------------------------------------------------------------------------------------- reference
def sdpa_attention(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, causal: bool, dropout_p: float) -> Tensor:
    """Equation 1 through F.scaled_dot_product_attention (flash / memory-efficient kernels on GPUs)."""
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout_p, is_causal=causal)


def jagged_attention(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, causal: bool, dropout_p: float) -> Tensor:
    """Equation 1 with the padded keys dropped instead of masked, so that SDPA can run the flash kernel on a GPU
    (a mask rules it out: the memory-efficient kernel runs instead). Keys and values become nested jagged tensors,
    the queries jagged ones with every row whole, so every query row gets what the masked SDPA gives it (tested
    equal with gradients). Used where the mask is a source's key padding in training (right-padded batches: each
    row's kept keys come first); causal attention, decoding's caches and unmasked batches take the reference SDPA.
    On a CPU SDPA has no jagged kernel and runs its math path (slower); `ablate bench --attention` times it."""
    if mask is None or causal or not torch.is_grad_enabled():
        return sdpa_attention(q, k, v, mask, causal, dropout_p)
    return jagged_keys_attention(q, k, v, mask[:, 0, 0, :], dropout_p)


def jagged_keys_attention(q: Tensor, k: Tensor, v: Tensor, keep: Tensor, dropout_p: float = 0.0) -> Tensor:
    """q (B, h, L, d), k/v (B, h, S, d), keep (B, S) True for each row's first kept keys -> (B, h, L, d_v)."""
    batch, heads, length, dim = q.shape
    lengths = keep.sum(-1)
    offsets = torch.cat([lengths.new_zeros(1), lengths.cumsum(0)])

    def keys(x: Tensor) -> Tensor:  # (B, h, S, d) -> (B, h, j, d), padding dropped
        return torch.nested.nested_tensor_from_jagged(x.transpose(1, 2)[keep], offsets).transpose(1, 2)

    whole = torch.arange(batch + 1, device=q.device) * length
    queries = torch.nested.nested_tensor_from_jagged(q.transpose(1, 2).reshape(-1, heads, dim), whole)
    out = F.scaled_dot_product_attention(queries.transpose(1, 2), keys(k), keys(v), dropout_p=dropout_p)
    return out.transpose(1, 2).values().view(batch, length, heads, -1).transpose(1, 2)


def _gather_copy(prefix: Tensor, rows: Tensor, out: Tensor) -> None:
    out.copy_(prefix.index_select(0, rows))


# ----------------------------------------------------------------------------------------------------------- CPU
MATMUL_ATTENTION_MAX_SCORES = 96 * 96
"""On CPU, attention with at most this many scores per head (query length x key length) runs as batched matmuls
(`MatmulAttention`) instead of SDPA. PyTorch's CPU flash kernel pays a fixed cost per (batch, head, query block)
that dominates short sequences; the two meet near this length, beyond which the flash kernel's memory traffic wins
(docs/reference/code-figures.md, "lightning_modules/kernels.py")."""


def cpu_attention(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, causal: bool, dropout_p: float) -> Tensor:
    """Equation 1 on CPU: SDPA for long sequences, batched matmuls for short ones (MATMUL_ATTENTION_MAX_SCORES)."""
    length, keys = q.size(-2), k.size(-2)
    if length * keys > MATMUL_ATTENTION_MAX_SCORES:
        return sdpa_attention(q, k, v, mask, causal, dropout_p)
    bias = None  # additive: -inf where a query may not attend, broadcast to (B, h, L, S)
    if mask is not None:
        bias = torch.zeros(mask.shape, device=q.device).masked_fill_(~mask, float("-inf"))
    if causal:  # -inf above the diagonal, aligned as SDPA's is_causal: query i sees keys 0..i
        future = torch.full((length, keys), float("-inf"), device=q.device).triu_(1)
        bias = future if bias is None else future + bias
    if dropout_p or not (torch.is_grad_enabled() and (q.requires_grad or k.requires_grad or v.requires_grad)):
        # Decoding (no gradient: plain matmuls are faster than MatmulAttention's reshapes for one or a few queries),
        # or attention dropout (not in the paper's recipe): autograd around our dropout.
        scores = torch.matmul(q * q.size(-1) ** -0.5, k.transpose(-1, -2))
        weights = torch.softmax(scores if bias is None else scores.add_(bias), dim=-1)
        return torch.matmul(cpu_dropout(weights, dropout_p), v)
    return MatmulAttention.apply(q, k, v, bias)


def _bmm(a: Tensor, b: Tensor) -> Tensor:
    """a @ b for (n, r, m) @ (n, m, c). When c < r it returns (b^T a^T)^T: MKL's batched GEMM is slow for narrow
    outputs, such as attention weights times values with small heads. The result may be a transposed view. Timed:
    docs/reference/code-figures.md, "lightning_modules/kernels.py"."""
    if b.size(-1) < a.size(-2):
        return torch.bmm(b.transpose(1, 2), a.transpose(1, 2)).transpose(1, 2)
    return torch.bmm(a, b)


class MatmulAttention(torch.autograd.Function):
    """softmax(Q K^T / sqrt(d_k) + bias) V with a hand-written backward, for short sequences on CPU.

    Why not autograd over matmul/softmax/matmul: its backward computes dQ = dS K and dV = P^T dO as GEMMs with
    d_k-wide outputs, the slow shape for MKL when heads are small (`_bmm`). Here every product takes the faster
    orientation: at the tiny preset's head width a self-attention layer's forward and backward are faster than
    through SDPA or autograd over matmuls, and at the paper's head width it matches SDPA (timed:
    docs/reference/code-figures.md, "lightning_modules/kernels.py").
    """

    @staticmethod
    def forward(ctx, q: Tensor, k: Tensor, v: Tensor, bias: Tensor | None) -> Tensor:
        batch, heads, length, d_k = q.shape
        keys, d_v = k.size(2), v.size(3)
        q3, k3, v3 = (t.reshape(batch * heads, t.size(2), t.size(3)) for t in (q, k, v))
        scale = d_k**-0.5
        scores = _bmm(q3, k3.transpose(1, 2)).mul_(scale)  # (B*h, L, S)
        if bias is not None:
            scores = scores.view(batch, heads, length, keys).add_(bias).view(batch * heads, length, keys)
        weights = torch.softmax(scores, dim=-1)
        ctx.save_for_backward(q3, k3, v3, weights)
        ctx.scale = scale
        return _bmm(weights, v3).reshape(batch, heads, length, d_v)

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad_out: Tensor):
        q3, k3, v3, weights = ctx.saved_tensors
        batch, heads, length, d_v = grad_out.shape
        grad3 = grad_out.reshape(batch * heads, length, d_v)
        grad_v = _bmm(weights.transpose(1, 2), grad3)  # P^T dO
        grad_weights = _bmm(grad3, v3.transpose(1, 2))  # dO V^T
        # torch's own softmax backward (private: no public name)
        grad_scores = torch._softmax_backward_data(grad_weights, weights, -1, weights.dtype)  # pyright: ignore[reportPrivateImportUsage]
        grad_scores = grad_scores.mul_(ctx.scale)
        grad_q = _bmm(grad_scores, k3)  # dS K
        grad_k = _bmm(grad_scores.transpose(1, 2), q3)  # dS^T Q

        def unfold(t: Tensor) -> Tensor:
            return t.reshape(batch, heads, t.size(1), t.size(2))

        return unfold(grad_q), unfold(grad_k), unfold(grad_v), None


DROPOUT_LEVELS = 1 << 15
"""CPU dropout draws 15-bit uniform integers: p is rounded to a multiple of 1/32768 (0.1 -> 0.100006)."""


def cpu_dropout(x: Tensor, p: float) -> Tensor:
    """Training-mode dropout: each element kept with probability 1 - p and scaled by 1 / (1 - p), as nn.Dropout.

    It draws 4 masks per 64-bit random integer instead of one uniform float per element: PyTorch's CPU generator
    is sequential and F.dropout's `bernoulli_` costs a draw per element, which dominates a small model's dropout
    (timed against F.dropout and `torch.rand`:
    docs/reference/code-figures.md, "lightning_modules/kernels.py").
    Each int64 from `random_()` holds 63 random bits; viewed as four int16 and masked to 15 bits, they are four
    independent uniform draws from [0, 32768), and an element is kept when its draw is >= round(p * 32768).
    """
    if p == 0.0:
        return x
    if p == 1.0:
        return F.dropout(x, p, training=True)
    dropped = round(p * DROPOUT_LEVELS)
    n = x.numel()
    draws = torch.empty((n + 3) // 4, dtype=torch.int64, device=x.device).random_()
    keep = draws.view(torch.int16)[:n].view(x.shape).bitwise_and_(DROPOUT_LEVELS - 1) >= dropped
    return x * keep.to(x.dtype).mul_(DROPOUT_LEVELS / (DROPOUT_LEVELS - dropped))


class CpuDropout(nn.Module):
    """nn.Dropout through `cpu_dropout`."""

    def __init__(self, p: float) -> None:
        super().__init__()
        self.p = p

    def forward(self, x: Tensor) -> Tensor:
        return cpu_dropout(x, self.p) if self.training else x

    def extra_repr(self) -> str:
        return f"p={self.p}"


def _gather_into(prefix: Tensor, rows: Tensor, out: Tensor) -> None:
    """index_select written straight into the new cache buffer: one copy instead of two (timed on CPU only:
    docs/reference/code-figures.md, "lightning_modules/transformer.py")."""
    torch.index_select(prefix, 0, rows, out=out)


# ------------------------------------------------------------------------------------------------------- compile
COMPILE_WAIT_S = 600
"""The longest Inductor waits for one kernel from a compile worker; past it the compile fails with an error (torch's
default, 0, waits forever)."""


def compile_workers() -> None:
    """Inductor's compile workers, where they buy something, and never a wait without end (process-wide).

    A pool of as many workers as this process has threads (its share of the cores in a sweep; torch's default is
    every core of the machine, so 16 workers of 16 trials would each start 16): at one thread Inductor compiles in
    this process, and no worker exists that a signal to the process group can kill while the trainer waits on it
    (the 2026-12-04 lease's hang, docs/speed.md). Where a pool is kept, a dead or stuck worker fails the compile
    after COMPILE_WAIT_S with torch's error, which the check before step 1 turns into one line naming
    `--train.compile false`. TORCHINDUCTOR_COMPILE_THREADS and TORCHINDUCTOR_COMPILE_WORKER_WAIT_TIMEOUT, where set,
    win."""
    if "TORCHINDUCTOR_COMPILE_THREADS" not in os.environ:
        inductor.compile_threads = max(1, min(torch.get_num_threads(), inductor.decide_compile_threads()))
    if "TORCHINDUCTOR_COMPILE_WORKER_WAIT_TIMEOUT" not in os.environ:
        inductor.compile_worker_wait_timeout = COMPILE_WAIT_S


def compile_for_training(
    model: Callable[..., Tensor],
    backend: str = "inductor",
    scope: Literal["model", "layers"] = "layers",
    cuda_graphs: bool = False,
) -> Callable[..., Tensor]:
    """`train.compile`: the model compiled once for every batch shape (`torch.compile(dynamic=True)`).

    Dynamic shapes, not a graph per shape: a run sees up to data.buckets shapes (dozens with greedy batches), each
    static graph is a full compile, and a tiny trial would spend more on compiling than on training. One symbolic
    graph compiles once (a batch of a single pair may add a second: dynamo specialises sizes 0 and 1) and the batch
    shapes change nothing after. Inductor writes its own fused
    dropout and attention, so a compiled model takes the reference kernels (`lightning_modules.config.for_compile`):
    the CPU kernels' `random_` draws break its graph. Compiled graphs persist in TORCHINDUCTOR_CACHE_DIR (the
    trainer points it into the data cache), so the next trial of the same model starts warm. `backend`: 'eager'
    traces and guards the same way without generating code (tests count recompiles with it).

    `scope` (train.compile_scope): 'model' compiles the whole call as one graph; 'layers' compiles, in place, each
    layer of every nn.ModuleList of the module the call belongs to (PyTorch's "regional compilation"): the N identical
    layers share one compiled graph, so a cold compile costs a layer's, not the model's, and warm steps are the same,
    while embeddings, masks and the final norm stay eager. Compiled in place, the layers are compiled for every
    caller: run evaluation and decoding under `eager()`. `cuda_graphs` (train.cuda_graphs, scope 'model'):
    torch.compile's 'reduce-overhead' mode, which records the compiled forward and backward as CUDA graphs, one per
    batch shape, and replays them (on a CUDA device; elsewhere the same compiled code without graphs). Returns what to
    call.

    Floats are specialised (`torch._dynamo.config.specialize_float`, process-wide: a trial process compiles one
    model). Under dynamic=True dynamo otherwise traces every float attribute of a module (dropout's p, the embedding
    scale sqrt(d_model), nn.Embedding's norm_type) as a symbolic float, AOTAutograd's pass that turns them into tensors
    gives up on some, and the whole trace starts again with them specialised: the paper base's first compiled step
    paid for two traces instead of one (`tests/lightning_modules/test_fill_the_card.py` holds the count). They are
    constants of the config.

    The compile times behind these choices, on a CPU core and on cards:
    docs/reference/code-figures.md, "lightning_modules/kernels.py".

    Compile workers can never hang the trainer (`compile_workers`)."""
    torch._dynamo.config.specialize_float = True
    compile_workers()
    if scope == "layers":
        owner = getattr(model, "__self__", model)  # `features` is a bound method of the model
        compiled: list[str] = []  # the layers' names: a ModuleList inside a compiled layer is compiled with it
        for name, blocks in owner.named_modules():
            if isinstance(blocks, nn.ModuleList) and not any(name.startswith(f"{c}.") for c in compiled):
                for i, layer in enumerate(blocks):
                    layer.compile(dynamic=True, backend=backend)
                    compiled.append(f"{name}.{i}")
        return model
    return torch.compile(model, dynamic=True, backend=backend, mode="reduce-overhead" if cuda_graphs else None)


def eager():
    """A context in which compiled code runs eagerly (`torch.compiler.set_stance('force_eager')`): evaluation and
    decoding of a model whose layers train compiled (their shapes change every decoding step, and a decoder's cache
    is Python state that a graph would guard on)."""
    return torch.compiler.set_stance("force_eager")


# ------------------------------------------------------------------------------------------- label-smoothed loss
class LabelSmoothedNLL(torch.autograd.Function):
    """Per-token label-smoothed cross-entropy and unsmoothed NLL with a hand-written backward that never
    materialises log-probabilities. Equals F.cross_entropy(label_smoothing=eps, ignore_index=pad) (tested).

    Why not log_softmax + gather + mean under autograd (or F.cross_entropy(label_smoothing=...)): those keep a
    float32 (N, V) log-probability tensor for backward and build three more (N, V) tensors in it (the gather's
    scatter, the mean's expansion, their sum). Here forward keeps only the logits (which the output layer has
    anyway) and per-row log-sum-exp and mean; backward writes the gradient in one pass,
    d loss_i / d z_ik = (g_i + h_i) softmax_ik - eps g_i / V - [k = y_i] ((1 - eps) g_i + h_i), for upstream
    gradients g (loss) and h (nll). Rows are processed in chunks, so float32 temporaries stay bounded for bf16
    logits. Less memory above the logits and a faster step than autograd's, in fp32 and bf16 (measured at the
    paper's vocabulary: docs/reference/code-figures.md, "lightning_modules/kernels.py").
    """

    CHUNK = 1 << 24
    """Elements of (rows x V) per chunk of float32 temporaries (64 MB)."""

    @staticmethod
    def _rows(vocab: int) -> int:
        return max(1, LabelSmoothedNLL.CHUNK // max(vocab, 1))

    @staticmethod
    def forward(ctx, logits: Tensor, target: Tensor, eps: float, pad_id: int) -> tuple[Tensor, Tensor]:
        n, vocab = logits.shape
        acc = torch.promote_types(logits.dtype, torch.float32)  # float32 sums for bf16 logits
        lse = torch.empty(n, dtype=acc, device=logits.device)
        mean = torch.empty_like(lse)
        rows = LabelSmoothedNLL._rows(vocab)
        for i in range(0, n, rows):
            chunk = logits[i : i + rows].to(acc)
            torch.logsumexp(chunk, dim=-1, out=lse[i : i + rows])
            torch.mean(chunk, dim=-1, out=mean[i : i + rows])
        keep = (target != pad_id).to(acc)
        nll = (lse - logits.gather(-1, target.unsqueeze(-1)).squeeze(-1).to(acc)) * keep
        loss = (1.0 - eps) * nll + eps * (lse - mean) * keep
        ctx.save_for_backward(logits, target, lse, keep)
        ctx.eps = eps
        return loss, nll

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad_loss: Tensor | None, grad_nll: Tensor | None):
        logits, target, lse, keep = ctx.saved_tensors
        eps, (n, vocab) = ctx.eps, logits.shape
        g = grad_loss.to(lse.dtype) * keep if grad_loss is not None else torch.zeros_like(lse)
        h = grad_nll.to(lse.dtype) * keep if grad_nll is not None else torch.zeros_like(lse)
        softmax_weight, at_target, uniform = g + h, (1.0 - eps) * g + h, eps * g / vocab
        rows = LabelSmoothedNLL._rows(vocab)
        grad = None
        for i in range(0, n, rows):
            part = slice(i, i + rows)
            z = logits[part] - lse[part, None]  # a new float32 (or float64) tensor: logits are never modified
            z.exp_().mul_(softmax_weight[part, None]).sub_(uniform[part, None])
            z.scatter_add_(-1, target[part, None], -at_target[part, None])
            if rows >= n and z.dtype == logits.dtype:
                return z, None, None, None  # one chunk in the logits' dtype: z is the whole gradient
            if grad is None:
                grad = torch.empty_like(logits)
            grad[part] = z
        return grad, None, None, None


class FusedLinearLabelSmoothedNLL(torch.autograd.Function):
    """The output projection and the label-smoothed loss together, chunk by chunk of rows: the (N, V) logits never
    exist whole, in any dtype (`train.fused_loss`).

    Forward takes the decoder's final states x (N, d) and the pre-softmax weights W (V, d, shared with the
    embeddings), and for each chunk of rows computes z = x W^T, the per-row loss and NLL in float32 (as
    `LabelSmoothedNLL`), and at once the gradient of the chunk's summed loss: dz = softmax(z) - eps / V -
    (1 - eps) onehot(y) on kept rows, dx = dz W, dW += dz^T x. Backward only scales the stored dx and dW by the
    upstream gradient of the sum, so the step does the same three matrix products as the unfused one and no
    recomputation. Only the summed loss carries a gradient; the per-row loss and NLL come back detached (for logging
    and perplexity), as training uses them. Equals `LabelSmoothedNLL` over `x W^T` within float rounding (tested).

    Why our own and not Liger Kernel's `LigerFusedLinearCrossEntropyLoss` (the same algorithm, in Triton): Liger runs
    on CUDA only, and this runs on every device (and under autocast) with PyTorch's own operators; one code path,
    tested on the CPU that CI has. The chunk loop's element-wise work is what a Triton kernel would fuse further.
    """

    CHUNK = 1 << 25
    """Elements of (rows x V) per chunk of float32 temporaries (128 MB): about 900 rows at the paper's V = 37000."""

    @staticmethod
    def chunk(z: Tensor, y: Tensor, eps: float, pad_id: int, acc: torch.dtype) -> tuple[Tensor, Tensor, Tensor]:
        """One chunk's per-row loss and NLL (in `acc`) and the gradient of their summed loss for logits z (r, V),
        targets y (r, 1), in z's dtype. Element-wise work only: `compiled_chunk` fuses it into a few kernels."""
        vocab = z.size(-1)
        zf = z.to(acc)
        keep = (y != pad_id).to(acc)  # (r, 1)
        lse = torch.logsumexp(zf, dim=-1, keepdim=True)
        nll = (lse - zf.gather(-1, y)) * keep
        loss = (1.0 - eps) * nll + eps * (lse - zf.mean(-1, keepdim=True)) * keep
        dz = (zf - lse).exp_().sub_(eps / vocab)
        dz = dz.scatter_add_(-1, y, torch.full_like(keep, eps - 1.0)).mul_(keep)
        return loss.squeeze(-1), nll.squeeze(-1), dz.to(z.dtype)

    @staticmethod
    def forward(
        ctx, x: Tensor, weight: Tensor, target: Tensor, eps: float, pad_id: int, compiled: bool = False
    ) -> tuple[Tensor, ...]:
        """`compiled` (train.compile): the chunks' element-wise work through `compiled_chunk`."""
        device = x.device.type
        dtype = torch.get_autocast_dtype(device) if torch.is_autocast_enabled(device) else x.dtype
        acc = torch.promote_types(dtype, torch.float32)  # float32 sums for bf16 products
        xc, wc = x.to(dtype), weight.to(dtype)
        (n, _), vocab = x.shape, weight.size(0)
        loss, nll = (torch.empty(n, dtype=acc, device=x.device) for _ in range(2))
        grad_x = torch.empty_like(xc)
        grad_w = torch.zeros(weight.shape, dtype=acc, device=x.device)
        rows = max(1, FusedLinearLabelSmoothedNLL.CHUNK // max(vocab, 1))
        chunk = compiled_chunk() if compiled else FusedLinearLabelSmoothedNLL.chunk
        for i in range(0, n, rows):
            part = slice(i, i + rows)
            z = xc[part] @ wc.t()  # (r, V) logits of this chunk
            loss[part], nll[part], dz = chunk(z, target[part, None], eps, pad_id, acc)
            grad_x[part] = dz @ wc
            grad_w += (dz.t() @ xc[part]).to(acc)
        ctx.save_for_backward(grad_x, grad_w)
        ctx.dtypes = (x.dtype, weight.dtype)
        ctx.mark_non_differentiable(loss, nll)
        return loss.sum(), loss, nll

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad_sum: Tensor, *_unused):
        grad_x, grad_w = ctx.saved_tensors
        x_dtype, w_dtype = ctx.dtypes
        return (grad_x * grad_sum).to(x_dtype), (grad_w * grad_sum).to(w_dtype), None, None, None, None


@functools.cache
def compiled_chunk():
    """`FusedLinearLabelSmoothedNLL.chunk` through torch.compile, built once a process (dynamic shapes: the last
    chunk of a batch is shorter). Its eight passes over each (rows x V) chunk become a few fused kernels."""
    return torch.compile(FusedLinearLabelSmoothedNLL.chunk, dynamic=True)


__all__ = [
    "FusedLinearLabelSmoothedNLL",
    "KernelChoice",
    "Kernels",
    "jagged_attention",
    "jagged_keys_attention",
    "kernels_for",
    "compile_for_training",
    "eager",
    "LabelSmoothedNLL",
    "MatmulAttention",
    "CpuDropout",
]
