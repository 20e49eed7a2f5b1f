"""What `ablate bench` concludes and prints: ratios ours/peer (paired), the targets met or not, the text report."""

from __future__ import annotations

import json
from typing import Any

from ablate.benchmarks.timing import paired_speedup, ratio


def ratios(result: dict[str, Any]) -> dict[str, float | None]:
    """ours / peer for training target tokens/s (model step, paired by batch; and through Lightning, a separate run
    compared by medians) and decoding sentences/s (paired by round)."""
    train, dec = result["training"], result["decoding"]
    rows = result.get("row_models", {})
    out: dict[str, float | None] = {}
    for peer in (name for name in train if name not in ("ours", "ours_lightning")):
        out[f"train_tok_s_ours_vs_{peer}"] = paired_speedup(train["ours"]["step_times_s"], train[peer]["step_times_s"])
        if "ours_lightning" in train and peer not in rows:  # a row peer is timed as a bare step only
            lightning = train["ours_lightning"]["tgt_tokens_per_s"]
            out[f"train_tok_s_lightning_vs_{peer}"] = ratio(lightning, train[peer]["tgt_tokens_per_s"])
        out[f"peak_memory_ours_vs_{peer}"] = ratio(train["ours"]["memory"]["peak_mb"], train[peer]["memory"]["peak_mb"])
        if f"{peer}_beam" in dec:
            for search in ("beam", "greedy"):
                out[f"{search}_sent_s_ours_vs_{peer}"] = paired_speedup(
                    dec[f"ours_{search}"]["times_s"], dec[f"{peer}_{search}"]["times_s"]
                )
    if "ours_beam_static" in dec:  # train.decoding: fixed shapes (graphs on CUDA) against the shrinking batch
        out["beam_sent_s_static_vs_dynamic"] = paired_speedup(
            dec["ours_beam_static"]["times_s"], dec["ours_beam"]["times_s"]
        )
    return out


