"""Behaviour of the Transformer that real bugs break: masks, caches, decoding, loss, schedule, config validation."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
import torch
from ablate.data.errors import AblateError, ConfigError
from ablate.lightning_modules import kernels as kernels_module
from ablate.lightning_modules.config import ModelConfig, TrainConfig, paper_lr
from ablate.lightning_modules.decoding import beam_search, greedy_search
from ablate.lightning_modules.kernels import CpuDropout as Dropout
from ablate.lightning_modules.kernels import LabelSmoothedNLL, kernels_for
from ablate.lightning_modules.module import label_smoothed_nll
from ablate.lightning_modules.transformer import SelfAttentionCache, Transformer

PAD, BOS, EOS = 0, 2, 3


def tiny(**overrides) -> ModelConfig:
    base = dict(vocab_size=50, n_layers=2, d_model=32, d_ff=64, n_heads=4, p_drop=0.0, max_len=64)
    return ModelConfig(**{**base, **overrides})


def model_for(cfg: ModelConfig) -> Transformer:
    torch.manual_seed(0)
    return Transformer(cfg).eval()


VARIANTS = [
    {},
    {"norm": "pre"},
    {"positions": "learned"},
    {"d_k": 3, "d_v": 5},  # d_k, d_v independent of d_model / h (row B)
    {"n_heads": 1, "d_k": 32, "d_v": 32},
    {"tie_embeddings": False},
]


@pytest.fixture(params=["cpu", "reference"])
def kernels(request):
    """Run the test through both kernel choices (CPU: matmuls for short sequences; reference: SDPA, nn.Dropout)."""
    return request.param


@pytest.mark.parametrize("overrides", VARIANTS, ids=lambda o: ",".join(f"{k}={v}" for k, v in o.items()) or "base")
def test_no_causal_leakage(overrides, kernels):
    """Changing target tokens after position t leaves the logits at positions <= t unchanged."""
    model = model_for(tiny(**overrides, kernels=kernels))
    src = torch.randint(4, 50, (2, 9))
    tgt = torch.randint(4, 50, (2, 8))
    t = 4
    changed = tgt.clone()
    changed[:, t + 1 :] = torch.randint(4, 50, (2, 8 - t - 1))
    with torch.no_grad():
        a, b = model(src, tgt), model(src, changed)
    torch.testing.assert_close(a[:, : t + 1], b[:, : t + 1], rtol=1e-5, atol=1e-5)
    assert not torch.allclose(a[:, t + 1 :], b[:, t + 1 :])


@pytest.mark.parametrize("overrides", VARIANTS, ids=lambda o: ",".join(f"{k}={v}" for k, v in o.items()) or "base")
def test_padding_invariance(overrides, kernels):
    """Adding a longer sentence (so the others get padded) leaves the other sentences' outputs unchanged."""
    model = model_for(tiny(**overrides, kernels=kernels))
    src = torch.randint(4, 50, (2, 6))
    tgt = torch.randint(4, 50, (2, 5))
    long_src, long_tgt = torch.randint(4, 50, (1, 11)), torch.randint(4, 50, (1, 9))
    padded_src = torch.cat([torch.nn.functional.pad(src, (0, 5), value=PAD), long_src])
    padded_tgt = torch.cat([torch.nn.functional.pad(tgt, (0, 4), value=PAD), long_tgt])
    with torch.no_grad():
        alone = model(src, tgt)
        batched = model(padded_src, padded_tgt)[:2, :5]
    torch.testing.assert_close(alone, batched, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("overrides", VARIANTS, ids=lambda o: ",".join(f"{k}={v}" for k, v in o.items()) or "base")
def test_cached_incremental_decoding_equals_full(overrides, kernels):
    model = model_for(tiny(**overrides, kernels=kernels))
    src = torch.nn.functional.pad(torch.randint(4, 50, (3, 7)), (0, 2), value=PAD)
    src[0, -2:] = torch.tensor([11, 12])  # one sentence unpadded, two padded
    tgt = torch.randint(4, 50, (3, 6))
    with torch.no_grad():
        full = model(src, tgt)
        memory, mask = model.encode(src)
        cache = model.new_cache()
        steps = [model.decode(tgt[:, t : t + 1], memory, mask, cache, start=t) for t in range(tgt.size(1))]
    torch.testing.assert_close(torch.cat(steps, 1), full, rtol=1e-5, atol=1e-5)


def test_matmul_attention_equals_sdpa_in_outputs_and_gradients():
    """The CPU matmul path and SDPA compute the same function: logits and every gradient agree on a padded batch
    (self, causal and cross-attention, d_k != d_v)."""
    cfg = tiny(d_k=3, d_v=5)
    src = torch.nn.functional.pad(torch.randint(4, 50, (3, 7)), (0, 3), value=PAD)
    src[0, -3:] = torch.tensor([11, 12, 13])
    tgt = torch.randint(4, 50, (3, 8))
    results = []
    for kernels in ("cpu", "reference"):
        model = model_for(replace(cfg, kernels=kernels)).train()  # p_drop = 0: deterministic, but the training path
        logits = model(src, tgt)
        logits.square().mean().backward()
        results.append((logits.detach(), {n: p.grad for n, p in model.named_parameters()}))
    (a, grads_a), (b, grads_b) = results
    torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)
    assert grads_a.keys() == grads_b.keys()
    for name in grads_a:
        torch.testing.assert_close(grads_a[name], grads_b[name], rtol=1e-4, atol=1e-6, msg=name)


