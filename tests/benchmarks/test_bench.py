"""`ablate bench` on a minute configuration, so the harness cannot rot. No timing assertions: the figures of a
shared CI machine mean nothing; what is checked is that every figure and ratio is there and consistent."""

from __future__ import annotations

import importlib.util
import json
import statistics
import sys

import pytest
from ablate.benchmarks.bench import BenchConfig, run_bench
from ablate.benchmarks.command import main
from ablate.benchmarks.mfu import counted_flops, train_flops
from ablate.benchmarks.peers import check_peer
from ablate.data.errors import AblateError
from ablate.lightning_modules.config import ModelConfig

HAS_TRANSFORMERS = importlib.util.find_spec("transformers") is not None
MINUTE = [
    "--device",
    "cpu",
    "--preset",
    "smoke",
    "--warmup",
    "1",
    "--repeats",
    "2",
    "--decode_sentences",
    "3",
    "--decode_repeats",
    "1",
]
SHORT_TRIAL = ("--train.max_steps", "2", "--train.val_every", "2", "--train.val_max_sentences", "2")


def _fields(result: dict, peers: list[str]) -> None:
    for section in ("date", "config", "device", "model", "data", "training", "decoding", "profile", "ratios"):
        assert section in result
    for name in ["ours", *peers]:
        train = result["training"][name]
        for key in ("tgt_tokens_per_s", "tokens_per_s", "model_flops_per_s", "first_step_s", "params"):
            assert train[key] > 0, (name, key)
        assert {"median", "iqr", "min", "max", "n"} <= set(train["step_time_s"])
        assert train["step_time_s"]["n"] == 2
        assert train["cold_step_time_s"]["n"] == 2  # the untimed pass over the same two batches
        assert train["memory"]["peak_mb"] > 0
        assert train["mfu"] is None  # CPU: no peak FLOP/s
    for key in ("padding_ours", "padding_random", "padding_measured_batches"):
        assert 0 <= result["data"][key] < 1
    assert result["data"]["padding_ours"] < result["data"]["padding_random"]
    decoders = ["ours_beam", "ours_beam_static", "ours_greedy"] + (["hf_beam", "hf_greedy"] if "hf" in peers else [])
    decoders += [f"{peer}_{search}" for peer in peers if peer.startswith("row:") for search in ("beam", "greedy")]
    assert set(result["decoding"]) == set(decoders)
    steps = {d["decoder_steps"] for d in result["decoding"].values()}
    assert len(steps) == 1  # eos held back: every system decodes to the same length limit
    for d in result["decoding"].values():
        assert d["sentences_per_s"] > 0
    assert result["model"]["train_flops_per_tgt_token"] > 0
    assert set(result["profile"]["train_step_ms"]) == {"forward", "loss", "backward", "optimizer", "collate"}
    assert 0 <= result["profile"]["beam_search"]["bookkeeping_share"] < 1
    ours_times = result["training"]["ours"]["step_times_s"]
    assert len(ours_times) == 2
    for peer in peers:  # ratios pair steps on the same batch: median of peer time / our time
        peer_times = result["training"][peer]["step_times_s"]
        expected = statistics.median(p / o for o, p in zip(ours_times, peer_times, strict=True))
        assert result["ratios"][f"train_tok_s_ours_vs_{peer}"] == pytest.approx(expected)
    if "hf" in peers:
        dec = result["decoding"]
        expected = statistics.median(
            p / o for o, p in zip(dec["ours_beam"]["times_s"], dec["hf_beam"]["times_s"], strict=True)
        )
        assert result["ratios"]["beam_sent_s_ours_vs_hf"] == pytest.approx(expected)
    choices = result["profile"]["cpu_choices"]  # each of our CPU choices undone, measured in the same run
    assert set(choices) == {"ours", "sdpa_attention", "bernoulli_dropout", "loop_adam", "pytorch_defaults"}
    assert choices["ours"]["speedup"] == pytest.approx(1.0) and choices["ours"]["undone"] == []
    assert choices["pytorch_defaults"]["undone"] == ["attention", "dropout", "adam"]
    assert all(c["step_ms"] > 0 and c["speedup"] > 0 for c in choices.values())
    assert set(result["targets"]) >= {"train_vs_hf_at_least_1.2x", "beam4_vs_hf_at_least_2x", "padding_at_most_5pct"}


