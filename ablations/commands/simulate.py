"""`ablate simulate STUDY`: the study's claims at its design, simulated with the code a sweep runs.

    ablate simulate table3 --replicates 10000
    ablate simulate table3 --effect C1=-2 --fixed          # power at a planted 2-BLEU effect, the fixed design
    ablate simulate table3 --unstable C4                   # one claimed row with ten times the seed variance

Each replicate draws every row's seeds at T/2 and T and a dev set (seed SDs, their correlation and the sentence noise
of the default archive, or --noise), and runs the study's design as the sweep would: the same looks, tests,
verdicts, family, boundaries and futility rule (`ablations.statistics.simulation`). Prints the family-wise error
with its 95% Monte Carlo interval, how often each comparison was reproduced or wrong, and the trials it cost against
every row at max_seeds. No training.
"""

from __future__ import annotations

import sys

from ablate.ablations.commands.options import command_parser, own_options, parse, print_config
from ablate.data.errors import AblateError


def build_parser():
    parser = command_parser("ablate simulate", __doc__)
    parser.add_argument("study", nargs="?", default="table3", help="built-in study name or study YAML file")
    parser.add_argument("--replicates", type=int, default=1000, help="simulated studies (default: 1000)")
    parser.add_argument("--min_seeds", type=int, default=None, help="default: the study's")
    parser.add_argument("--max_seeds", type=int, default=None, help="default: the study's")
    parser.add_argument("--fixed", action="store_true", help="every claimed row at max_seeds, one look")
    parser.add_argument(
        "--effect", action="append", default=[], metavar="ROW=DELTA",
        help="a planted true difference against the base in BLEU (ROW=DELTA or ROW:METRIC=DELTA); repeatable",
    )  # fmt: skip
    parser.add_argument("--unstable", action="append", default=[], metavar="ROW", help="a row with 10x seed variance")
    parser.add_argument(
        "--noise", default=None, metavar="SD_HALF,SD_FULL,CORR,SENTENCE_SE",
        help="seed SD at T/2 and T, their correlation, the sentence SE of a difference (default: 1.13,0.85,0.76,0.35)",
    )  # fmt: skip
    parser.add_argument("--seed", type=int, default=0, help="the simulation's random seed")
    return parser


def main(argv: list[str]) -> int:
    args = parse(build_parser(), argv)
    if args.print_config:
        return print_config(own_options(args))
    from ablate.ablations.statistics import Design, Noise, simulate
    from ablate.ablations.study import load_study
    from ablate.lightning_modules.metrics import METRICS

    study = load_study(args.study)
    rows = [r.name for r in study.rows]
    if not study.claims or study.base_name is None:
        raise AblateError(f"{args.study}: a simulation needs claims and a base row; add `claims:` to the study")
    if args.replicates < 1:
        raise AblateError(f"--replicates must be at least 1, got {args.replicates}")
    effects = {_row(spec, rows, "--effect")[0]: _row(spec, rows, "--effect")[1] for spec in args.effect}
    for row in args.unstable:
        if row not in rows:
            raise AblateError(f"--unstable: unknown row '{row}' (rows: {', '.join(rows)})")
    most = args.max_seeds or study.max_seeds
    least = most if args.fixed else (args.min_seeds or study.min_seeds)
    if not 1 <= least <= most:
        raise AblateError(f"--min_seeds ({least}) must be between 1 and --max_seeds ({most})")
    noise = Noise() if args.noise is None else _noise(args.noise)
    design = Design(min_seeds=least, max_seeds=most)

    def progress(done: int, total: int) -> None:
        if done == total or done % max(total // 20, 1) == 0:
            print(f"\rsimulated {done}/{total}", end="\n" if done == total else "", file=sys.stderr, flush=True)

    result = simulate(list(study.claims), rows, study.base_name, metrics=METRICS, effects=effects,
                      unstable=args.unstable, design=design, noise=noise, replicates=args.replicates, seed=args.seed,
                      progress=progress)  # fmt: skip
    kind = "fixed" if least == most else "sequential"
    print(f"{study.name}: {kind} design, {least} to {most} seeds a row, {result.replicates} replicates")
    print(f"family-wise error {result.fwer:.4f} (95% interval up to {result.fwer_upper:.4f})")
    print(f"trials {result.trials:.1f} on average, {result.most_trials} with every row at max_seeds")
    for key, share in result.reproduced.items():
        print(f"  {key:<32} reproduced {share:.3f}  wrong {result.wrong[key]:.3f}")
    return 0


def _row(spec: str, rows: list[str], option: str) -> tuple[tuple[str, str], float]:
    """'C1=-2' or 'D3:ppl=-1.5' -> ((row, metric), delta)."""
    name, _, value = spec.partition("=")
    row, _, metric = name.partition(":")
    if row not in rows:
        raise AblateError(f"{option} {spec}: unknown row '{row}' (rows: {', '.join(rows)})")
    try:
        return (row, metric or "bleu"), float(value)
    except ValueError:
        raise AblateError(f"{option} {spec}: write ROW=DELTA, e.g. C1=-2") from None


def _noise(text: str):
    from ablate.ablations.statistics import Noise

    try:
        half, full, corr, sentence = (float(x) for x in text.split(","))
    except ValueError:
        raise AblateError(f"--noise {text}: write four numbers, SD_HALF,SD_FULL,CORR,SENTENCE_SE") from None
    return Noise(seed_sd=(half, full), correlation=corr, sentence_se=sentence)