@pytest.mark.parametrize("p", [0.1, 0.3])
def test_dropout_keeps_one_minus_p_and_rescales(p):
    """Our CPU dropout has nn.Dropout's distribution (p rounded to 1/32768): kept elements scaled by 1/(1-p), the
    rest zero, keep rate 1 - p, unbiased; the gradient is the same mask; eval mode and p = 0 are the identity."""
    torch.manual_seed(0)
    p_eff = round(p * kernels_module.DROPOUT_LEVELS) / kernels_module.DROPOUT_LEVELS
    layer = Dropout(p).train()
    x = (torch.rand(400, 501) + 1.0).requires_grad_()  # never 0 before dropout; numel not a multiple of 4
    y = layer(x)
    kept = y != 0
    assert abs(kept.float().mean().item() - (1 - p)) < 0.005  # 200k draws: std 0.001
    torch.testing.assert_close(y[kept], x.detach()[kept] / (1 - p_eff))
    assert abs(y.mean().item() / x.mean().item() - 1) < 0.005  # unbiased
    assert abs(kept[:, :250].float().mean().item() - kept[:, 250:].float().mean().item()) < 0.01
    y.sum().backward()
    torch.testing.assert_close(x.grad, kept.float() / (1 - p_eff))
    assert not torch.equal(layer(x) != 0, kept)  # a fresh mask per call
    assert layer.eval()(x) is x and Dropout(0.0).train()(x) is x
    assert (Dropout(1.0).train()(x) == 0).all()


def test_dropout_masks_are_independent_across_positions():
    """The four 15-bit draws cut from one 64-bit integer must not be correlated: neighbouring elements are kept
    together with probability (1 - p)^2 and every one of the four slots keeps 1 - p."""
    torch.manual_seed(1)
    kept = (Dropout(0.5).train()(torch.ones(1_000_000)) != 0).float()
    slots = kept.view(-1, 4).mean(0)
    assert (slots - 0.5).abs().max() < 0.005, slots
    both = (kept[:-1] * kept[1:]).mean().item()
    assert abs(both - 0.25) < 0.003


@pytest.mark.parametrize("kernels", ["cpu", "reference"])
def test_self_attention_cache_matches_concatenation_through_appends_and_reorders(kernels):
    """The growing buffers return exactly what concatenating and index-selecting would, through appends of one and
    several positions, beam reorders (with repeated rows) and rows leaving."""
    torch.manual_seed(0)
    cache, ref_k, ref_v = SelfAttentionCache(kernels_for(kernels).gather_rows), None, None
    rows = 6
    for step in range(40):
        new = 3 if step == 0 else 1
        k, v = torch.randn(rows, 2, new, 3), torch.randn(rows, 2, new, 5)
        got_k, got_v, mask = cache.append(k, v)
        assert mask is None  # every cached key is in the past of the queries
        ref_k = k if ref_k is None else torch.cat([ref_k, k], 2)
        ref_v = v if ref_v is None else torch.cat([ref_v, v], 2)
        assert torch.equal(got_k, ref_k) and torch.equal(got_v, ref_v)
        if step % 3 == 1:  # beam reorder: rows may repeat
            order = torch.randint(0, rows, (rows,))
        elif step == 20:  # sentences leave
            rows, order = 4, torch.tensor([5, 0, 2, 3])
        else:
            continue
        cache.select(order)
        ref_k, ref_v = ref_k.index_select(0, order), ref_v.index_select(0, order)
    assert cache.length == ref_k.size(2) == 42


