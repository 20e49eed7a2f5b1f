"""The modern-block knobs of ModelConfig (norm_type, activation, positions rope/none, n_kv_heads, qk_norm, bias):
cached decoding stays exact, RoPE is relative, GQA is multi-head attention with shared heads, RMSNorm is its formula,
parameter counts follow a closed form, the fields round-trip, and the `modern` study keeps its promises."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import fields, replace

import pytest
import torch
import yaml
from ablate.ablations.study.config import build_run_config
from ablate.ablations.study.definition import load_study
from ablate.ablations.study.presets import PRESETS
from ablate.lightning_modules.config import ModelConfig
from ablate.lightning_modules.modern import NoPositions, NoRotation, RotaryEmbedding
from ablate.lightning_modules.transformer import Transformer

PAD, BOS, EOS = 0, 2, 3


def tiny(**overrides) -> ModelConfig:
    base = dict(vocab_size=50, n_layers=2, d_model=32, d_ff=64, n_heads=4, p_drop=0.0, max_len=64)
    return ModelConfig(**{**base, **overrides})


def model_for(cfg: ModelConfig) -> Transformer:
    torch.manual_seed(0)
    model = Transformer(cfg).eval()
    with torch.no_grad():  # norms start at weight 1, bias 0: perturb them so a misplaced norm shows
        for name, param in model.named_parameters():
            if "norm" in name:
                param.add_(0.1 * torch.randn_like(param))
    return model


MODERN = {"norm": "pre", "norm_type": "rmsnorm", "activation": "swiglu", "positions": "rope", "bias": False}
KNOBS = [
    {"norm_type": "rmsnorm"},
    {"norm_type": "rmsnorm", "norm": "pre"},
    {"activation": "gelu"},
    {"activation": "swiglu"},
    {"activation": "geglu"},
    {"positions": "rope"},
    {"positions": "rope", "d_k": 3, "d_v": 5},  # an odd d_k: its last dimension is not rotated
    {"positions": "none"},
    {"n_kv_heads": 2},
    {"n_kv_heads": 1},  # multi-query attention
    {"qk_norm": True},
    {"qk_norm": True, "norm_type": "rmsnorm"},
    {"bias": False},
    {**MODERN, "n_kv_heads": 2, "qk_norm": True},
]


def knob_id(overrides: dict) -> str:
    return ",".join(f"{k}={v}" for k, v in overrides.items())


@pytest.fixture(params=["cpu", "reference"])
def kernels(request):
    """Both kernel routes (kernels.py): every knob is computed in the model, outside them, and stays exact on each."""
    return request.param


def padded_source() -> torch.Tensor:
    src = torch.nn.functional.pad(torch.randint(4, 50, (3, 7)), (0, 2), value=PAD)
    src[0, -2:] = torch.tensor([11, 12])  # one sentence unpadded, two padded
    return src


# ------------------------------------------------------------------------------------------------ cached decoding
@pytest.mark.parametrize("overrides", KNOBS, ids=knob_id)
def test_cached_incremental_decoding_equals_full(overrides, kernels):
    """Position by position through the key/value cache (RoPE offsets, n_kv_heads cached heads) = teacher forcing."""
    model = model_for(tiny(**overrides, kernels=kernels))
    src, tgt = padded_source(), torch.randint(4, 50, (3, 6))
    with torch.no_grad():
        full = model(src, tgt)
        memory, mask = model.encode(src)
        cache = model.new_cache()
        steps = [model.decode(tgt[:, t : t + 1], memory, mask, cache, start=t) for t in range(tgt.size(1))]
    torch.testing.assert_close(torch.cat(steps, 1), full, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("overrides", KNOBS, ids=knob_id)
def test_cached_beam_decoding_with_reorders_equals_full(overrides, kernels):
    """Beam 4 as `decoding.beam_search` drives the model: k rows per sentence sharing one memory row in
    cross-attention, `decode(..., cache, start=t)`, the cache reordered (rows repeated) after every step. Each
    step's logits equal a full recompute of the reordered hypotheses against the memory repeated per beam."""
    k, steps = 4, 6
    model = model_for(tiny(**overrides, kernels=kernels))
    src = padded_source()
    gen = torch.Generator().manual_seed(1)
    with torch.no_grad():
        memory, mask = model.encode(src)
        memory_k = memory.repeat_interleave(k, 0)
        mask_k = mask.repeat_interleave(k, 0) if mask is not None else None
        cache, seqs = model.new_cache(), torch.full((3 * k, 1), BOS)
        offset = (torch.arange(3) * k).repeat_interleave(k)
        for t in range(steps):
            step = model.decode(seqs[:, -1:], memory, mask, cache, start=t)[:, -1]
            full = model.decode(seqs, memory_k, mask_k)[:, -1]
            torch.testing.assert_close(step, full, rtol=1e-5, atol=1e-5, msg=f"step {t}")
            order = torch.randint(0, k, (3 * k,), generator=gen) + offset  # parents within each sentence
            model.reorder_cache(cache, order)
            seqs = torch.cat([seqs[order], torch.randint(4, 50, (3 * k, 1), generator=gen)], 1)


