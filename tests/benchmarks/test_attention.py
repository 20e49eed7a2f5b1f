"""The attention candidates of `ablate bench --attention` compute today's attention: equal outputs and gradients to
the masked SDPA on the CPU in float64, over right-padded keys of mixed lengths, in self- and cross-attention shapes;
and the bench reports them on its own batches."""

from __future__ import annotations

import json

import pytest
import torch
from ablate.benchmarks.attention import flex, jagged, masked, unpadded
from ablate.benchmarks.command import main

from tests.benchmarks.test_bench import MINUTE


def _case(queries: int, keys: int, lengths: list[int]):
    generator = torch.Generator().manual_seed(queries * 100 + keys)

    def tensor(rows: int):
        x = torch.randn(len(lengths), 4, rows, 8, generator=generator, dtype=torch.float64)
        return x.requires_grad_()

    keep = torch.arange(keys)[None, :] < torch.tensor(lengths)[:, None]  # right-padded, as our batches are
    return tensor(queries), tensor(keys), tensor(keys), keep


def _outputs_and_grads(function, q, k, v, keep):
    q, k, v = (x.detach().clone().requires_grad_() for x in (q, k, v))
    out = function(q, k, v, keep)
    (out * torch.linspace(-1, 1, out.size(-2), dtype=out.dtype)[:, None]).sum().backward()
    return out.detach(), q.grad, k.grad, v.grad


@pytest.mark.parametrize(("queries", "keys"), [(7, 7), (5, 7), (9, 7)], ids=["self", "cross-shorter", "cross-longer"])
def test_jagged_equals_masked_attention_with_gradients(queries, keys):
    q, k, v, keep = _case(queries, keys, [7, 5, 1])
    expected = _outputs_and_grads(masked, q, k, v, keep)
    got = _outputs_and_grads(jagged, q, k, v, keep)
    for name, a, b in zip(("out", "dq", "dk", "dv"), got, expected, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-9, atol=1e-9, msg=name)
    assert float(got[2][1, :, 5:].abs().max()) == 0.0  # padded keys get no gradient: they were dropped


@pytest.mark.parametrize(("queries", "keys"), [(7, 7), (5, 7)], ids=["self", "cross"])
def test_flex_equals_masked_attention(queries, keys):
    """Forward only here: FlexAttention has no backward on a CPU (the GPU test below checks gradients)."""
    q, k, v, keep = (x.detach() for x in _case(queries, keys, [7, 5, 1]))
    torch.testing.assert_close(flex(q, k, v, keep), masked(q, k, v, keep), rtol=1e-9, atol=1e-9)


@pytest.mark.gpu
def test_flex_and_jagged_gradients_on_a_gpu():
    from ablate.benchmarks.attention import _candidates

    functions = _candidates(torch.device("cuda"))
    q, k, v, keep = (x.detach().float().cuda() for x in _case(9, 7, [7, 5, 1]))
    expected = _outputs_and_grads(masked, q, k, v, keep)
    for name in ("jagged", "flex"):
        got = _outputs_and_grads(functions[name], q, k, v, keep)
        for what, a, b in zip(("out", "dq", "dk", "dv"), got, expected, strict=True):
            torch.testing.assert_close(a, b, rtol=2e-3, atol=2e-3, msg=f"{name} {what}")


def test_the_bound_attends_to_padding_so_it_differs():
    q, k, v, keep = _case(6, 7, [7, 3])
    assert not torch.allclose(unpadded(q, k, v, keep), masked(q, k, v, keep))


@pytest.mark.slow
def test_bench_reports_every_cpu_candidate_on_its_batches(capsys):
    args = [*MINUTE, "--vs", "none", "--attention", "true", "--overhead", "false", "--lightning", "false"]
    assert main([*args, "--json"]) == 0
    attention = json.loads(capsys.readouterr().out)["profile"]["attention"]
    assert set(attention["candidates"]) == {"masked", "jagged", "unpadded"}  # flex: on a GPU only
    assert attention["batches"] == 3 and 0 < attention["key_padding"] < 1  # warm-up + repeats
    for name, c in attention["candidates"].items():
        assert c["ms"] > 0 and c["speedup"] > 0, name
    assert attention["candidates"]["masked"]["max_abs_diff"] == 0.0
    assert attention["candidates"]["jagged"]["max_abs_diff"] < 1e-5  # float32 on the CPU
    assert attention["candidates"]["unpadded"]["max_abs_diff"] is None
    assert main(args) == 0
    assert "attention over padded sources" in capsys.readouterr().out