def test_beam_one_equals_greedy():
    """Beam 1 with no length penalty is greedy search: same tokens for every sentence.

    (With alpha > 0 a beam of 1 may legitimately keep searching after eos for a longer hypothesis whose
    length-normalised score is better, as tensor2tensor's beam search does.)"""
    model = model_for(tiny(vocab_size=30))
    src = torch.nn.functional.pad(torch.randint(4, 30, (5, 6)), (0, 3), value=PAD)
    src[:2, -3:] = torch.randint(4, 30, (2, 3))
    greedy = greedy_search(model, src, BOS, EOS, max_len_b=12)
    beam = beam_search(model, src, BOS, EOS, beam_size=1, alpha=0.0, max_len_b=12)
    assert beam == greedy
    assert any(len(h) > 0 for h in greedy)


def test_beam_search_finds_higher_scoring_hypotheses_than_greedy():
    """With alpha = 0, the beam's best hypothesis never scores lower than greedy's under the model."""
    model = model_for(tiny(vocab_size=20))
    src = torch.randint(4, 20, (6, 5))

    def score(hyps):
        out = []
        for s, h in zip(src, hyps, strict=True):
            tgt = torch.tensor([[BOS, *h]])
            gold = torch.tensor([[*h, EOS]])
            with torch.no_grad():
                logp = model(s[None], tgt).log_softmax(-1)
            out.append(logp.gather(-1, gold[..., None]).sum().item())
        return out

    greedy = greedy_search(model, src, BOS, EOS, max_len_b=8)
    beam = beam_search(model, src, BOS, EOS, beam_size=4, alpha=0.0, max_len_b=8)
    for g, b in zip(score(greedy), score(beam), strict=True):
        assert b >= g - 1e-4


def test_decoding_respects_max_length():
    model = model_for(tiny())
    src = torch.nn.functional.pad(torch.randint(4, 50, (2, 3)), (0, 4), value=PAD)
    src[1, 3:] = torch.randint(4, 50, (4,))
    for hyps in (
        greedy_search(model, src, BOS, EOS, max_len_a=1.0, max_len_b=2),
        beam_search(model, src, BOS, EOS, max_len_a=1.0, max_len_b=2),
    ):
        # at most a * |src| + b tokens including eos
        assert len(hyps[0]) <= 3 + 2 - 1 and len(hyps[1]) <= 7 + 2 - 1


def test_label_smoothed_loss_closed_form():
    """loss = (1 - eps) * (-log p_y) + eps * mean_k(-log p_k), padding contributes nothing."""
    logits = torch.tensor([[2.0, 0.0, 1.0, -1.0], [0.5, 0.5, 0.5, 0.5], [9.0, 9.0, 9.0, 9.0]])
    target = torch.tensor([2, 1, 0])  # the last one is padding (pad id 0)
    eps = 0.1
    loss, nll = label_smoothed_nll(logits, target, eps, pad_id=0)
    z = math.log(math.exp(2) + 1 + math.exp(1) + math.exp(-1))
    logp0 = [2 - z, 0 - z, 1 - z, -1 - z]
    expected0 = (1 - eps) * (-logp0[2]) + eps * (-sum(logp0) / 4)
    assert loss[0].item() == pytest.approx(expected0, rel=1e-6)
    assert loss[1].item() == pytest.approx(math.log(4), rel=1e-6)  # uniform: smoothing changes nothing
    assert nll[0].item() == pytest.approx(-logp0[2], rel=1e-6)
    assert loss[2].item() == 0.0 and nll[2].item() == 0.0
    # agrees with PyTorch's own definition of label smoothing
    ref = torch.nn.functional.cross_entropy(logits[:2], target[:2], label_smoothing=eps, reduction="none")
    torch.testing.assert_close(loss[:2], ref)


