"""`ablate bench`: training and decoding speed of one configuration, side by side with peer implementations."""

from __future__ import annotations

import argparse
import json
import sys

from ablations.presets import PRESETS

DESCRIPTION = """Measure one configuration's training throughput (target and source+target tokens/s), step time
(median and IQR), peak memory, padding overhead, beam-4 and greedy decoding speed and per-trial overhead, and the
same for peer implementations in the same run on identical batches: Hugging Face MarianMT ('hf', needs
pip install 'ablate[bench]') and torch.nn.Transformer ('torch'). Prints the ratios ours/peer and the issue's
targets. On CUDA: bf16 autocast, fused Adam, a check of the fused SDPA kernels, MFU against the GPU's bf16 peak."""


def build_parser() -> argparse.ArgumentParser:
    from benchmarks.bench import BenchConfig

    d = BenchConfig()
    parser = argparse.ArgumentParser(prog="ablate bench", description=DESCRIPTION)
    parser.add_argument("--study", default=d.study, help="built-in study name or study YAML file")
    parser.add_argument("--row", default=d.row, help="row of the study (default: base)")
    parser.add_argument("--preset", default=d.preset, choices=list(PRESETS), help="size preset (default: tiny)")
    parser.add_argument(
        "--vs", default=",".join(d.peers), help="comma-separated peers: hf, torch; 'none' for ours only"
    )
    parser.add_argument("--warmup", type=int, default=d.warmup, help="untimed training steps per system")
    parser.add_argument("--repeats", type=int, default=d.repeats, help="timed training steps per system")
    parser.add_argument("--decode-sentences", type=int, default=d.decode_sentences, help="dev sentences decoded")
    parser.add_argument("--decode-repeats", type=int, default=d.decode_repeats, help="timed decoding runs")
    parser.add_argument(
        "--natural-stop", action="store_true", help="let eos end hypotheses (default: all decode to the length limit)"
    )
    parser.add_argument("--device", default=d.device, choices=["auto", "cpu", "cuda"])
    parser.add_argument("--precision", default=d.precision, choices=["auto", "32-true", "bf16-mixed"])
    parser.add_argument("--threads", type=int, default=None, help="CPU threads of torch (default: one per core)")
    parser.add_argument("--compile", action="store_true", help="torch.compile every trained model")
    parser.add_argument("--no-lightning", action="store_true", help="skip timing our step through Lightning")
    parser.add_argument("--no-overhead", action="store_true", help="skip the per-trial overhead subprocesses")
    parser.add_argument("--trial-preset", default=d.trial_preset, choices=list(PRESETS), help="overhead trial")
    parser.add_argument("--corpus", default=None, help="override data.corpus (directory or .tsv)")
    parser.add_argument("--seed", type=int, default=d.seed)
    parser.add_argument("--json", action="store_true", help="print the full result as JSON")
    return parser


def main(argv: list[str]) -> int:
    from benchmarks.bench import BenchConfig, format_report, run_bench

    args = build_parser().parse_args(argv)
    peers = tuple(p.strip() for p in args.vs.split(",") if p.strip() and p.strip() != "none")
    bench = BenchConfig(
        study=args.study,
        row=args.row,
        preset=args.preset,
        peers=peers,
        warmup=args.warmup,
        repeats=args.repeats,
        decode_sentences=args.decode_sentences,
        decode_repeats=args.decode_repeats,
        device=args.device,
        precision=args.precision,
        full_length=not args.natural_stop,
        threads=args.threads,
        compile=args.compile,
        lightning=not args.no_lightning,
        overhead=not args.no_overhead,
        trial_preset=args.trial_preset,
        corpus=args.corpus,
        seed=args.seed,
    )
    result = run_bench(bench, progress=lambda message: print(f"ablate bench: {message}", file=sys.stderr, flush=True))
    print(json.dumps(result, indent=2) if args.json else format_report(result))
    return 0
