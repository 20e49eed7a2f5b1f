"""`ablate compare A B`: what differs between two runs (config fields, metrics, dev-set significance, curves).

A and B are record files (OUT/records/<row>__seed<s>.json), or rows of one results directory given with --out:
'B1' (its lowest complete seed) or 'B1@1' (seed 1).
"""

from __future__ import annotations

from pathlib import Path

from ablations.commands.options import command_parser, options, parse, print_config


def build_parser():
    parser = command_parser("ablate compare", __doc__)
    parser.add_argument("run_a", metavar="A", help="record file, or row / row@seed of --out")
    parser.add_argument("run_b", metavar="B", help="record file, or row / row@seed of --out")
    parser.add_argument("--out", default=None, metavar="OUT", help="results directory the row names refer to")
    parser.add_argument("--plot", default=None, metavar="PATH", help="also draw both runs' curves to a PNG or SVG")
    parser.add_argument("--samples", type=int, default=1000, help="bootstrap resamples of the significance test")
    return parser


def main(argv: list[str]) -> int:
    args = parse(build_parser(), argv)
    if args.print_config:
        return print_config(options(args))
    from reports.compare import compare_runs, plot_comparison, resolve_run

    a = resolve_run(args.run_a, args.out)
    b = resolve_run(args.run_b, args.out)
    print(compare_runs(a, b, n_samples=args.samples), end="")
    if args.plot:
        print(f"curves: {plot_comparison(a, b, Path(args.plot))}")
    return 0
