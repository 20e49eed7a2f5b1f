"""`ablate compare A B [C ...]`: what differs between two results directories row by row, or between two runs; the
paper's claims over studies at several sizes.

Two results directories (A and B are OUT directories of `ablate sweep`, finished or not, or study names looked up
as RUNS_DIR/<study>-<preset> like `ablate report` does):

    ablate compare runs/table3-tiny runs/table3-tiny-gettext [--format md] [--out cmp.md]
    ablate compare runs/table3-tiny runs/modern-tiny --claims [--format md|tex|html]   # verdicts claim by claim

For every row (matched by name): BLEU, PPL and chrF as mean ± std over each side's complete seeds, B - A with its
95% interval and Holm-corrected p (seed noise from both sides; sentence noise from a paired bootstrap where both
scored the same dev sentences), the seeds of each side, and a flag where a row is missing on one side, not at its
plateau, or differs in something other than what the two directories change in every row (shown once at the top).
--out FILE writes the comparison there (atomically; FILE may be a directory) instead of printing it: in every
mode, --out is where to write.

Two runs (A and B are record files, OUT/records/<row>__seed<s>.json, or rows of one results directory given with
--study, a directory or a study name: 'B1' (its lowest complete seed) or 'B1@1' (seed 1)):

    ablate compare B1 base --study runs/table3-tiny [--plot cmp.png] [--out cmp.txt]

config fields that differ, the metrics, a paired bootstrap on the dev set, and the curves. (`--out OUT` naming the
rows' results directory, its meaning before --study, still reads them, with a notice; it goes in a later release.)

The claims over model size (the same rows at several presets: rungs), from two or more results directories whose
bases differ in size (two directories of one size get the side by side above):

    ablate compare runs/table3-tiny-gettext runs/table3-small-gettext [runs/table3-gpu-gettext ...] --claims
        [--format md|tex|html] [--out trend.md]

orders the studies by their base row's parameter count and prints, comparison by comparison, each rung's effect at T
with its 95% interval, its ratio to the paper's difference and its verdict, then whether the effect moves toward the
paper's as the model grows, away from it, flips sign, or stays flat (`reports.trend.classify`). The plot of effect
against the base's size (PNG and SVG) goes beside --out, or without it into the directories' parent's `trends/`;
the command names it.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

from ablate.ablations.commands import command_parser, own_options, parse, print_config
from ablate.ablations.results import load_results, resolve_out_dir
from ablate.ablations.statistics import N_SAMPLES
from ablate.data.atomic import write_text_atomic
from ablate.data.errors import AblateError
from ablate.reports.claims_compare import compare_claims
from ablate.reports.compare import compare_runs, compare_sweeps
from ablate.reports.lookup import load_sweep, resolve_run
from ablate.reports.plots import plot_comparison, plot_trend
from ablate.reports.sequential import report_table
from ablate.reports.trend import distinct_sizes, require_sizes, size_trend
from ablate.reports.writers import Context, format_names, format_of, formats_help, get_writer


def build_parser():
    parser = command_parser("ablate compare", __doc__)
    parser.add_argument("run_a", metavar="A", help="results directory or study name; or record file, row, row@seed")
    parser.add_argument("run_b", metavar="B", help="results directory or study name; or record file, row, row@seed")
    parser.add_argument(
        "more", metavar="C", nargs="*", default=[], help="with --claims: more results directories (the trend)"
    )
    parser.add_argument(
        "--out",
        default=None,
        metavar="PATH",
        help="the file (or directory) to write the comparison to instead of printing it; the trend's plot beside it",
    )
    parser.add_argument(
        "--study",
        default=None,
        metavar="STUDY_OR_OUT",
        help="two rows (A and B: row or row@seed): the results directory holding them, or a study name under "
        "--runs_dir",
    )
    parser.add_argument(
        "--format",
        choices=list(dict.fromkeys([*format_names("comparison"), *format_names("claims"), *format_names("trend")])),
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
        help="two directories of one size: their verdicts side by side, claim by claim (matched by id), instead of "
        f"row by row (formats: {formats_help('claims')}); directories at several sizes: the trend of each claim's "
        f"effects over size, and its plot (formats: {formats_help('trend')})",
    )
    return parser


def main(argv: list[str]) -> int:
    args = parse(build_parser(), argv)
    if args.print_config:
        return print_config(own_options(args))
    if args.more:
        if not args.claims:
            raise AblateError("more than two directories go with --claims: the claims' trend over model size")

        specs = (args.run_a, args.run_b, *args.more)
        return _compare_claims(args, [resolve_out_dir(s, runs_dir=args.runs_dir) for s in specs])
    notice = _old_out(args)
    dirs = _directories(args)
    if dirs is None:
        return _compare_runs(args, notice)
    if args.claims:
        return _compare_claims(args, list(dirs))
    return _compare_sweeps(args, *dirs)


def _old_out(args) -> str | None:
    """--out naming the rows' results directory, its meaning before --study: moved to --study, with the notice to
    print once the comparison is made; None for any other --out."""
    specs = (args.run_a, args.run_b)
    if args.study is not None or args.out is None or all(Path(s).is_dir() for s in specs):
        return None
    if not (Path(args.out) / "study.json").is_file():
        return None
    args.study, args.out = args.out, None
    return (
        f"ablate compare: --out as the rows' results directory is deprecated: use --study {args.study} (--out is "
        "where to write)"
    )


def _directories(args) -> tuple[Path, Path] | None:
    """The two results directories A and B name, or None when they name runs (record files, or rows of --study)."""
    specs = (args.run_a, args.run_b)
    if any(Path(s).suffix == ".json" or Path(s).is_file() for s in specs):
        return None
    if all(Path(s).is_dir() for s in specs):
        if args.study is not None:
            raise AblateError(f"--study names the results directory of two rows; {args.run_a} and {args.run_b} are "
                              "results directories themselves: leave --study out")  # fmt: skip
        return Path(specs[0]), Path(specs[1])
    if args.study is not None:
        return None  # rows of the results directory --study
    found = []
    for spec in specs:
        try:
            found.append(resolve_out_dir(spec, runs_dir=args.runs_dir))
        except AblateError as err:
            if len(Path(spec).parts) > 1:  # a path, not a name that could be a row
                raise
            raise AblateError(
                f"{err}; or, to compare two rows of one sweep, name its results directory: ablate compare "
                f"{args.run_a} {args.run_b} --study OUT"
            ) from None
    return found[0], found[1]


def _compare_sweeps(args, dir_a: Path, dir_b: Path) -> int:
    _no_plot(args)
    out = Path(args.out) if args.out else None
    fmt = "json" if args.json else args.format or (out and format_of(out, "comparison")) or "text"
    writer = get_writer(fmt, "comparison")
    comparison = compare_sweeps(load_sweep(dir_a), load_sweep(dir_b), n_samples=args.samples)
    return _write(
        comparison, writer, out, f"{dir_a.name}-vs-{dir_b.name}", f"comparison of {dir_a} (A) and {dir_b} (B)"
    )


def _no_plot(args) -> None:
    if args.plot:
        raise AblateError("--plot draws the curves of two runs; for results directories, leave it out (the trend's "
                          "plot goes beside --out)")  # fmt: skip


def _write(what, writer, out: Path | None, name: str, title: str, ctx=None) -> int:
    """Print `what` in `writer`'s format, or write it to `out` (a file, or a directory: `name` + the suffix there)."""
    if out is None:
        width = shutil.get_terminal_size((160, 24)).columns  # 160 when stdout is not a terminal
        print(writer.write(what, Context(width=width)), end="")
        return 0
    text = writer.write(what, ctx or Context())
    assert text is not None, f"{writer.name}: a format offered on its own writes text (None is a companion's answer)"
    if out.is_dir():
        out = out / f"{name}{writer.suffix}"
    write_text_atomic(out, text)
    print(f"{title}: {out}")
    return 0