def targets(result: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The issue's targets with the measured value and whether it is met (None: not measured in this run)."""
    r, data, over, train = result["ratios"], result["data"], result["overhead"], result["training"]

    def check(value, ok) -> dict[str, Any]:
        return {"value": value, "met": None if value is None else bool(ok(value))}

    mfu = train["ours"]["mfu"]
    return {
        "train_vs_hf_at_least_1.2x": check(r.get("train_tok_s_ours_vs_hf"), lambda v: v >= 1.2),
        "train_vs_torch_at_least_1x": check(r.get("train_tok_s_ours_vs_torch"), lambda v: v >= 1.0),
        "beam4_vs_hf_at_least_2x": check(r.get("beam_sent_s_ours_vs_hf"), lambda v: v >= 2.0),
        "padding_at_most_5pct": check(data["padding_ours"], lambda v: v <= 0.05),
        # Per-trial overhead as a sweep pays it: its workers train trial after trial in one process.
        "trial_overhead_under_10pct": check(over and over["in_process_overhead_share"], lambda v: v < 0.10),
        "trial_overhead_under_5s": check(over and over["in_process_overhead_s"], lambda v: v < 5.0),
        # A lone `ablate train` in a fresh process: imports (Lightning, torch, W&B) dominate.
        "fresh_process_overhead_under_10pct": check(over and over["overhead_share"], lambda v: v < 0.10),
        "fresh_process_overhead_under_5s": check(over and over["process_to_first_step_s"], lambda v: v < 5.0),
        "mfu_at_least_40pct": check(mfu, lambda v: v >= 0.40),
    }


# ------------------------------------------------------------------------------------------------------- report
def format_report(result: dict[str, Any]) -> str:
    """The human-readable summary `ablate bench` prints without --json."""
    dev, cfg, model = result["device"], result["config"], result["model"]
    lines = [
        f"ablate bench: {cfg['study']} row {cfg['row']} at preset {cfg['preset']} on {dev['name']}"
        + (f" ({dev['threads']} threads)" if dev.get("threads") else "")
        + f", {cfg['precision']}{', compiled' if cfg['compile'] else ''}",
        f"model: {model['params'] / 1e6:.2f}M params, {model['train_flops_per_tgt_token'] / 1e6:.1f} MFLOP per "
        f"target token (train step); batches of {result['data']['pairs_per_batch']:.0f} pairs, "
        f"{model['tgt_tokens_per_batch']:.0f} target tokens",
        *(
            f"{name}: {m['params'] / 1e6:.2f}M params, {m['train_flops_per_tgt_token'] / 1e6:.1f} MFLOP per target "
            "token (train step)"
            for name, m in result.get("row_models", {}).items()
        ),
        "",
        f"{'training':<16} {'tgt tok/s':>10} {'tok/s':>10} {'step ms':>8} {'IQR ms':>7} {'peak MB':>8} {'GFLOP/s':>8}",
    ]
    lines += [_training_line(name, t) for name, t in result["training"].items()]
    lines += ["", f"{'decoding':<16} {'sent/s':>10} {'median s':>9} {'steps':>6} {'out len':>8}"]
    for name, d in result["decoding"].items():
        lines.append(
            f"{name:<16} {d['sentences_per_s']:>10.1f} {d['time_s']['median']:>9.3f} {d['decoder_steps']:>6} "
            f"{d['mean_output_tokens']:>8.1f}"
        )
    lines += _profile_lines(result)
    lines += ["", "ratios ours/peer: " + ", ".join(f"{k} {_num(v, '{:.2f}x')}" for k, v in result["ratios"].items())]
    lines.append(
        "targets: "
        + ", ".join(
            f"{k} {'met' if t['met'] else 'NOT met' if t['met'] is not None else 'not measured'}"
            for k, t in result["targets"].items()
        )
    )
    return "\n".join(lines)


def _training_line(name: str, t: dict[str, Any]) -> str:
    step = t["step_time_s"]
    mem = t.get("memory", {}).get("peak_mb")
    gflops = t.get("model_flops_per_s")
    return (
        f"{name:<16} {_num(t['tgt_tokens_per_s'], '{:,.0f}'):>10} {_num(t['tokens_per_s'], '{:,.0f}'):>10} "
        f"{step['median'] * 1000:>8.1f} {step['iqr'] * 1000:>7.1f} {_num(mem, '{:.1f}'):>8} "
        f"{_num(gflops and gflops / 1e9, '{:.1f}'):>8}"
    )


def _profile_lines(result: dict[str, Any]) -> list[str]:
    """Padding, per-trial overhead, our step's breakdown, the CPU kernels' effect, beam search, CUDA checks."""
    lines = []
    data = result["data"]
    shapes = data["run_shapes"]
    lines += [
        "",
        f"padding: ours {data['padding_ours']:.1%}, with fixed shapes {data['padding_fixed_shapes']:.1%}, random "
        f"batching {data['padding_random']:.1%} (budget {data['tokens_per_batch']} tokens); collation "
        f"{data['collate_ms']['median']:.2f} ms/batch",
        f"batch shapes in a whole run: {'' if shapes['complete'] else 'at least '}{shapes['shapes']} "
        + (f"(data.buckets {data['buckets']})" if data["buckets"] else f"(greedy batches, {shapes['epochs']} epochs)"),
    ]
    if result.get("compile"):
        c = result["compile"]
        lines.append(
            f"compile: {c['graphs']} graph(s) for {c['systems']} system(s), {c['graph_breaks']} graph break(s); our "
            f"first step {c['ours_first_step_s']:.1f} s (compilation included), warm "
            f"{_num(c['ours_warm_step_s'] and c['ours_warm_step_s'] * 1000, '{:.1f}')} ms"
        )
    over = result["overhead"]
    if over:
        lines.append(
            f"per-trial overhead: process start -> first step {over['process_to_first_step_s']:.2f} s of a "
            f"{over['trial_wall_s']:.1f} s trial ({over['overhead_share']:.0%}); a second trial in the same process: "
            f"{over['in_process_overhead_s']:.2f} s ({over['in_process_overhead_share']:.1%})"
        )
    prof = result["profile"]
    step = prof["train_step_ms"]
    lines.append(
        "our step (ms): "
        + ", ".join(f"{k} {v:.1f}" for k, v in step.items())
        + (f"; Lightning adds {prof['lightning_overhead_ms']:.1f} ms/step" if "lightning_overhead_ms" in prof else "")
    )
    lines += _host_line(prof)
    if "cpu_choices" in prof:
        lines.append(
            "our CPU choices, step ms with each undone: "
            + ", ".join(f"{k} {v['step_ms']:.1f} ({v['speedup']:.2f}x)" for k, v in prof["cpu_choices"].items())
        )
    beam = prof["beam_search"]
    lines.append(
        f"beam search: {beam['bookkeeping_share']:.0%} of the time outside the network "
        f"({beam['steps']} steps, {beam['total_s']:.2f} s)"
    )
    if "attention" in prof:
        a = prof["attention"]
        lines.append(
            f"attention over padded sources ({a['heads']} heads of {a['head_dim']}, {a['dtype']}, keys "
            f"{a['key_padding']:.1%} padding), forward + backward ms a batch: "
            + ", ".join(
                f"{name} {c['ms']:.2f} ({_num(c['speedup'], '{:.2f}x')}"
                + (f", max diff {c['max_abs_diff']:.1e})" if c["max_abs_diff"] is not None else ", bound)")
                for name, c in a["candidates"].items()
            )
        )
    if result["cuda"]:
        lines.append(f"cuda: {json.dumps(result['cuda'])}")
    return lines


def _host_line(prof: dict[str, Any]) -> list[str]:
    """What a step costs the host on the card's path (`benchmarks.host`), where it was counted."""
    if "host" not in prof:
        return []
    h = prof["host"]
    return [
        f"host per step ({h['path']}): {h['ops_per_step']:.0f} operators dispatched, about "
        f"{h['kernels_per_step']:.0f} CUDA kernels ({h['casts_per_step']:.0f} autocast casts), "
        f"{h['syncs_per_step']:.0f} host syncs (at most {h['most_syncs_in_a_step']} in a step)"
    ]


def _num(value: float | None, fmt: str) -> str:
    return "-" if value is None else fmt.format(value)