@pytest.mark.parametrize("eps", [0.0, 0.1, 0.3])
def test_label_smoothed_loss_equals_torch_cross_entropy(eps):
    """The custom loss is F.cross_entropy(label_smoothing=eps, ignore_index=pad) per token, and its NLL is the
    unsmoothed cross-entropy: values and gradients (the custom one is kept only for memory, see module.py)."""
    torch.manual_seed(0)
    logits = torch.randn(64, 300, requires_grad=True)
    target = torch.randint(0, 300, (64,))
    target[::7] = 0  # padding
    loss, nll = label_smoothed_nll(logits, target, eps, pad_id=0)
    ref_loss = torch.nn.functional.cross_entropy(logits, target, label_smoothing=eps, ignore_index=0, reduction="none")
    ref_nll = torch.nn.functional.cross_entropy(logits, target, ignore_index=0, reduction="none")
    torch.testing.assert_close(loss, ref_loss)
    torch.testing.assert_close(nll, ref_nll)
    grad = torch.autograd.grad(loss.sum() + nll.sum(), logits)[0]
    ref_grad = torch.autograd.grad(ref_loss.sum() + ref_nll.sum(), logits)[0]
    torch.testing.assert_close(grad, ref_grad)


def _autograd_label_smoothed_nll(logits, target, eps, pad_id):
    """The textbook composition, for reference: log-softmax, gather, mean under autograd."""
    logp = torch.log_softmax(logits, dim=-1)
    nll = -logp.gather(-1, target.unsqueeze(-1)).squeeze(-1)
    keep = target != pad_id
    return ((1 - eps) * nll + eps * -logp.mean(-1)) * keep, nll * keep


def test_label_smoothed_loss_gradient_is_exact(monkeypatch):
    """The hand-written backward: gradcheck in float64 through both outputs (padding rows included), equal
    gradients to the autograd composition, with rows split over several chunks, and for bf16 logits."""
    torch.manual_seed(0)
    logits = torch.randn(9, 13, dtype=torch.float64, requires_grad=True)
    target = torch.tensor([1, 0, 3, 12, 0, 7, 2, 2, 5])  # pad id 0 twice
    assert torch.autograd.gradcheck(lambda z: label_smoothed_nll(z, target, 0.1, 0), (logits,))
    monkeypatch.setattr(LabelSmoothedNLL, "CHUNK", 2 * 13)  # 2 rows per chunk: 5 chunks
    weights = torch.randn(9), torch.randn(9)
    grads = []
    for fn in (label_smoothed_nll, _autograd_label_smoothed_nll):
        loss, nll = fn(logits, target, 0.1, 0)
        grads.append(torch.autograd.grad((loss * weights[0]).sum() + (nll * weights[1]).sum(), logits)[0])
        assert loss[1] == 0 and nll[4] == 0
    torch.testing.assert_close(grads[0], grads[1])
    assert (grads[0][[1, 4]] == 0).all()  # padding rows get no gradient
    low = logits.detach().to(torch.bfloat16).requires_grad_()
    loss, _ = label_smoothed_nll(low, target, 0.1, 0)
    assert loss.dtype == torch.float32  # float32 sums for bf16 logits
    loss.sum().backward()
    assert low.grad.dtype == torch.bfloat16
    same = low.detach().float().requires_grad_()  # the same (bf16-rounded) values in float32
    ref = torch.autograd.grad(_autograd_label_smoothed_nll(same, target, 0.1, 0)[0].sum(), same)[0]
    torch.testing.assert_close(low.grad.float(), ref, atol=1e-2, rtol=2e-2)  # bf16 rounding of the gradient


def test_schedule_matches_equation_3():
    d, w = 512, 4000
    assert paper_lr(1, d, w) == pytest.approx(512**-0.5 * 4000**-1.5)
    assert paper_lr(4000, d, w) == pytest.approx(512**-0.5 * 4000**-0.5)  # the peak, ~7.0e-4
    assert paper_lr(4000, d, w) == pytest.approx(6.987712429686844e-4)
    assert paper_lr(16000, d, w) == pytest.approx(paper_lr(4000, d, w) / 2)  # inverse square root decay
    assert paper_lr(2000, d, w) == pytest.approx(paper_lr(4000, d, w) / 2)  # linear warmup
    assert paper_lr(100, d, w, factor=2.0) == pytest.approx(2 * paper_lr(100, d, w))


