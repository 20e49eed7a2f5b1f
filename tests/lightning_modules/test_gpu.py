"""The GPU path: bf16 mixed precision, fused attention kernels, fused Adam. Skipped without CUDA."""

from __future__ import annotations

import pytest
import torch
from ablate.lightning_modules.config import ModelConfig
from ablate.lightning_modules.module import label_smoothed_nll
from ablate.lightning_modules.transformer import Transformer

pytestmark = pytest.mark.gpu


def test_bf16_training_step_is_finite_and_matches_fp32():
    torch.manual_seed(0)
    cfg = ModelConfig(vocab_size=1000, n_layers=2, d_model=128, d_ff=512, n_heads=8, p_drop=0.0)
    model = Transformer(cfg).cuda()
    src = torch.randint(4, 1000, (8, 30), device="cuda")
    tgt = torch.randint(4, 1000, (8, 25), device="cuda")
    with torch.no_grad():
        ref = model(src, tgt[:, :-1]).float()
    with torch.autocast("cuda", dtype=torch.bfloat16):
        logits = model(src, tgt[:, :-1])
    loss, _ = label_smoothed_nll(logits.flatten(0, 1), tgt[:, 1:].flatten(), 0.1, 0)
    loss.mean().backward()
    assert logits.dtype == torch.bfloat16 and torch.isfinite(loss).all()
    assert (logits.float() - ref).abs().max() < 0.25
    opt = torch.optim.Adam(model.parameters(), lr=1e-4, fused=True)
    opt.step()


def test_fused_attention_kernels_run_the_model():
    """The flash / memory-efficient SDPA kernels accept our shapes and masks (no silent fallback to math)."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    cfg = ModelConfig(vocab_size=1000, n_layers=1, d_model=256, d_ff=512, n_heads=4, p_drop=0.0)
    model = Transformer(cfg).cuda().to(torch.bfloat16)
    src = torch.randint(4, 1000, (4, 40), device="cuda")
    tgt = torch.randint(4, 1000, (4, 33), device="cuda")
    with sdpa_kernel([SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION]), torch.no_grad():
        unpadded = model(src, tgt)  # no padding: flash for all attention
        src[0, -5:] = 0
        padded = model(src, tgt)  # padding mask: memory-efficient kernel
    assert torch.isfinite(unpadded).all() and torch.isfinite(padded).all()
