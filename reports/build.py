"""`build_report`: from a results directory to every report file (and optionally a W&B run). The sweep calls it."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
import zlib
from collections.abc import Sequence
from importlib.metadata import version
from pathlib import Path
from typing import TYPE_CHECKING

from ablate.ablations.results import Layout, StudyResults, load_results
from ablate.ablations.statistics import N_SAMPLES
from ablate.ablations.study import parse_rows
from ablate.data.atomic import write_json_atomic, write_text_atomic
from ablate.reports import plots
from ablate.reports.cells import check_columns
from ablate.reports.claims import load_claims
from ablate.reports.plots import Plot, make_plots
from ablate.reports.sequential import report_table
from ablate.reports.table import ReportTable, select_rows
from ablate.reports.wandb_log import log_report
from ablate.reports.writers import Context, companions, format_names, get_writer, parse_formats

if TYPE_CHECKING:
    from ablate.reports.claims import Claim


def parse_columns(text: str | Sequence[str] | None) -> tuple[str, ...] | None:
    """'row,N,bleu' or ['row', 'N', 'bleu'] -> checked column keys (None: each format's default); AblateError naming
    an unknown one and listing the valid keys."""
    if text is None:
        return None
    return check_columns(text.split(",") if isinstance(text, str) else list(text))


def rows_dir(names: Sequence[str]) -> str:
    """The folder a report of some rows goes to under OUT/report: 'rows-B1-C1' (a long list cut, with its hash)."""
    name = "rows-" + "-".join(re.sub(r"[^A-Za-z0-9_.@+-]", "_", n) for n in names)
    return name if len(name) <= 80 else f"{name[:70]}-{zlib.crc32(name.encode()):08x}"


def _row_names(rows: str | Sequence[str] | None, results: StudyResults) -> list[str] | None:
    """--rows checked against the study's rows (`ablations.study.definition.parse_rows`); None: every row."""
    return parse_rows(rows, [spec.name for spec in results.rows])


def describe_corpus(results: StudyResults) -> str | None:
    """The data the rows trained on, from their data config and fingerprint, e.g. 'gettext:de (SentencePiece bpe
    vocabulary of 1000, fingerprint 73d296a63bf7)'; the distinct texts joined by '; ' when rows differ; None when no
    row says. A pinned copy is named by its origin (`ablations.sweep.corpora`)."""
    texts = []
    for spec in results.rows:
        data = (spec.config or {}).get("data") or {}
        corpus = spec.corpus.source if spec.corpus and spec.corpus.source else str(data.get("corpus") or "")
        if not corpus:
            continue
        directory = "/" in corpus and not corpus.startswith("gettext:")
        name = Path(corpus).name if directory else corpus  # a directory or file: its name, not the whole path
        details = [f"{data['src']}-{data['tgt']}"] if data.get("src") and data.get("tgt") else []
        if data.get("vocab_size"):
            kind = f" {data['spm_model_type']}" if data.get("spm_model_type") else ""
            details.append(f"SentencePiece{kind} vocabulary of {data['vocab_size']}")
        if spec.corpus is not None:
            details.append(f"fingerprint {spec.corpus.short}")
        texts.append(f"{name} ({', '.join(details)})" if details else name)
    return "; ".join(dict.fromkeys(texts)) or None


def build_report(
    out_dir: str | Path,
    formats: Sequence[str] | None = None,
    report_dir: Path | None = None,
    wandb: bool = False,
    *,
    plots: bool = True,
    n_samples: int = N_SAMPLES,
    storage: str | None = None,
    claims: str | Path | None = None,
    columns: Sequence[str] | None = None,
    rows: str | Sequence[str] | None = None,
) -> dict[str, Path]:
    """Write the report of the results directory `out_dir` (a finished or running sweep).

    Args:
        out_dir: the OUT directory of `ablate sweep` (study.json, records/, hyps/, refs/).
        formats: names of registered writers (`reports.writers`: 'md', 'tex', 'csv', 'json', 'html'); default all.
        report_dir: where to write; default OUT/report. Plots go to REPORT_DIR/plots.
        wandb: also log the table and plots to a W&B run (offline unless the environment says otherwise).
        plots: draw the plots (PNG and SVG); the HTML page and W&B show them.
        n_samples: bootstrap resamples of the dev sentences in every test (the marks' and the verdicts').
        storage: Optuna storage URL to read pending/running trials from (default: $ABLATE_STORAGE, else
            study.json's).
        claims: a claims file to judge instead of the study's own (see ablations/study/builtin/table3.claims.yaml).
        columns: keys of `reports.cells.COLUMNS` the Markdown, LaTeX and HTML tables show, in that order (default:
            each format's own choice); CSV and JSON keep every value.
        rows: row names ('B1,C1' or a list): a report of those and of the rows they are compared with
            (`reports.table.select_rows`), written by default to OUT/report/rows-<names>; default every row.

    Returns:
        format -> file written ('md', 'tex', ...), 'plot:<name>' -> PNG, 'plot:<name>.svg' -> SVG, and
        'wandb' -> the W&B run directory when one was written.
    """
    formats = parse_formats(format_names() if formats is None else formats)
    columns = parse_columns(columns)
    out_dir = Path(out_dir)
    results = load_results(out_dir, storage=storage)
    names = _row_names(rows, results)
    table = report_table(results, n_samples=n_samples, claims=_claims(results, claims))
    if names is not None:
        table = select_rows(table, names)
    if report_dir is None:
        report_dir = Layout(out_dir).report_dir / (rows_dir(names) if names is not None else "")
    report_dir = Path(report_dir)
    report_dir.mkdir(parents=True, exist_ok=True)

    shown = wandb or any(get_writer(name).plots for name in formats)  # a CSV alone needs no plot
    drawn = _draw_plots(table, results, report_dir / "plots") if plots and shown else []
    written = {f"plot:{plot.name}{ext}": path for plot in drawn for ext, path in (("", plot.png), (".svg", plot.svg))}
    ctx = Context(columns=columns, corpus=describe_corpus(results), plots=tuple(drawn))
    written.update(write_formats(table, formats, report_dir, ctx))
    if wandb:
        project = str(results.meta.get("wandb_project") or "ablate")
        run_dir = log_report(table, drawn, project=project, wandb_dir=out_dir)
        if run_dir is not None:
            written["wandb"] = run_dir
    return written


def _claims(results: StudyResults, claims: str | Path | None) -> list[Claim] | None:
    """The claims file's claims, checked against the study's rows; None: the study's own."""
    if claims is None:
        return None
    base = results.base.name if results.base else None
    return load_claims(claims, [r.name for r in results.rows], base)


PLOTS_DRAWN = "plots.json"
"""In the plot folder: what its plots were drawn from (a digest) and which they are, so that a report of the same
inputs reuses them. Matplotlib takes most of a warm report's time (timed:
docs/reference/code-figures.md, "reports/build.py")."""


def _draw_plots(table: ReportTable, results: StudyResults, plot_dir: Path) -> list[Plot]:
    """The report's plots: those in `plot_dir` when they were drawn from these very inputs (the table, the records'
    curves, the plotting code and matplotlib's version), else drawn again."""
    inputs = _plot_inputs(table, results)
    manifest = plot_dir / PLOTS_DRAWN
    try:
        before = json.loads(manifest.read_text(encoding="utf-8"))
        if before["inputs"] == inputs:
            kept = [Plot(name=p["name"], title=p["title"], png=plot_dir / f"{p['name']}.png",
                         svg=plot_dir / f"{p['name']}.svg", claim=p.get("claim")) for p in before["plots"]]  # fmt: skip
            if all(p.png.is_file() and p.svg.is_file() for p in kept):
                return kept
    except (OSError, ValueError, KeyError, TypeError):  # none yet, or unreadable: drawn again
        pass

    manifest.unlink(missing_ok=True)  # an interrupted drawing leaves no claim that the plots are current
    drawn = make_plots(table, results, plot_dir)
    plots = [{"name": p.name, "title": p.title, "claim": p.claim} for p in drawn]
    write_json_atomic(manifest, {"inputs": inputs, "plots": plots})
    return drawn


def _plot_inputs(table: ReportTable, results: StudyResults) -> str:
    """A digest of everything a plot is drawn from: the table (its repr holds every value, dataclasses all the way
    down; not when it was made), each record's curves, the code of `reports.plots` and the version of matplotlib."""

    digest = hashlib.sha256(repr(dataclasses.replace(table, generated_at="")).encode())  # the time is no input
    for key, status in sorted(results.status.items()):
        if status.record is not None:
            digest.update(repr((key, status.record.curves)).encode())
    digest.update(Path(plots.__file__).read_bytes())
    digest.update(version("matplotlib").encode())
    return digest.hexdigest()


def write_formats(table: ReportTable, formats: Sequence[str], report_dir: Path, ctx: Context) -> dict[str, Path]:
    """Each format's file, and its companions' (the claims CSV beside the CSV), each written atomically as
    REPORT_DIR/<stem><suffix>. Returns writer name -> file."""
    written: dict[str, Path] = {}
    stem = report_stem(table)
    for name in formats:
        for w in (get_writer(name), *companions(name)):
            text = w.write(table, ctx)
            if text is None:
                continue
            path = report_dir / f"{stem}{w.suffix}"
            write_text_atomic(path, text)
            written[w.name] = path
    return written


def report_stem(table: ReportTable) -> str:
    """File name stem of the report files: '<study>-<preset>' (or '<study>')."""
    return f"{table.study}-{table.preset}" if table.preset else table.study
