"""The GPU path's three CPU-testable parts: the fused projection + loss, compiling once for every batch shape, and
the module's training step through both. Real batches from the data module (data.buckets), real torch.compile
tracing (`backend='eager'` runs dynamo's tracing and guards, the part that decides recompiles, without codegen)."""

from __future__ import annotations

import pytest
import torch
from ablate.lightning_modules.config import ModelConfig, TrainConfig
from ablate.lightning_modules.decoding import beam_search
from ablate.lightning_modules.kernels import FusedLinearLabelSmoothedNLL, compile_for_training, eager
from ablate.lightning_modules.module import TranslationModule, label_smoothed_nll
from ablate.lightning_modules.transformer import Transformer


def _projection_and_loss(x, weight, target, eps):
    loss, nll = label_smoothed_nll(x @ weight.t(), target, eps, 0)
    return loss.sum(), loss, nll


@pytest.mark.parametrize("eps", [0.0, 0.1])
@pytest.mark.parametrize("chunk_rows", [1000, 3])  # one chunk; several, the last one short
def test_fused_loss_equals_projection_then_loss_in_value_and_gradient(monkeypatch, eps, chunk_rows):
    torch.manual_seed(0)
    vocab = 37
    monkeypatch.setattr(FusedLinearLabelSmoothedNLL, "CHUNK", chunk_rows * vocab)
    x = torch.randn(20, 16, dtype=torch.float64, requires_grad=True)
    weight = torch.randn(vocab, 16, dtype=torch.float64, requires_grad=True)
    target = torch.randint(1, vocab, (20,))
    target[[2, 9]] = 0  # padding
    fused = FusedLinearLabelSmoothedNLL.apply(x, weight, target, eps, 0)
    reference = _projection_and_loss(x, weight, target, eps)
    for ours, theirs in zip(fused, reference, strict=True):
        torch.testing.assert_close(ours, theirs.detach())
    assert not fused[1].requires_grad and not fused[2].requires_grad  # only the sum trains
    scale = torch.tensor(0.37, dtype=torch.float64)  # the 1 / target-tokens the module divides by
    grads = [torch.autograd.grad(out[0] * scale, (x, weight)) for out in (fused, reference)]
    for ours, theirs in zip(*grads, strict=True):
        torch.testing.assert_close(ours, theirs)
    assert (grads[0][0][[2, 9]] == 0).all()  # padding rows get no gradient


def test_fused_loss_under_bf16_autocast_matches_float32_within_bf16_rounding():
    torch.manual_seed(0)
    x = torch.randn(64, 32, requires_grad=True)
    weight = torch.randn(500, 32, requires_grad=True)
    target = torch.randint(1, 500, (64,))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        total, loss, _ = FusedLinearLabelSmoothedNLL.apply(x, weight, target, 0.1, 0)
    assert loss.dtype == torch.float32 and total.dtype == torch.float32
    total.backward()
    assert x.grad.dtype == weight.grad.dtype == torch.float32  # the parameters' dtype, as autograd expects
    reference = _projection_and_loss(x.detach(), weight.detach(), target, 0.1)
    torch.testing.assert_close(loss, reference[1], atol=0.3, rtol=0.02)


def _module(fused: bool, compiled: bool = False) -> TranslationModule:
    torch.manual_seed(0)
    model = ModelConfig(vocab_size=120, n_layers=2, d_model=32, d_ff=64, n_heads=4, p_drop=0.0)
    train = TrainConfig(max_steps=10, warmup_steps=2, fused_loss=fused, compile=compiled)
    return TranslationModule(model, train, bos_id=2, eos_id=3).train()