def test_cli_json_has_every_figure_against_torch(capsys):
    assert main([*MINUTE, "--vs", "torch", "--overhead", "false", "--lightning", "false", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    _fields(result, ["torch"])
    assert result["overhead"] is None and "ours_lightning" not in result["training"]
    assert result["targets"]["trial_overhead_under_5s"]["met"] is None  # not measured
    assert result["targets"]["fresh_process_overhead_under_5s"]["met"] is None


@pytest.mark.slow
@pytest.mark.skipif(not HAS_TRANSFORMERS, reason="needs the [bench] extra (transformers)")
def test_harness_with_every_peer_lightning_and_trial_overhead():
    bench = BenchConfig(
        device="cpu", preset="smoke", warmup=1, repeats=2, decode_sentences=3, decode_repeats=1, trial_args=SHORT_TRIAL
    )
    result = run_bench(bench)
    _fields(result, ["hf", "torch"])
    lightning = result["training"]["ours_lightning"]
    assert lightning["tgt_tokens_per_s"] > 0 and lightning["step_time_s"]["n"] == 2
    over = result["overhead"]
    assert 0 < over["process_to_first_step_s"] < over["trial_wall_s"]
    assert over["in_process_overhead_s"] > 0 and 0 < over["overhead_share"] < 1
    targets = result["targets"]  # the sweep-worker figures and the fresh-process ones, each checked
    assert targets["trial_overhead_under_5s"]["value"] == over["in_process_overhead_s"]
    assert targets["fresh_process_overhead_under_5s"]["value"] == over["process_to_first_step_s"]
    assert all(targets[k]["met"] is not None for k in targets if "overhead" in k)
    for key in ("train_tok_s_lightning_vs_hf", "beam_sent_s_ours_vs_hf", "greedy_sent_s_ours_vs_hf"):
        assert result["ratios"][key] > 0


@pytest.mark.slow
def test_another_row_of_the_study_is_a_peer_on_the_same_batches_and_sentences(capsys):
    """`--vs row:paper` on the modern base: the paper's block trained and decoded beside it, its own FLOPs counted."""
    assert main([*MINUTE, "--study", "modern", "--vs", "row:paper", "--overhead", "false", "--lightning", "false",
                 "--json"]) == 0  # fmt: skip
    result = json.loads(capsys.readouterr().out)
    _fields(result, ["row:paper"])
    ours, paper = result["model"], result["row_models"]["row:paper"]
    assert (ours["norm_type"], ours["activation"], ours["positions"]) == ("rmsnorm", "swiglu", "rope")
    assert (paper["norm_type"], paper["activation"], paper["positions"]) == ("layernorm", "relu", "sinusoidal")
    assert paper["params"] == result["training"]["row:paper"]["params"] != ours["params"]
    # FLOPs counted on each module: the gated FFN's third matrix and the missing biases show in the count.
    assert paper["train_flops_per_tgt_token"] != ours["train_flops_per_tgt_token"]
    dec = result["decoding"]
    expected = statistics.median(
        p / o for o, p in zip(dec["ours_greedy"]["times_s"], dec["row:paper_greedy"]["times_s"], strict=True)
    )
    assert result["ratios"]["greedy_sent_s_ours_vs_row:paper"] == pytest.approx(expected)
    assert "train_tok_s_lightning_vs_row:paper" not in result["ratios"]


def test_row_peer_must_exist_and_share_the_data(tmp_path):
    with pytest.raises(AblateError, match="has no row 'nope'"):
        main(["--vs", "row:nope"])
    study = tmp_path / "vocab.yaml"
    study.write_text(
        "name: vocab\nbase: {model: {n_layers: 2}}\nrows:\n  - {name: base, group: base}\n"
        "  - {name: small, group: V, data: {vocab_size: 500}}\n"
    )
    with pytest.raises(AblateError, match="row small of vocab changes data settings"):
        main(["--study", str(study), "--vs", "row:small"])


def test_unknown_peer_is_one_line_error():
    with pytest.raises(AblateError, match="unknown peer 'fairseq'"):
        main(["--vs", "torch,fairseq"])


def test_missing_bench_extra_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "transformers", None)  # import fails as if not installed
    with pytest.raises(AblateError, match=r"pip install 'ablate\[bench\]'"):
        check_peer("hf", ModelConfig(vocab_size=100, d_model=16, d_ff=32, n_heads=2, n_layers=1))


def test_peers_refuse_shapes_they_cannot_build():
    with pytest.raises(AblateError, match="d_k = d_v = d_model / h"):
        check_peer("torch", ModelConfig(d_k=16))


def test_train_flops_counts_six_flops_per_weight_per_token_plus_attention():
    cfg = ModelConfig(vocab_size=1000, n_layers=2, d_model=64, d_ff=256, n_heads=4)
    # With zero-length attention, a step is 6 FLOPs per weight per token it touches: encoder weights see source
    # tokens (plus the cross-attention K/V projections), decoder weights and the output layer see target tokens.
    d, dff, n, v = 64, 256, 2, 1000
    enc_weights = n * (4 * d * d + 2 * d * dff) + n * 2 * d * d
    dec_weights = n * (4 * d * d + 2 * d * dff + 2 * d * d) + d * v
    assert train_flops(cfg, 10, 20, 0, 0) == pytest.approx(6 * (10 * enc_weights + 20 * dec_weights))
    assert train_flops(cfg, 10, 20, 8, 8) > train_flops(cfg, 10, 20, 0, 0)


def test_counted_flops_agree_with_the_analytic_count_on_the_papers_base():
    """FlopCounterMode (what MFU now rests on) against the hand formula it replaces, on the paper's base model, every
    position real (the formula counts projections per real token, the counter per position). The formula counts
    the backward pass as twice the forward; the counter sees what runs."""
    from ablate.lightning_modules.transformer import Transformer

    cfg = ModelConfig(vocab_size=37000)
    model = Transformer(cfg)
    b, s, t = 2, 12, 14
    counted = counted_flops(model, (b, s), (b, t), cfg)
    analytic = train_flops(cfg, b * s, b * t, s, t)
    assert counted == pytest.approx(analytic, rel=0.05)


def test_every_timed_step_is_on_a_batch_each_system_has_already_trained_on(monkeypatch):
    """The timed steps are the steady state of an epoch after the first: a shape's first step (cuDNN plans, new
    allocator blocks; 5x the warm step on an H200) lands in the untimed pass, kept apart as `cold_times`."""
    import torch
    from ablate.benchmarks import timing
    from ablate.benchmarks.settings import Setup

    seen: dict[str, list[int]] = {}

    def step(t, batch, s, mark=None):
        seen.setdefault(t.name, []).append(batch["id"])
        return torch.tensor(1.0)

    monkeypatch.setattr(timing, "train_step", step)
    trainees = [timing.Trainee(name, None, None, None) for name in ("ours", "peer")]
    batches = [{"id": i} for i in range(6)]
    setup = Setup(None, torch.device("cpu"), "32-true")
    timing.run_training(trainees, batches, BenchConfig(warmup=2, repeats=4), setup)
    for t in trainees:
        assert len(t.times) == 4 and len(t.cold_times) == 4
        assert t.batch_ids == [2, 3, 4, 5]  # the same batches for every system, so ratios pair them
        calls = seen[t.name]
        timed = calls[len(calls) - len(t.times) :]
        assert all(b in calls[: len(calls) - len(t.times)] for b in timed)


def test_a_cpu_bench_on_a_machine_with_a_gpu_measures_the_cpu_kernels(monkeypatch):
    """`--device cpu` where CUDA is visible: 'auto' kernels would be CUDA's, and the CPU figures would not be ours."""
    import torch
    from ablate.benchmarks.bench import setup

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    s = setup(BenchConfig(device="cpu", peers=("row:B1",), preset="smoke"))
    assert s.run.model.kernels == "cpu" and s.rows["row:B1"].kernels == "cpu"


@pytest.mark.slow
def test_the_bench_counts_a_runs_batch_shapes_and_trains_as_the_runs_settings_say(capsys):
    """`--data.buckets` and `--train.fused_loss` reach the benchmarked run: fixed shapes are counted from the buckets
    (at most one a bucket) where greedy batches are counted over the run's epochs, and our step trains fused."""
    results = {}
    for fused, buckets in ((False, 0), (True, 2)):
        argv = [*MINUTE, "--vs", "none", "--overhead", "false", "--lightning", "false", "--json"]
        main([*argv, "--data.buckets", str(buckets), "--train.fused_loss", str(fused).lower()])
        result = json.loads(capsys.readouterr().out)
        data = result["data"]
        assert data["buckets"] == buckets and result["config"]["settings"]["train"]["fused_loss"] is fused
        shapes = data["run_shapes"]
        if buckets:
            assert shapes["complete"] and 1 <= shapes["shapes"] <= 4
        else:
            assert shapes["epochs"] >= 1 and shapes["shapes"] >= 1
        assert 0 < data["padding_fixed_shapes"] < data["padding_random"]
        results[fused] = result
    assert results[True]["training"]["ours"]["params"] == results[False]["training"]["ours"]["params"]