def test_attention_projection_shapes_follow_the_paper():
    model = Transformer(tiny(d_model=32, n_heads=4, d_k=3, d_v=5))
    attn = model.encoder[0].self_attn
    assert attn.w_q.weight.shape == (4 * 3, 32) and attn.w_k.weight.shape == (4 * 3, 32)
    assert attn.w_v.weight.shape == (4 * 5, 32)
    assert attn.w_o.weight.shape == (32, 4 * 5)


def test_tied_and_untied_embeddings():
    tied, untied = Transformer(tiny()), Transformer(tiny(tie_embeddings=False))
    assert tied.output.weight is tied.src_embed.tokens.weight is tied.tgt_embed.tokens.weight
    assert untied.num_parameters() - tied.num_parameters() == 2 * 50 * 32


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("n_heads", 0),
        ("d_k", -1),
        ("p_drop", 1.5),
        ("label_smoothing", -0.1),
        ("norm", "sandwich"),
        ("positions", "alibi"),
        ("norm_type", "batchnorm"),
        ("activation", "tanh"),
        ("n_kv_heads", 3),  # does not divide n_heads = 4
        ("n_kv_heads", 0),
        ("qk_norm", "yes"),
    ],
)
def test_invalid_model_config_names_the_field(field, value):
    with pytest.raises(ConfigError, match=f"model.{field}"):
        tiny(**{field: value})


def test_indivisible_heads_need_explicit_dk():
    with pytest.raises(ConfigError, match="n_heads"):
        tiny(d_model=30, n_heads=4)
    assert tiny(d_model=30, n_heads=4, d_k=8, d_v=8).head_dim_k == 8


@pytest.mark.parametrize(("field", "value"), [("max_steps", 0), ("warmup_steps", 0), ("adam_betas", (0.9, 1.2))])
def test_invalid_train_config_names_the_field(field, value):
    with pytest.raises(ConfigError, match=f"train.{field}"):
        TrainConfig(**{field: value})


def test_learned_positions_reject_sequences_longer_than_max_len():
    model = model_for(tiny(positions="learned", max_len=8))
    with pytest.raises(AblateError, match="max_len=8"):
        model(torch.randint(4, 50, (1, 9)), torch.randint(4, 50, (1, 3)))
    sinusoidal = model_for(tiny(max_len=8))
    assert sinusoidal(torch.randint(4, 50, (1, 20)), torch.randint(4, 50, (1, 3))).shape == (1, 3, 50)


def test_kernels_are_chosen_once_when_the_model_is_built():
    """`model.kernels` picks PyTorch's operators or the CPU routes for the whole model; 'auto' follows CUDA."""
    reference, cpu = Transformer(tiny(kernels="reference", p_drop=0.1)), Transformer(tiny(kernels="cpu", p_drop=0.1))
    assert reference.kernels.name == "reference" and type(reference.src_embed.dropout) is torch.nn.Dropout
    assert cpu.kernels.name == "cpu" and type(cpu.src_embed.dropout) is Dropout
    assert Transformer(tiny()).kernels.name == ("reference" if torch.cuda.is_available() else "cpu")
    cpu.load_state_dict(reference.state_dict())  # same parameters: only the computation differs


@pytest.mark.parametrize("kernels", ["reference", "cpu"])
def test_the_model_compiles_to_one_graph_and_computes_what_eager_does(kernels):
    """`train.compile`: no graph break (a data-dependent branch on padding broke it in three, and dynamo recompiled
    at every batch shape on an H200), and the compiled forward is the eager one, padded batch or not."""
    torch.manual_seed(0)
    cfg = ModelConfig(vocab_size=300, n_layers=2, d_model=64, d_ff=128, n_heads=4, p_drop=0.0, kernels=kernels)
    model = Transformer(cfg).eval()
    compiled = torch.compile(model, backend="eager", fullgraph=True)  # fullgraph: any graph break raises
    src, tgt = torch.randint(4, 300, (3, 11)), torch.randint(4, 300, (3, 9))
    padded = src.clone()
    padded[0, -3:] = 0
    with torch.no_grad():
        for batch in (src, padded):
            torch.testing.assert_close(compiled(batch, tgt), model(batch, tgt))