def test_the_modules_training_loss_and_gradients_are_the_same_fused_or_not():
    src, tgt = torch.randint(4, 120, (6, 9)), torch.randint(4, 120, (6, 8))
    src[0, -3:], tgt[1, -2:] = 0, 0
    batch = {"src": src, "tgt_in": tgt, "tgt_out": torch.roll(tgt, -1, 1), "index": torch.arange(6)}
    outs, grads = [], []
    for fused in (False, True):
        module = _module(fused)
        out = module._shared_step(batch, "val")  # 'val': no logging outside a trainer
        out["loss"].backward()
        outs.append(out)
        grads.append({n: p.grad for n, p in module.named_parameters()})
    for key in ("loss", "loss_sum", "nll_sum"):
        torch.testing.assert_close(outs[0][key], outs[1][key].detach())
    for name, grad in grads[0].items():
        torch.testing.assert_close(grad, grads[1][name], atol=1e-6, rtol=1e-4)


@pytest.fixture(scope="module")
def bucketed_batches(tmp_path_factory):
    """Two epochs of a small built-in corpus's training batches at 3 buckets: at most 6 shapes."""
    from ablate.data.config import DataConfig
    from ablate.data.datamodule import TranslationDataModule

    cfg = DataConfig(
        vocab_size=120, builtin_train=600, builtin_valid=20, builtin_test=20, builtin_lexicon=0.1,
        builtin_max_words=12, max_len=40, tokens_per_batch=600, buckets=3,
        cache_dir=str(tmp_path_factory.mktemp("cache")),
    )  # fmt: skip
    datamodule = TranslationDataModule(cfg)
    loader = datamodule.train_dataloader()
    epochs = []
    for epoch in range(2):
        loader.batch_sampler.set_epoch(epoch)
        epochs.append(list(loader))
    return datamodule.vocab_size, epochs


def _compiled_graphs(epochs, model, net) -> list[int]:
    """Dynamo's graphs after each epoch of training steps through `net`."""
    import torch._dynamo
    from torch._dynamo.utils import counters

    torch._dynamo.reset()
    counters.clear()
    graphs = []
    for batches in epochs:
        for batch in batches:
            net(batch["src"], batch["tgt_in"]).sum().backward()
        graphs.append(counters["stats"]["unique_graphs"])
    return graphs


def _tiny(vocab: int, layers: int = 2) -> Transformer:
    torch.manual_seed(0)
    return Transformer(ModelConfig(vocab_size=vocab, n_layers=layers, d_model=16, d_ff=32, n_heads=2, p_drop=0.0))


@pytest.mark.slow
@pytest.mark.parametrize("scope", ["model", "layers"])
@pytest.mark.parametrize("fused", [False, True])
def test_training_compiles_once_and_never_again_in_the_second_epoch(bucketed_batches, fused, scope):
    """What train.compile compiles (the model, or its `features` under fused_loss; whole, or layer by layer), over
    real bucketed batches: the first epoch may compile (one graph for every shape, of the model or of each layer
    class; a one-pair batch may add one), the second compiles nothing, and the compiled step computes the eager
    one's loss."""
    vocab, epochs = bucketed_batches
    shapes = {tuple(b["src"].shape) + (b["tgt_in"].size(1),) for b in epochs[0]}
    assert 2 <= len(shapes) <= 6
    model = _tiny(vocab)
    reference = _tiny(vocab)
    net = compile_for_training(model.features if fused else model, backend="eager", scope=scope)
    graphs = _compiled_graphs(epochs, model, net)
    most = 2 if scope == "model" else 4  # layers: an encoder layer's graph and a decoder layer's
    assert 1 <= graphs[0] <= most, f"compiled {graphs[0]} graphs for {len(shapes)} shapes"
    assert graphs[1] == graphs[0], "the second epoch recompiled"
    reference.load_state_dict(model.state_dict())  # the same keys: compiling in place renames nothing
    batch = epochs[1][0]
    with torch.no_grad():
        plain = reference.features if fused else reference
        torch.testing.assert_close(net(batch["src"], batch["tgt_in"]), plain(batch["src"], batch["tgt_in"]))