@pytest.mark.parametrize("block", [{}, {**MODERN, "n_kv_heads": 2, "qk_norm": True, "d_k": 3, "d_v": 5}],
                         ids=["paper", "modern"])  # fmt: skip
@pytest.mark.parametrize("route", ["cpu", "jagged"])
def test_every_kernel_route_agrees_with_the_reference_in_outputs_and_gradients(route, block):
    """The CPU route and the jagged one (padded keys dropped, not masked) compute the reference's function on the
    paper's block and the modern one (GQA, RoPE with an odd d_k, QK-norm, SwiGLU, RMSNorm, no biases): same logits,
    and every parameter gets the same, non-zero gradient."""
    cfg = tiny(**block)
    src, tgt = padded_source(), torch.randint(4, 50, (3, 8))
    results = []
    for kernels in (route, "reference"):
        model = model_for(replace(cfg, kernels=kernels)).train()  # p_drop = 0: deterministic, but the training path
        assert model.kernels.name == kernels
        logits = model(src, tgt)
        logits.square().mean().backward()
        results.append((logits.detach(), {n: p.grad for n, p in model.named_parameters()}))
    (a, grads_a), (b, grads_b) = results
    torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)
    for name, grad in grads_a.items():
        assert grad is not None and grad.abs().sum() > 0, name
        torch.testing.assert_close(grad, grads_b[name], rtol=1e-4, atol=1e-6, msg=name)


