"""`ablate replay OUT`: a finished fixed-design study replayed under the sequential design (`reports.replay`).

    ablate replay runs/table3-tiny [--min_seeds 2] [--max_seeds 3]

Feeds the study's trials to the sequential policy in the order it asks for them (a row's seeds in seed order) and
prints each look (which rows are decided, open or out of reach), the trials it would have run and their
core-hours against the full design's, and the comparisons whose verdict differs. No training.
"""

from __future__ import annotations

from ablate.ablations.commands import command_parser, own_options, parse, print_config
from ablate.ablations.results import resolve_out_dir
from ablate.ablations.statistics import N_SAMPLES
from ablate.data.errors import AblateError
from ablate.reports.replay import replay, summary


def build_parser():
    parser = command_parser("ablate replay", __doc__)
    parser.add_argument("study_or_out", metavar="OUT", help="results directory, or a study name under --runs_dir")
    parser.add_argument("--runs_dir", default="runs", help="where study names are looked up (default: runs)")
    parser.add_argument("--min_seeds", type=int, default=2, help="seeds every row trains before the first look")
    parser.add_argument(
        "--max_seeds", type=int, default=None, help="the most seeds a row trains (default: the seeds the study ran)"
    )
    parser.add_argument(
        "--design", choices=["spending", "confseq"], default="spending", help="how the looks keep the error"
    )
    parser.add_argument("--samples", type=int, default=N_SAMPLES, help="bootstrap resamples of the significance test")
    return parser


def main(argv: list[str]) -> int:
    args = parse(build_parser(), argv)
    if args.print_config:
        return print_config(own_options(args))

    if args.min_seeds < 1:
        raise AblateError(f"--min_seeds must be at least 1, got {args.min_seeds}")
    if args.max_seeds is not None and args.max_seeds < args.min_seeds:
        raise AblateError(f"--max_seeds ({args.max_seeds}) must be at least --min_seeds ({args.min_seeds})")
    out_dir = resolve_out_dir(args.study_or_out, runs_dir=args.runs_dir)
    print(
        summary(
            replay(
                out_dir, min_seeds=args.min_seeds, max_seeds=args.max_seeds, n_samples=args.samples, error=args.design
            )
        )
    )
    return 0
