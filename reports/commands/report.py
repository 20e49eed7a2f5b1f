"""`ablate report`: Table 3 rebuilt from a results directory (finished or still running), beside the paper.

Writes every registered format (`reports.writers`: Markdown, LaTeX (booktabs), CSV, JSON, one self-contained HTML
page and the text a terminal gets), plus the plots (PNG and SVG), and optionally logs the table and plots to W&B.
Prints that text (the verdicts and a table in 100 columns) and where the files are. Reads results only: no training
code is imported.
"""

from __future__ import annotations

from pathlib import Path

from ablate.ablations.commands import command_parser, own_options, parse, print_config
from ablate.ablations.results import resolve_out_dir
from ablate.ablations.runtime import check_escaped, check_folder, given_url
from ablate.ablations.statistics import N_SAMPLES
from ablate.data.errors import AblateError
from ablate.reports.build import build_report, parse_columns
from ablate.reports.cells import COLUMNS
from ablate.reports.writers import format_names, formats_help, parse_formats


def build_parser():
    parser = command_parser("ablate report", __doc__)
    parser.add_argument(
        "study_or_out",
        metavar="STUDY_OR_OUT",
        help="a results directory (the OUT of `ablate sweep`), or a study name looked up as RUNS_DIR/<study>-<preset>",
    )
    parser.add_argument("--preset", default=None, help="with a study name: which preset's results (default: newest)")
    parser.add_argument("--runs_dir", default="runs", help="where study names are looked up (default: runs)")
    parser.add_argument("--out", default=None, metavar="REPORT_DIR", help="where to write (default: OUT/report)")
    parser.add_argument(
        "--format",
        default=",".join(format_names()),
        help=f"comma-separated formats among {formats_help()}",
    )
    parser.add_argument(
        "--columns",
        default=None,
        metavar="KEYS",
        help="comma-separated column keys the Markdown, LaTeX and HTML tables show, in that order, e.g. "
        "row,N,d_model,ppl,bleu,delta_bleu (default: all but test_chrf; LaTeX also leaves out wall, tok_s, device, "
        "plateau, and seeds when every seed completed). "
        "CSV and JSON keep every value. Keys: " + ", ".join(COLUMNS),
    )
    parser.add_argument(
        "--rows",
        default=None,
        metavar="ROWS",
        help="comma-separated rows, e.g. base,B1,C1: a report of those and of the rows they are compared with (the "
        "base, the row their blank cells repeat, their claims' references), with the claims that compare them; the "
        "numbers, tests and verdicts are the whole study's. Written to OUT/report/rows-<ROWS> unless --out says",
    )
    parser.add_argument(
        "--wandb",
        action="store_true",
        help="log the table and plots to a W&B run (offline unless WANDB_MODE or WANDB_API_KEY says otherwise)",
    )
    parser.add_argument(
        "--storage",
        default=None,
        help="Optuna storage URL to read pending/running trials from "
        "(default: $ABLATE_STORAGE, else study.json's, which keeps no PostgreSQL password)",
    )
    parser.add_argument("--no_plots", action="store_true", help="skip the plots (the HTML page then has none)")
    parser.add_argument("--samples", type=int, default=N_SAMPLES, help="bootstrap resamples of the significance test")
    parser.add_argument(
        "--quiet", action="store_true", help="print only where the files are, not the verdicts and the compact table"
    )
    parser.add_argument(
        "--claims",
        default=None,
        metavar="FILE",
        help="a claims YAML to judge instead of the study's own (form: ablations/study/builtin/table3.claims.yaml)",
    )
    return parser


def main(argv: list[str]) -> int:
    args = parse(build_parser(), argv)
    if args.print_config:
        return print_config(own_options(args))

    if args.samples < 1:
        raise AblateError(f"--samples {args.samples}: the bootstrap needs at least 1 resample")

    if url := given_url(args.storage):  # the report falls back to the records when a storage cannot be read, but
        check_escaped(url)  # not when the URL it was given is malformed
    formats = parse_formats(args.format)  # bad formats, columns and folders fail before any work
    columns = parse_columns(args.columns)
    if args.out:
        check_folder(Path(args.out))
    out_dir = resolve_out_dir(args.study_or_out, preset=args.preset, runs_dir=args.runs_dir)
    written = build_report(
        out_dir,
        formats,
        report_dir=Path(args.out) if args.out else None,
        wandb=args.wandb,
        plots=not args.no_plots,
        n_samples=args.samples,
        storage=args.storage,
        claims=args.claims,
        columns=columns,
        rows=args.rows,
    )
    if "text" in written and not args.quiet:  # the verdicts and a compact table; the files hold the rest
        print(written["text"].read_text(encoding="utf-8"))
    files = [f"  {key:<6} {path}" for key, path in written.items() if not key.startswith("plot:")]
    n_plots = sum(key.startswith("plot:") and not key.endswith(".svg") for key in written)
    print(f"report of {out_dir}:")
    print("\n".join(files))
    if n_plots:
        plot_dir = next(path.parent for key, path in written.items() if key.startswith("plot:"))
        print(f"  plots  {n_plots} PNG + SVG in {plot_dir}")
    return 0