# ----------------------------------------------------------------------------------------------------------- RoPE
@pytest.mark.parametrize("width", [8, 5])
def test_rope_scores_depend_only_on_relative_position(width):
    """<R_m q, R_n k> depends on m - n: shifting every position by a constant leaves every q . k score unchanged,
    while the rotation does change the scores (it is not the identity)."""
    torch.manual_seed(0)
    rope = RotaryEmbedding(width)
    q, k = torch.randn(2, 3, 9, width), torch.randn(2, 3, 9, width)

    def scores(start: int) -> torch.Tensor:
        return rope(q, start) @ rope(k, start).transpose(-1, -2)

    torch.testing.assert_close(scores(0), scores(13), rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(scores(0), scores(250), rtol=1e-4, atol=1e-4)
    assert not torch.allclose(scores(0), q @ k.transpose(-1, -2), atol=1e-2)
    torch.testing.assert_close(rope(q, 0)[..., 0, :], q[..., 0, :])  # position 0 is not rotated
    torch.testing.assert_close(rope(q, 3).norm(dim=-1), q.norm(dim=-1))  # a rotation keeps lengths


def test_rope_self_attention_is_shift_invariant_and_only_self_attention_rotates():
    """A self-attention layer's output is the same when every position is shifted; cross-attention has no rotation
    and no position is added at the input."""
    torch.manual_seed(0)
    cfg = tiny(positions="rope")
    model = Transformer(cfg).eval()
    attn = model.encoder[0].self_attn
    x = torch.randn(2, 7, 32)
    with torch.no_grad():
        torch.testing.assert_close(attn(x, x, start=0), attn(x, x, start=21), rtol=1e-4, atol=1e-5)
        torch.testing.assert_close(attn(x, x, causal=True), attn(x, x, causal=True, start=5), rtol=1e-4, atol=1e-5)
    assert isinstance(attn.rotate, RotaryEmbedding) and isinstance(model.decoder[0].self_attn.rotate, RotaryEmbedding)
    assert isinstance(model.decoder[0].cross_attn.rotate, NoRotation)
    assert isinstance(model.src_embed.positions, NoPositions) and isinstance(model.tgt_embed.positions, NoPositions)
    assert isinstance(Transformer(tiny()).encoder[0].self_attn.rotate, NoRotation)  # the paper's model


# ------------------------------------------------------------------------------------------------------------ GQA
def test_gqa_with_as_many_kv_heads_as_heads_is_multi_head_attention():
    """n_kv_heads = n_heads builds the same parameters as multi-head attention and computes the same outputs."""
    mha, gqa = model_for(tiny()), model_for(tiny(n_kv_heads=4))
    assert {k: v.shape for k, v in mha.state_dict().items()} == {k: v.shape for k, v in gqa.state_dict().items()}
    gqa.load_state_dict(mha.state_dict())
    src, tgt = padded_source(), torch.randint(4, 50, (3, 6))
    with torch.no_grad():
        torch.testing.assert_close(gqa(src, tgt), mha(src, tgt))


@pytest.mark.parametrize("n_kv_heads", [2, 1])
def test_gqa_equals_multi_head_attention_with_each_kv_head_copied_to_its_group(n_kv_heads):
    """GQA is multi-head attention whose W_K, W_V heads are copies shared by consecutive query heads: copy each
    key/value head to the n_heads / n_kv_heads query heads of its group and the logits are the same."""
    gqa = model_for(tiny(n_kv_heads=n_kv_heads, d_k=3, d_v=5))
    mha = model_for(tiny(d_k=3, d_v=5))
    groups = 4 // n_kv_heads
    state = {}
    for name, value in gqa.state_dict().items():
        if ".w_k." in name or ".w_v." in name:
            value = value.unflatten(0, (n_kv_heads, -1)).repeat_interleave(groups, 0).flatten(0, 1)
        state[name] = value
    mha.load_state_dict(state)
    src, tgt = padded_source(), torch.randint(4, 50, (3, 6))
    with torch.no_grad():
        torch.testing.assert_close(gqa(src, tgt), mha(src, tgt), rtol=1e-5, atol=1e-5)


def test_gqa_caches_only_the_key_value_heads():
    model = model_for(tiny(n_kv_heads=2, d_k=3, d_v=5))
    src = padded_source()
    with torch.no_grad():
        memory, mask = model.encode(src)
        cache = model.new_cache()
        model.decode(torch.full((3, 1), BOS), memory, mask, cache, start=0)
    k, v, _ = cache[0]["self"].append(torch.zeros(3, 2, 0, 3), torch.zeros(3, 2, 0, 5))
    assert k.shape == (3, 2, 1, 3) and v.shape == (3, 2, 1, 5)
    assert cache[0]["cross"]["k"].shape == (3, 2, 9, 3) and cache[0]["cross"]["v"].shape == (3, 2, 9, 5)


# -------------------------------------------------------------------------------------------------------- RMSNorm
def test_rmsnorm_is_its_formula():
    """RMSNorm(x) = x / sqrt(mean(x^2) + eps) * g, with no mean subtracted and no bias (Zhang and Sennrich, 2019);
    in every norm of the model: residual (pre and post), final (pre) and query/key norms."""
    eps = 1e-6
    for cfg in (tiny(norm_type="rmsnorm", qk_norm=True), tiny(norm_type="rmsnorm", norm="pre", layer_norm_eps=eps)):
        model = model_for(cfg)
        norms = {n: m for n, m in model.named_modules() if isinstance(m, torch.nn.RMSNorm)}
        residual, final = 2 * (2 + 3), 2 if cfg.norm == "pre" else 0  # N = 2: 2 per encoder, 3 per decoder layer
        qk = 2 * (2 + 2 * 2) if cfg.qk_norm else 0  # q and k norms in 2 encoder and 2 x 2 decoder attentions
        assert len(norms) == residual + final + qk
        assert not any(isinstance(m, torch.nn.LayerNorm) for m in model.modules())
        for name, norm in norms.items():
            x = torch.randn(2, 5, norm.weight.numel()) * 3 + 1  # a mean far from 0: LayerNorm would differ
            formula = x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + cfg.layer_norm_eps) * norm.weight
            torch.testing.assert_close(norm(x), formula, msg=name)
        if cfg.qk_norm:
            assert model.encoder[0].self_attn.q_norm.weight.numel() == cfg.head_dim_k  # per head, over d_k


# ------------------------------------------------------------------------------------------------ parameter counts
def closed_form(cfg: ModelConfig) -> int:
    """Parameters in closed form. V vocab (tied: one matrix), d d_model, f d_ff, h heads, g = n_kv_heads key/value
    heads, d_k, d_v, N layers, b = 1 with biases. A norm of width w has 2w (LayerNorm: gain, shift) or w (RMSNorm)."""
    V, d, f, N = cfg.vocab_size, cfg.d_model, cfg.d_ff, cfg.n_layers
    h, g, dk, dv, b = cfg.n_heads, cfg.kv_heads, cfg.head_dim_k, cfg.head_dim_v, int(cfg.bias)

    def norm(w: int) -> int:
        return 2 * w if cfg.norm_type == "layernorm" else w

    attention = (d + b) * h * dk + (d + b) * g * dk + (d + b) * g * dv + h * dv * d + b * d
    attention += 2 * norm(dk) if cfg.qk_norm else 0
    inputs = 2 if cfg.activation in ("swiglu", "geglu") else 1  # W (and V) d x f, then W_2 f x d
    ffn = inputs * (d + b) * f + f * d + b * d
    encoder_layer = attention + ffn + 2 * norm(d)
    decoder_layer = 2 * attention + ffn + 3 * norm(d)
    final = 2 * norm(d) if cfg.norm == "pre" else 0
    positions = 2 * cfg.max_len * d if cfg.positions == "learned" else 0
    return V * d + N * (encoder_layer + decoder_layer) + final + positions


