"""`ablate bench`: training and decoding speed of one configuration, side by side with peer implementations."""

from __future__ import annotations

import json
import sys

from ablate.ablations.commands.options import (
    command_parser,
    overrides,
    own_options,
    parse,
    print_config,
    wants_help,
)
from ablate.benchmarks.bench import BenchConfig, format_report, run_bench

SECTIONS = ("model", "train", "data")
"""The row's settings a bench run may override (--data.buckets 8, --train.fused_loss true, ...)."""

DESCRIPTION = """Measure one configuration's training throughput (target and source+target tokens/s), step time
(median and IQR), peak memory, padding overhead, beam-4 and greedy decoding speed and per-trial overhead, and the
same for peers in the same run on identical batches: Hugging Face MarianMT ('hf', needs pip install
'ablate[bench]'), torch.nn.Transformer ('torch'), or our model as another row of the study builds it ('row:NAME':
what a knob costs). Prints the ratios ours/peer and the issue's targets. On CUDA: bf16 autocast, fused Adam, a
check of the fused SDPA kernels, MFU against the GPU's bf16 peak."""


def build_parser():
    parser = command_parser("ablate bench", DESCRIPTION, sections=SECTIONS, documented=wants_help(sys.argv))
    parser.add_class_arguments(BenchConfig, skip={"peers", "trial_args", "settings"}, as_group=False)
    parser.add_argument(
        "--vs",
        default="hf,torch",
        help="comma-separated peers: hf, torch, row:NAME (our model as another row of --study builds it, e.g. "
        "--study modern --vs row:paper); 'none' for ours only",
    )
    parser.add_argument("--json", action="store_true", help="print the full result as JSON")
    return parser


def main(argv: list[str]) -> int:
    args = parse(build_parser(), argv)
    if args.print_config:
        return print_config(own_options(args))
    values = {k: v for k, v in own_options(args).items() if k not in ("vs", "json")}
    peers = tuple(p.strip() for p in args.vs.split(",") if p.strip() and p.strip() != "none")
    bench = BenchConfig(**values, peers=peers, settings=overrides(args, SECTIONS))
    result = run_bench(bench, progress=lambda message: print(f"ablate bench: {message}", file=sys.stderr, flush=True))
    print(json.dumps(result, indent=2) if args.json else format_report(result))
    return 0