@pytest.mark.slow
def test_compiled_layers_share_one_graph_whatever_the_depth_and_evaluate_eagerly(bucketed_batches):
    """train.compile_scope 'layers': six identical layers compile what one does (a cold compile costs a layer's),
    and under `eager()` (evaluation and decoding) the compiled layers run without compiling anything more."""
    from torch._dynamo.utils import counters

    vocab, epochs = bucketed_batches
    one, six = _tiny(vocab, 1), _tiny(vocab, 6)
    graphs = [_compiled_graphs(epochs[:1], m, compile_for_training(m, backend="eager"))[0] for m in (one, six)]
    assert graphs[0] == graphs[1] >= 2, graphs
    six.eval()
    batch = epochs[1][0]
    with torch.no_grad(), eager():
        six(batch["src"], batch["tgt_in"])
        beam_search(six, batch["src"][:2], bos_id=2, eos_id=3, beam_size=2, alpha=0.6, max_len_a=0.0, max_len_b=5)
    assert counters["stats"]["unique_graphs"] == graphs[1], "evaluation or decoding compiled a graph"


def test_a_compiled_module_takes_the_reference_kernels_where_auto():
    """The CPU kernels' random draws break inductor's graph; compiled, 'auto' resolves to the reference kernels."""
    assert _module(False, compiled=True).model.kernels.name == "reference"
    named = ModelConfig(vocab_size=120, n_layers=1, d_model=16, d_ff=32, n_heads=2, kernels="cpu")
    assert TranslationModule(named, TrainConfig(compile=True), bos_id=2, eos_id=3).model.kernels.name == "cpu"


def test_the_fused_loss_compiled_computes_what_it_does_eagerly():
    """train.compile with train.fused_loss compiles the chunks' element-wise work (dynamic shapes: the last chunk is
    shorter); the loss, NLL and gradients are the eager ones."""
    torch.manual_seed(0)
    x = torch.randn(50, 16, requires_grad=True)
    weight = torch.randn(300, 16, requires_grad=True)
    target = torch.randint(1, 300, (50,))
    target[3] = 0
    results = []
    for compiled in (False, True):
        out = FusedLinearLabelSmoothedNLL.apply(x, weight, target, 0.1, 0, compiled)
        results.append((*out, *torch.autograd.grad(out[0], (x, weight))))
    for plain, compiled in zip(*results, strict=True):
        torch.testing.assert_close(compiled, plain)


def test_cuda_graphs_say_what_they_need_in_one_line():
    """train.cuda_graphs replays the whole compiled model at fixed batch shapes: without train.compile, by layers, or
    without data.buckets, the config is refused with the field to set."""
    from ablate.ablations.study.config import build_run_config
    from ablate.data.errors import AblateError

    for train in ({"cuda_graphs": True}, {"cuda_graphs": True, "compile": True}):
        with pytest.raises(AblateError, match="train.cuda_graphs.*train.compile true and train.compile_scope model"):
            build_run_config({"train": train})
    graphs = {"cuda_graphs": True, "compile": True, "compile_scope": "model"}
    with pytest.raises(AblateError, match="needs fixed shapes: set data.buckets"):
        build_run_config({"train": graphs})
    assert build_run_config({"train": graphs, "data": {"buckets": 8}}).train.cuda_graphs


def test_jagged_attention_refuses_compile_in_one_line():
    """model.kernels jagged runs eagerly: with train.compile the config is refused, naming both fields."""
    from ablate.ablations.study.config import build_run_config
    from ablate.data.errors import AblateError

    with pytest.raises(AblateError, match="model.kernels jagged runs eagerly.*drop train.compile"):
        build_run_config({"model": {"kernels": "jagged"}, "train": {"compile": True}})
    assert build_run_config({"model": {"kernels": "jagged"}}).model.kernels == "jagged"


