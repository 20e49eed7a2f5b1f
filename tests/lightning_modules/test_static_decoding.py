"""Beam search at fixed shapes (`static_decoding`, the decoder a GPU captures as a CUDA graph) gives the hypotheses of
`decoding.beam_search` on every model knob that changes decoding, on both kernel routes."""

from __future__ import annotations

import collections

import pytest
import torch
from ablate.lightning_modules.config import ModelConfig
from ablate.lightning_modules.decoding import beam_search
from ablate.lightning_modules.static_decoding import StaticSelfAttentionCache, static_beam_search
from ablate.lightning_modules.transformer import Transformer

from tests.lightning_modules.test_modern_knobs import KNOBS, knob_id

PAD, BOS, EOS = 0, 2, 3
# The paper's own knobs that change what a decoder step computes, beside the modern ones.
PAPER_KNOBS = [{}, {"norm": "pre"}, {"positions": "learned"}, {"d_k": 4, "d_v": 12}, {"tie_embeddings": False}]


def eos_prone(overrides: dict, kernels: str = "cpu", dtype=torch.float64, device="cpu") -> Transformer:
    """A random model whose eos logit moves with the decoder's state (a forward hook on the output projection), so
    hypotheses finish at every length from 1 to the limit: the finished set's merges, the early stop and sentences
    at their limit all happen in one batch."""
    torch.manual_seed(0)
    base = dict(vocab_size=50, n_layers=2, d_model=32, d_ff=64, n_heads=4, p_drop=0.0, max_len=128)
    model = Transformer(ModelConfig(**{**base, **overrides, "kernels": kernels})).eval().to(device, dtype)

    def eos_from_state(module, inputs, logits):
        logits = logits.clone()
        logits[..., EOS] += 4.0 * inputs[0][..., 0]
        return logits

    model.output.register_forward_hook(eos_from_state)
    return model


def sources(device="cpu") -> torch.Tensor:
    gen = torch.Generator().manual_seed(1)
    src = torch.randint(4, 50, (40, 9), generator=gen)
    src[3:, 7:], src[25:, 4:] = PAD, PAD  # three source lengths, so three length limits
    return src.to(device)


@pytest.mark.parametrize("overrides", PAPER_KNOBS + KNOBS, ids=knob_id)
@pytest.mark.parametrize("kernels", ["cpu", "reference"])
def test_static_beam_search_gives_the_dynamic_decoders_hypotheses(overrides, kernels):
    """float64: the static decoder attends over the whole key axis with a mask, and in float32 that rounding could
    decide an exact tie; in float64 any difference is a difference in the search."""
    model, src = eos_prone(overrides, kernels), sources()
    dynamic = beam_search(model, src, BOS, EOS, beam_size=4, alpha=0.6, max_len_b=10)
    static = static_beam_search(model, src, BOS, EOS, beam_size=4, alpha=0.6, max_len_b=10)
    assert static == dynamic
    lengths = collections.Counter(len(h) for h in dynamic)
    assert len(lengths) >= 3, f"the model should finish hypotheses at several lengths, got {lengths}"


@pytest.mark.parametrize("check_every", [1, 3, 100])
def test_how_often_the_host_checks_for_the_end_changes_nothing_in_float32(check_every):
    """Steps past every sentence's end leave the finished sets frozen, and float32 (as training decodes) gives the
    same hypotheses as the dynamic decoder on this batch."""
    model, src = eos_prone({}, dtype=torch.float32), sources()
    dynamic = beam_search(model, src, BOS, EOS, max_len_b=10)
    assert static_beam_search(model, src, BOS, EOS, max_len_b=10, check_every=check_every) == dynamic


def test_beam_one_and_a_zero_length_limit_margin():
    """Beam 1, and outputs limited to the source's length (max_len_b 1: eos alone beyond it)."""
    model, src = eos_prone({}), sources()
    for beam, b in ((1, 10), (4, 1), (2, 3)):
        expect = beam_search(model, src, BOS, EOS, beam_size=beam, max_len_a=1.0, max_len_b=b)
        assert static_beam_search(model, src, BOS, EOS, beam_size=beam, max_len_a=1.0, max_len_b=b) == expect


def test_the_static_cache_takes_the_keys_dtype():
    """Under autocast the keys come out of a bf16 projection while the cache is made from the fp32 encoder output."""
    cache = StaticSelfAttentionCache(rows=2, heads=1, capacity=3, d_k=4, d_v=4, like=torch.zeros(1))
    k = torch.ones(2, 1, 1, 4, dtype=torch.bfloat16)
    keys, values, _ = cache.append(k, k, torch.tensor(0))
    assert keys.dtype == values.dtype == torch.bfloat16


def test_the_static_cache_keeps_its_buffers_and_masks_the_unwritten_slots():
    """A captured graph replays fixed addresses: after the first step (made in the keys' dtype, before any capture),
    appends and reorders write into the same buffers."""
    like = torch.zeros(1)
    cache = StaticSelfAttentionCache(rows=3, heads=2, capacity=5, d_k=4, d_v=6, like=like)
    k_ptr = v_ptr = None
    for t in range(3):
        new_k, new_v = torch.full((3, 2, 1, 4), float(t)), torch.full((3, 2, 1, 6), float(t))
        _, _, mask = cache.append(new_k, new_v, torch.tensor(t))
        assert mask.view(-1).tolist() == [i <= t for i in range(5)]
        k_ptr, v_ptr = (cache.k.data_ptr(), cache.v.data_ptr()) if t == 0 else (k_ptr, v_ptr)
        assert (cache.k.data_ptr(), cache.v.data_ptr()) == (k_ptr, v_ptr)
    cache.k[1] += 10  # row 1 differs
    cache.select(torch.tensor([1, 1, 0]))
    assert (cache.k.data_ptr(), cache.v.data_ptr()) == (k_ptr, v_ptr)
    assert cache.k[0, 0, :3, 0].tolist() == [10.0, 11.0, 12.0] and cache.k[2, 0, :3, 0].tolist() == [0.0, 1.0, 2.0]


@pytest.mark.gpu
@pytest.mark.parametrize("overrides", [{}, {"norm": "pre", "positions": "rope", "n_kv_heads": 2}], ids=knob_id)
def test_a_captured_cuda_graph_replays_the_same_search(overrides):
    """On a GPU: the captured step replayed gives the eager static search's and the dynamic decoder's hypotheses."""
    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    model, src = eos_prone(overrides, "reference", torch.float32, "cuda"), sources("cuda")
    dynamic = beam_search(model, src, BOS, EOS, max_len_b=10)
    eager = static_beam_search(model, src, BOS, EOS, max_len_b=10, cuda_graph=False)
    captured = static_beam_search(model, src, BOS, EOS, max_len_b=10, cuda_graph=True)
    assert captured == eager
    agree = sum(a == b for a, b in zip(captured, dynamic, strict=True))
    assert agree >= len(dynamic) - 1, f"{agree} of {len(dynamic)} hypotheses as the dynamic decoder's"