@pytest.mark.parametrize("overrides", [{}, {"positions": "learned"}, {"d_k": 3, "d_v": 5}, *KNOBS], ids=knob_id)
def test_parameter_count_matches_the_closed_form(overrides):
    cfg = tiny(**overrides)
    with torch.device("meta"):
        assert Transformer(cfg).num_parameters() == closed_form(cfg)
    big = replace(cfg, vocab_size=37000, n_layers=6, d_model=512, d_ff=2048, n_heads=8, max_len=1024)
    if big.n_kv_heads is not None:
        big = replace(big, n_kv_heads=2 if big.n_kv_heads > 1 else 1)
    with torch.device("meta"):
        assert Transformer(big).num_parameters() == closed_form(big)


def test_the_paper_base_has_the_paper_parameter_count():
    """The closed form at the paper's sizes: 63.1M with the shared 37000-token vocabulary (Table 3 says 65M)."""
    assert closed_form(ModelConfig()) == 63_082_496


# --------------------------------------------------------------------------------------------------- config fields
NEW_FIELDS = {"norm_type": "rmsnorm", "activation": "swiglu", "positions": "rope", "n_kv_heads": 2, "qk_norm": True}


def test_new_fields_round_trip_through_dict_and_yaml():
    run = build_run_config({"model": {**NEW_FIELDS, "bias": False, "n_heads": 4, "d_model": 32, "d_ff": 64}})
    dumped = yaml.safe_dump(run.to_dict())
    loaded = yaml.safe_load(dumped)
    assert {k: loaded["model"][k] for k in NEW_FIELDS} == NEW_FIELDS and loaded["model"]["bias"] is False
    assert build_run_config(loaded).model.resolved() == run.model.resolved()  # to_dict resolves d_k, d_v
    defaults = ModelConfig()
    assert (defaults.norm_type, defaults.activation, defaults.positions) == ("layernorm", "relu", "sinusoidal")
    assert (defaults.n_kv_heads, defaults.kv_heads, defaults.qk_norm, defaults.bias) == (None, 8, False, True)


def test_new_fields_are_command_line_options():
    """One `ablate train --print_config` call: every new field is a --model.FIELD option that reaches the config."""
    args = [f"--model.{k}={str(v).lower()}" for k, v in {**NEW_FIELDS, "bias": False}.items()]
    out = subprocess.run(
        [sys.executable, "-m", "ablate.ablations.cli", "train", *args, "--print_config"],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    ).stdout
    model = yaml.safe_load(out)["model"]
    assert {k: model[k] for k in NEW_FIELDS} == NEW_FIELDS and model["bias"] is False


# ---------------------------------------------------------------------------------------------------- modern study
ONE_COMPONENT = {
    "M-rmsnorm": {"norm_type"},
    "M-swiglu": {"activation", "d_ff"},  # d_ff at about 2/3: the same parameter count
    "M-rope": {"positions"},
    "M-gqa2": {"n_kv_heads"},
    "M-qknorm": {"qk_norm"},
    "M-nobias": {"bias"},
    "M-prenorm": {"norm"},
}
"""What each one-at-a-time row changes in the paper's base."""


def test_modern_study_loads_and_keeps_its_promises():
    """modern.yaml validates at every preset; its `paper` row is table3's base exactly; each M row changes one
    component of it; C6/C7 halve and double the modern d_ff; the modern base stays within 2% of the paper's
    parameters at the paper's sizes; its Table 3 claims keep table3's ids."""
    modern, table3 = load_study("modern"), load_study("table3")
    for preset in PRESETS:
        paper = modern.run_config("paper", preset).model
        assert paper == table3.run_config("base", preset).model, preset
        base = modern.run_config("base", preset).model
        assert modern.run_config("C6", preset).model.d_ff * 2 == base.d_ff
        assert modern.run_config("C7", preset).model.d_ff == 2 * base.d_ff
        for row in (r for r in modern.rows if r.group == "M"):
            cfg = modern.run_config(row, preset).model
            changed = {f.name for f in fields(ModelConfig) if getattr(cfg, f.name) != getattr(paper, f.name)}
            assert changed == ONE_COMPONENT[row.name], (preset, row.name)
    with torch.device("meta"):
        counts = {
            row: Transformer(modern.run_config(row, "paper", data={"vocab_size": 37000}).model).num_parameters()
            for row in ("base", "paper")
        }
    assert abs(counts["base"] / counts["paper"] - 1) < 0.02, counts
    shared = {"A-single-head", "A-many-heads", "B-small-dk", "C-bigger-better", "D-dropout", "D-label-smoothing"}
    assert shared | {"E-learned-positions"} <= {c.id for c in modern.claims} & {c.id for c in table3.claims}
