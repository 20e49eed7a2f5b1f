"""`ablate compare A B`: what differs between two results directories row by row, or between two runs.

Two results directories (A and B are OUT directories of `ablate sweep`, finished or not, or study names looked up
as RUNS_DIR/<study>-<preset> like `ablate report` does):

    ablate compare runs/table3-tiny runs/table3-tiny-gettext [--format md] [--out cmp.md]
    ablate compare runs/table3-tiny runs/modern-tiny --claims [--format md|tex|html]   # verdicts claim by claim

For every row (matched by name): BLEU, PPL and chrF as mean ± std over each side's complete seeds, B - A with its
95% interval and Holm-corrected p (seed noise from both sides; sentence noise from a paired bootstrap where both
scored the same dev sentences), the seeds of each side, and a flag where a row is missing on one side, not at its
plateau, or differs in something other than what the two directories change in every row (shown once at the top).
--out FILE writes the comparison there (atomically; FILE may be a directory) instead of printing it.

Two runs (A and B are record files, OUT/records/<row>__seed<s>.json, or rows of one results directory given with
--out: 'B1' (its lowest complete seed) or 'B1@1' (seed 1)):

    ablate compare B1 base --out runs/table3-tiny [--plot cmp.png]

config fields that differ, the metrics, a paired bootstrap on the dev set, and the curves.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from ablate.ablations.commands.options import command_parser, options, parse, print_config
from ablate.data.errors import AblateError


def build_parser():
    from ablate.reports.stats import N_SAMPLES
    from ablate.reports.writers import format_names, formats_help

    parser = command_parser("ablate compare", __doc__)
    parser.add_argument("run_a", metavar="A", help="results directory or study name; or record file, row, row@seed")
    parser.add_argument("run_b", metavar="B", help="results directory or study name; or record file, row, row@seed")
    parser.add_argument(
        "--out",
        default=None,
        metavar="PATH",
        help="two directories: the file (or directory) to write the comparison to; two rows: their results directory",
    )
    parser.add_argument(
        "--format",
        choices=list(dict.fromkeys([*format_names("comparison"), *format_names("claims")])),
        default=None,
        help=f"two directories: {formats_help('comparison')}; unset: from --out's suffix, else text",
    )
    parser.add_argument("--json", action="store_true", help="the same as --format json")
    parser.add_argument("--runs_dir", default="runs", help="where study names are looked up")
    parser.add_argument("--plot", default=None, metavar="PATH", help="two runs: also draw their curves to a PNG or SVG")
    parser.add_argument("--samples", type=int, default=N_SAMPLES, help="bootstrap resamples of the dev sentences")
    parser.add_argument(
        "--claims",
        action="store_true",
        help="two directories: their verdicts side by side, claim by claim (matched by id), instead of row by row; "
        f"formats: {formats_help('claims')}",
    )
    return parser


def main(argv: list[str]) -> int:
    args = parse(build_parser(), argv)
    if args.print_config:
        return print_config(options(args))
    dirs = _directories(args)
    if dirs is None:
        return _compare_runs(args)
    return _compare_sweeps(args, *dirs)


def _directories(args) -> tuple[Path, Path] | None:
    """The two results directories A and B name, or None when they name runs (record files, or rows of --out)."""
    from ablate.reports.results import resolve_out_dir

    specs = (args.run_a, args.run_b)
    if any(Path(s).suffix == ".json" or Path(s).is_file() for s in specs):
        return None
    if all(Path(s).is_dir() for s in specs):
        return Path(specs[0]), Path(specs[1])
    if args.out is not None and Path(args.out).is_dir() and not any(Path(s).is_dir() for s in specs):
        return None  # rows of the results directory --out
    found = []
    for spec in specs:
        try:
            found.append(resolve_out_dir(spec, runs_dir=args.runs_dir))
        except AblateError as err:
            if len(Path(spec).parts) > 1:  # a path, not a name that could be a row
                raise
            if args.out is not None:
                raise AblateError(f"{err}; to compare two rows, --out must be their results directory") from None
            raise AblateError(
                f"{err}; or, to compare two rows of one sweep, name its directory: ablate compare {args.run_a} "
                f"{args.run_b} --out OUT"
            ) from None
    return found[0], found[1]


def _compare_sweeps(args, dir_a: Path, dir_b: Path) -> int:
    from ablate.ablations.ledger import write_text_atomic
    from ablate.reports.compare import compare_sweeps
    from ablate.reports.lookup import load_sweep
    from ablate.reports.writers import Context, format_of, get_writer

    if args.plot:
        raise AblateError("--plot draws the curves of two runs; for two results directories, leave it out")
    out = Path(args.out) if args.out else None
    subject = "claims" if args.claims else "comparison"
    fmt = "json" if args.json else args.format or (out and format_of(out, subject)) or "text"
    writer = get_writer(fmt, subject)
    if args.claims:
        comparison = _claims_of(dir_a, dir_b, args.samples)
    else:
        comparison = compare_sweeps(load_sweep(dir_a), load_sweep(dir_b), n_samples=args.samples)
    if out is None:
        width = shutil.get_terminal_size((160, 24)).columns  # 160 when stdout is not a terminal
        print(writer.write(comparison, Context(width=width)), end="")
        return 0
    text = writer.write(comparison, Context())
    assert text is not None, f"{fmt}: a format offered on its own writes text (None is a companion's answer)"
    if out.is_dir():
        out = out / f"{dir_a.name}-vs-{dir_b.name}{writer.suffix}"
    write_text_atomic(out, text)
    print(f"comparison of {dir_a} (A) and {dir_b} (B): {out}")
    return 0


def _claims_of(dir_a: Path, dir_b: Path, samples: int):
    """Both studies judged as their reports judge them, then matched claim by claim."""
    from ablate.reports.api import load
    from ablate.reports.claims_compare import compare_claims

    tables = [load(d).table(n_samples=samples) for d in (dir_a, dir_b)]
    if not any(t.claims for t in tables):
        raise AblateError(f"--claims: neither {dir_a} nor {dir_b} declares claims; give studies with a claims file")
    return compare_claims(*tables)


def _compare_runs(args) -> int:
    from ablate.reports.compare import compare_runs
    from ablate.reports.lookup import resolve_run
    from ablate.reports.plots import plot_comparison

    if args.json or args.format not in (None, "text"):
        raise AblateError("--format and --json go with two results directories; two runs are compared as text")
    a = resolve_run(args.run_a, args.out)
    b = resolve_run(args.run_b, args.out)
    print(compare_runs(a, b, n_samples=args.samples), end="")
    if args.plot:
        print(f"curves: {plot_comparison(a, b, Path(args.plot))}")
    return 0