@pytest.mark.gpu
def test_training_steps_replayed_as_cuda_graphs_compute_the_eager_steps(bucketed_batches):
    """On a GPU: three epochs' worth of steps through the compiled, graph-replayed model (a graph per bucket shape)
    give the eager model's losses and weights within float32 rounding, and later epochs record no new graph."""
    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    vocab, epochs = bucketed_batches
    models = [_tiny(vocab).cuda() for _ in range(2)]
    nets = [models[0], compile_for_training(models[1], scope="model", cuda_graphs=True)]
    opts = [torch.optim.Adam(m.parameters(), lr=1e-3, fused=True) for m in models]
    for batches in epochs + epochs[:1]:
        for batch in batches:
            losses = []
            for net, opt in zip(nets, opts, strict=True):
                logits = net(batch["src"].cuda(), batch["tgt_in"].cuda())
                loss, _ = label_smoothed_nll(logits.flatten(0, 1), batch["tgt_out"].cuda().flatten(), 0.1, 0)
                loss.sum().backward()
                opt.step()
                opt.zero_grad(set_to_none=True)
                losses.append(float(loss.sum()))
            assert abs(losses[0] - losses[1]) <= 1e-3 * abs(losses[0]), losses
    for a, b in zip(models[0].parameters(), models[1].parameters(), strict=True):
        torch.testing.assert_close(a, b, atol=1e-4, rtol=1e-3)


@pytest.mark.slow
def test_the_whole_model_compiles_in_one_trace_without_a_restart():
    """Under dynamic shapes a module's float attributes (dropout p, the embedding scale) used to be traced as symbolic
    floats, and AOTAutograd restarted the whole trace to specialise them: two traces of twice the operations (the
    paper base's whole-model compile that never finished on a card). compile_for_training specialises them: one
    AOTAutograd trace, and the compiled training step computes the eager one."""
    import torch._dynamo
    from torch._dynamo.utils import counters

    torch._dynamo.reset()
    counters.clear()
    model, reference = _tiny(60).train(), _tiny(60).train()  # p_drop 0: the same function, and its floats traced
    net = compile_for_training(model.features, backend="aot_eager", scope="model")
    src, tgt = torch.randint(4, 60, (3, 9)), torch.randint(4, 60, (3, 7))
    out = net(src, tgt)
    out.square().mean().backward()
    assert counters["aot_autograd"]["total"] == 1, dict(counters["aot_autograd"])
    torch.testing.assert_close(out, reference.features(src, tgt))


@pytest.mark.parametrize("fused", [False, True])
def test_the_module_trains_through_the_whole_compiled_model(monkeypatch, fused):
    """train.compile_scope model hands the module a compiled module (torch.compile's OptimizedModule), which refuses
    bool(): the training forward took it with `or` and failed at its first step (found by a CPU run of the lease
    script's CUDA-graphs step). Through the module, the compiled step computes the eager one's loss and gradients."""
    import functools

    import torch._dynamo
    from ablate.lightning_modules import module as module_file

    torch._dynamo.reset()
    monkeypatch.setattr(module_file, "compile_for_training", functools.partial(compile_for_training, backend="eager"))
    src, tgt = torch.randint(4, 120, (6, 9)), torch.randint(4, 120, (6, 8))
    batch = {"src": src, "tgt_in": tgt, "tgt_out": torch.roll(tgt, -1, 1), "index": torch.arange(6)}
    outs, grads = [], []
    for compiled in (False, True):
        module = _module(fused, compiled)
        module.train_config = TrainConfig(**{**module.train_config.__dict__, "compile_scope": "model"})
        module.configure_model()
        out = module._shared_step(batch, "val")  # 'val': no logging outside a trainer; the module is in training
        out["loss"].backward()
        outs.append(out["loss"].detach())
        grads.append({n: p.grad for n, p in module.named_parameters()})
    assert ("_compiled" in module.__dict__) and isinstance(module.__dict__["_compiled"], torch.nn.Module) != fused
    torch.testing.assert_close(outs[0], outs[1])
    for name, grad in grads[0].items():
        torch.testing.assert_close(grad, grads[1][name], atol=1e-6, rtol=1e-4)