def _compare_claims(args, dirs: list[Path]) -> int:
    """Each study judged as its report judges it (`reports.sequential.report_table`); two of one size side by side,
    claim by claim, else the trend over their sizes."""
    _no_plot(args)
    studies = [load_results(d) for d in dirs]
    tables = [report_table(results, n_samples=args.samples) for results in studies]
    if not any(t.claims for t in tables):
        which = f"neither {dirs[0]} nor {dirs[1]}" if len(dirs) == 2 else f"none of {', '.join(map(str, dirs))}"
        raise AblateError(f"--claims: {which} declares claims; give studies with a claims file")
    require_sizes(tables)  # a study without a finished base trial can judge no claim, at any size
    if len(dirs) > 2 or distinct_sizes(tables):
        sequential = [(r.meta.get("allocation") or {}).get("design") == "sequential" for r in studies]
        return _trend(args, tables, sequential)
    out = Path(args.out) if args.out else None
    fmt = "json" if args.json else args.format or (out and format_of(out, "claims")) or "text"
    writer = get_writer(fmt, "claims")
    a, b = dirs
    return _write(compare_claims(*tables), writer, out, f"{a.name}-vs-{b.name}", f"comparison of {a} (A) and {b} (B)")


def _trend(args, tables, sequential: list[bool]) -> int:
    """The trend table, printed or written to --out, and its plot beside --out (else in the directories' parent's
    trends/)."""
    trend = size_trend(tables, sequential=sequential)
    dirs = [Path(r.out_dir) for r in trend.rungs]
    name = "-vs-".join(d.name for d in dirs)
    out = Path(args.out) if args.out else None
    fmt = "json" if args.json else args.format or (out and format_of(out, "trend")) or "text"
    writer = get_writer(fmt, "trend")
    if out is None:
        plot_dir = _common_parent(dirs) / "trends"
    elif out.suffix.lower() in (".png", ".svg"):
        raise AblateError(f"--out {out}: name the table's file (.md, .tex, .html) or a directory; the plot goes "
                          "beside it")  # fmt: skip
    elif out.is_dir():
        plot_dir = out
    else:
        plot_dir, name = out.parent, out.stem
    plot = plot_trend(trend, plot_dir, name)
    where = f"plot: {plot.png} and {plot.svg}" if plot else "no plot: no comparison was tested at any rung"
    title = f"the claims of {len(dirs)} studies over model size"
    if out is None:
        _write(trend, writer, None, name, title)
        print(where)
        return 0
    return _write(trend, writer, out, name, f"{title}: {where}; table", Context(plots=(plot,) if plot else ()))


def _common_parent(dirs: list[Path]) -> Path:
    """The deepest directory holding all of `dirs` ('runs' for runs/a and runs/b)."""
    return Path(os.path.commonpath([d.resolve() for d in dirs]))


def _compare_runs(args, notice: str | None = None) -> int:
    """Two runs as text: printed, or written to --out (a file, or a directory: '<A>-vs-<B>.txt' there)."""
    if args.json or args.format not in (None, "text"):
        raise AblateError("--format and --json go with two results directories; two runs are compared as text")
    study = resolve_out_dir(args.study, runs_dir=args.runs_dir) if args.study is not None else None
    a = resolve_run(args.run_a, study)
    b = resolve_run(args.run_b, study)
    text = compare_runs(a, b, n_samples=args.samples)
    if notice:
        print(notice, file=sys.stderr)
    if args.out is None:
        print(text, end="")
    else:
        out = Path(args.out)
        if out.is_dir():
            out = out / f"{args.run_a}-vs-{args.run_b}.txt".replace("/", "_")
        write_text_atomic(out, text)
        print(f"comparison of {args.run_a} (A) and {args.run_b} (B): {out}")
    if args.plot:
        print(f"curves: {plot_comparison(a, b, Path(args.plot))}")
    return 0
