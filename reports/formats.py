"""A `ReportTable` written out: Markdown, LaTeX (booktabs), CSV, JSON and one self-contained HTML page.

Markdown, LaTeX and HTML share the paper's layout (`display_columns`/`display_cells`: blank cell = same as base,
mean ± std, significance marks). CSV and JSON are for machines: every value spelled out, raw numbers, no blanks.
"""

from __future__ import annotations

import base64
import csv
import io
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from reports.claims import ClaimVerdict, comparison_text
from reports.convergence import PLATEAU_BLEU, PLATEAU_PPL
from reports.significance import ALPHA
from reports.stats import METRICS
from reports.table import CONFIG_COLUMNS, ReportRow, ReportTable, Stat

FORMATS = ("md", "tex", "csv", "json", "html")
"""Every output format, in the order they are written."""


@dataclass(frozen=True)
class Column:
    """A displayed column: key, plain header (Markdown/HTML), LaTeX header, alignment ('l' or 'r')."""

    key: str
    header: str
    tex: str
    align: str = "r"


_TEX_HEADERS = {
    "N": "$N$",
    "d_model": r"$d_\mathrm{model}$",
    "d_ff": r"$d_\mathrm{ff}$",
    "h": "$h$",
    "d_k": "$d_k$",
    "d_v": "$d_v$",
    "P_drop": r"$P_\mathrm{drop}$",
    "eps_ls": r"$\epsilon_{ls}$",
    "train_steps": r"\shortstack{train\\steps}",
}
_HEADERS = {"eps_ls": "ε_ls"}


def display_columns(table: ReportTable) -> list[Column]:
    """The columns shown for this table (paper columns only when rows match the paper, Δ only with a base)."""
    cols = [Column("group", "", "", "l"), Column("row", "row", "row", "l")]
    cols += [Column(c.key, _HEADERS.get(c.key, c.header), _TEX_HEADERS[c.key]) for c in CONFIG_COLUMNS]
    if any(r.other for r in table.rows):
        cols.append(Column("other", "other", "other", "l"))
    cols += [
        Column("ppl", "PPL (dev)", r"\shortstack{PPL\\(dev)}"),
        Column("bleu", "BLEU (dev)", r"\shortstack{BLEU\\(dev)}"),
        Column("chrf", "chrF (dev)", r"\shortstack{chrF\\(dev)}"),
        Column("params", "params ×10⁶", r"\shortstack{params\\$\times 10^6$}"),
    ]
    if table.show_paper:
        cols += [
            Column("paper_ppl", "paper PPL", r"\shortstack{paper\\PPL}"),
            Column("paper_bleu", "paper BLEU", r"\shortstack{paper\\BLEU}"),
        ]
    if table.base is not None:
        cols.append(Column("delta_bleu", "ΔBLEU vs base", r"\shortstack{$\Delta$BLEU\\vs base}"))
    cols += [
        Column("plateau", "plateau", "plateau", "l"),
        Column("state", "seeds", "seeds", "l"),
        Column("wall", "wall time", r"\shortstack{wall\\time}"),
        Column("tok_s", "tok/s", "tok/s"),
        Column("device", "device", "device", "l"),
    ]
    return cols


def group_label(group: str, rows: list[ReportRow]) -> str:
    """The paper's row-group label: '(A)' for a group of variants, the name itself for a one-row group like 'big'."""
    return group if len(rows) == 1 and rows[0].name == group else f"({group})"


def _value(value: Any) -> str:
    if value is None:
        return "?"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float):
        text = f"{value:g}"
        return text if any(c in text for c in ".en") else f"{text}.0"  # 0.0, not 0: a rate reads as a rate
    return str(value)


def _steps(value: Any) -> str:
    if isinstance(value, int) and value >= 1000 and value % 1000 == 0:
        return f"{value // 1000}K"
    return _value(value)


def _stat(stat: Stat | None, digits: int, sign: str = "") -> str:
    if stat is None:
        return ""
    text = f"{stat.mean:{sign}.{digits}f}"
    return text if stat.std is None else f"{text} ± {stat.std:.{digits}f}"


def _params(millions: float | None) -> str:
    if millions is None:
        return ""
    return f"{millions:.0f}" if millions >= 1000 else f"{millions:.3g}"


def duration(seconds: float | None) -> str:
    """'45s', '12m05s', '3h07m'."""
    if seconds is None:
        return ""
    s = round(seconds)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


def _rate(value: float | None) -> str:
    if value is None:
        return ""
    return f"{value / 1000:.1f}k" if value >= 1000 else f"{value:.0f}"


def state_text(row: ReportRow, width: int | None = 60) -> str:
    """'2/2', '1/2 · 1 running', 'pending', 'failed: <reason>' (reasons cut to `width` characters)."""
    total, done = row.n_seeds, row.count("complete")
    parts = [f"{done}/{total}"] if done else []
    for state in ("running", "pending", "pruned", "failed"):
        n = row.count(state)
        if not n:
            continue
        label = state if n == total else f"{n} {state}"
        reasons = [r for seed, r in sorted(row.reasons.items()) if row.status[seed].state == state]
        if reasons:
            reason = reasons[0] if width is None or len(reasons[0]) <= width else reasons[0][: width - 1] + "…"
            label = f"{label}: {reason}"
        parts.append(label)
    return " · ".join(parts) if parts else "no seeds"


def display_cells(row: ReportRow) -> dict[str, str]:
    """Column key -> cell text in the paper's layout (blank config cell = same as base)."""
    cells = {"row": row.name}
    for col in CONFIG_COLUMNS:
        value = row.config[col.key]
        shown = _steps(value) if col.key == "train_steps" else _value(value)
        cells[col.key] = "" if row.same_as_base[col.key] else shown
    cells["other"] = ", ".join(f"{k.removeprefix('model.')}={_value(v)}" for k, v in row.other.items())
    cells["ppl"] = _stat(row.ppl, 2)
    cells["bleu"] = _stat(row.bleu, 2)
    cells["chrf"] = _stat(row.chrf, 1)
    cells["plateau"] = row.convergence.text if row.convergence else ""
    cells["params"] = _params(row.params_m)
    cells["paper_ppl"] = f"{row.paper.ppl:.2f}" if row.paper and row.paper.ppl is not None else ""
    cells["paper_bleu"] = f"{row.paper.bleu:.1f}" if row.paper and row.paper.bleu is not None else ""
    mark = row.significance.mark if row.significance else ""
    cells["delta_bleu"] = (_stat(row.delta_bleu, 2, "+") + f" {mark}").strip()
    cells["wall"] = duration(row.wall_time_s)
    cells["tok_s"] = _rate(row.tokens_per_sec)
    cells["device"] = ", ".join(row.devices)
    cells["state"] = state_text(row)
    return cells


def legend(table: ReportTable) -> list[str]:
    """The lines a reader needs under the table: how to read it, then the notes and every failure in full."""
    seeds = ", ".join(str(s) for s in table.seeds)
    lines = [
        f"Study '{table.study}', preset '{table.preset}', seeds {seeds}; results from {table.out_dir}.",
        "PPL and BLEU on the dev set: mean ± sample standard deviation over the complete seeds; "
        "'seeds' counts complete / all.",
    ]
    if table.base is not None:
        lines += [
            f"Blank configuration cells: same as the base row '{table.base}'.",
            f"ΔBLEU: BLEU minus the base's, paired by seed. † / ‡: paired bootstrap resampling "
            f"(sacrebleu, {table.n_samples} resamples) finds the BLEU difference from the base significant at "
            f"p < {ALPHA} / p < 0.01 on every paired seed, with the same sign.",
        ]
    lines.append(
        f"chrF: sacreBLEU {table.chrf_signature}. plateau: 'yes' when dev BLEU moved by less than {PLATEAU_BLEU:g} "
        f"and dev PPL fell by less than {PLATEAU_PPL:.0%} between the last two validations of every seed (on the same "
        "sentences); 'rising' means train longer, "
        "'diverged' that a seed failed or ended above the uniform guess's perplexity."
    )
    unconverged = [r.name for r in table.rows if r.convergence is not None and r.convergence.state != "plateau"]
    if unconverged:
        lines.append(
            f"NOT AT PLATEAU: {', '.join(unconverged)}. Their numbers measure how fast a model learns, not what it "
            "is worth: raise train.max_steps before reading them as results."
        )
    if table.show_paper:
        lines.append(
            "paper: Vaswani et al. (2017), Table 3, single runs on newstest2013 (EN-DE); its PPL is per wordpiece "
            "of a 37K BPE vocabulary, so compare directions and gaps, not levels."
        )
    for row in table.rows:
        for seed, reason in sorted(row.reasons.items()):
            lines.append(f"{row.name} seed {seed} {row.status[seed].state}: {reason}")
    return lines + table.notes


# --- Markdown -----------------------------------------------------------------------------------------------------


def _md_escape(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def to_markdown(table: ReportTable) -> str:
    """A GitHub-flavoured Markdown table in the paper's layout, with its legend."""
    cols = display_columns(table)
    lines = [
        f"## {table.study} ({table.preset})",
        "",
        "| " + " | ".join(c.header for c in cols) + " |",
        "|" + "|".join(":--" if c.align == "l" else "--:" for c in cols) + "|",
    ]
    for group, rows in table.groups():
        for i, row in enumerate(rows):
            cells = display_cells(row) | {"group": group_label(group, rows) if i == 0 else ""}
            lines.append("| " + " | ".join(_md_escape(cells[c.key]) for c in cols) + " |")
    lines.append("")
    if table.claims:
        # A list rather than a table: it reads the same in a terminal (the sweep prints this file) and rendered.
        lines += ["### The paper's claims", ""]
        for cv in table.claims:
            lines.append(f"- **{cv.verdict.upper()}**: {claim_title(cv)}")
            lines += [f"  - {c.verdict}: {comparison_text(c, table.base)}" for c in cv.comparisons]
        lines += ["", CLAIMS_LEGEND, ""]
    lines += [f"- {_md_escape(line)}" for line in legend(table)]
    return "\n".join(lines) + "\n"


CLAIMS_LEGEND = (
    "Each comparison: difference of the means over seeds [95% confidence interval counting seed noise (pooled over "
    "rows) and dev-sentence noise (paired bootstrap)], two-sided p and Holm-corrected p over every row against the "
    "base on that metric; paper = the paper's difference. Reproduced: Holm p < 0.05 in the claimed direction "
    "(equivalence: the interval inside the margin); contradicted: significant the other way (equivalence: interval "
    "outside the margin); inconclusive: neither, so the study cannot tell at this size and seed count."
)


def claim_title(cv: ClaimVerdict) -> str:
    section = f" ({cv.claim.section})" if cv.claim.section else ""
    return f"{cv.claim.text}{section}"


def verdict_lines(table: ReportTable) -> list[str]:
    """One line per claim and one per comparison: what the terminal prints at the end of a sweep."""
    lines = []
    for cv in table.claims:
        lines.append(f"{cv.verdict.upper():13s} {claim_title(cv)}")
        lines += [f"    {c.verdict:13s} {comparison_text(c, table.base)}" for c in cv.comparisons]
    return lines


# --- LaTeX --------------------------------------------------------------------------------------------------------

_TEX_SPECIAL = {
    "\\": r"\textbackslash{}",
    "&": r"\&",
    "%": r"\%",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_",
    "{": r"\{",
    "}": r"\}",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
}
_TEX_SYMBOLS = {
    "±": r"$\pm$",
    "†": r"$^\dagger$",
    "‡": r"$^\ddagger$",
    "Δ": r"$\Delta$",
    "ε": r"$\epsilon$",
    "×": r"$\times$",
    "·": r"$\cdot$",
    "…": r"\ldots{}",
    "⁶": "$^6$",
}


def tex_escape(text: str) -> str:
    """Plain text as LaTeX: special characters escaped, the symbols we use as math."""
    out = re.sub(r"[\\&%$#_{}~^]", lambda m: _TEX_SPECIAL[m.group()], text)
    out = re.sub(r"(?<![\w.])-(?=\d)", "$-$", out)  # a minus sign, not a hyphen
    for symbol, tex in _TEX_SYMBOLS.items():
        out = out.replace(symbol, tex)
    return out


def to_latex(table: ReportTable) -> str:
    """A booktabs table ready to paste (needs \\usepackage{booktabs}); row groups separated by \\midrule."""
    cols = display_columns(table)
    lines = [
        r"% Generated by `ablate report`. Needs \usepackage{booktabs}.",
        r"\begin{table*}[t]",
        r"\centering",
        r"\scriptsize",
        r"\setlength{\tabcolsep}{3pt}",
        r"\begin{tabular}{" + "".join(c.align for c in cols) + "}",
        r"\toprule",
        " & ".join(c.tex for c in cols) + r" \\",
    ]
    for group, rows in table.groups():
        lines.append(r"\midrule")
        for i, row in enumerate(rows):
            cells = display_cells(row) | {"group": group_label(group, rows) if i == 0 else ""}
            cells["state"] = state_text(row, width=30)
            lines.append(" & ".join(tex_escape(cells[c.key]) for c in cols) + r" \\")
    lines += [r"\bottomrule", r"\end{tabular}"]
    caption = " ".join(legend(table)[1:4])
    lines += [r"\caption{" + tex_escape(f"Variations on the Transformer ({table.study}). {caption}") + "}"]
    lines += [r"\label{tab:" + re.sub(r"[^A-Za-z0-9-]", "-", table.study) + "}", r"\end{table*}"]
    if table.claims:
        lines += [
            "",
            r"\begin{table*}[t]",
            r"\centering",
            r"\scriptsize",
            r"\begin{tabular}{p{0.3\linewidth}lp{0.5\linewidth}}",
        ]
        lines += [r"\toprule", r"claim & verdict & evidence \\", r"\midrule"]
        for cv in table.claims:
            evidence = r" \newline ".join(tex_escape(comparison_text(c, table.base)) for c in cv.comparisons)
            lines.append(f"{tex_escape(claim_title(cv))} & {cv.verdict} & {evidence} " + r"\\")
        lines += [r"\bottomrule", r"\end{tabular}", r"\caption{" + tex_escape(CLAIMS_LEGEND) + "}"]
        lines += [r"\label{tab:" + re.sub(r"[^A-Za-z0-9-]", "-", table.study) + "-claims}", r"\end{table*}"]
    return "\n".join(lines) + "\n"


# --- CSV and JSON -------------------------------------------------------------------------------------------------


def _round(value: float | None, digits: int = 6) -> float | None:
    return None if value is None else round(value, digits)


def row_record(row: ReportRow) -> dict[str, Any]:
    """One row as flat, raw values (the CSV line; also the core of the JSON row)."""
    sig = row.significance
    return {
        "row": row.name,
        "group": row.group,
        **row.config,
        "other": "; ".join(f"{k}={_value(v)}" for k, v in row.other.items()),
        "ppl_mean": _round(row.ppl.mean) if row.ppl else None,
        "ppl_std": _round(row.ppl.std) if row.ppl else None,
        "bleu_mean": _round(row.bleu.mean) if row.bleu else None,
        "bleu_std": _round(row.bleu.std) if row.bleu else None,
        "seeds_complete": row.count("complete"),
        "seeds_total": row.n_seeds,
        "params_M": _round(row.params_m),
        "paper_ppl": row.paper.ppl if row.paper else None,
        "paper_bleu": row.paper.bleu if row.paper else None,
        "delta_bleu": _round(row.delta_bleu.mean) if row.delta_bleu else None,
        "delta_bleu_std": _round(row.delta_bleu.std) if row.delta_bleu else None,
        "delta_ppl": _round(row.delta_ppl.mean) if row.delta_ppl else None,
        "chrf_mean": _round(row.chrf.mean) if row.chrf else None,
        "chrf_std": _round(row.chrf.std) if row.chrf else None,
        "delta_chrf": _round(row.delta_chrf.mean) if row.delta_chrf else None,
        "plateau": row.convergence.state if row.convergence else None,
        **{
            f"{metric}_{key}": _round(getattr(row.tests.get(metric), attr, None))
            for metric in METRICS
            for key, attr in (("delta_se", "se"), ("p", "p"), ("p_holm", "p_holm"))
        },
        **{
            f"{metric}_ci_{end}": _round(row.tests[metric].ci[i]) if metric in row.tests else None
            for metric in METRICS
            for i, end in enumerate(("low", "high"))
        },
        "bleu_p_value": sig.p_value if sig else None,
        "significance": sig.mark if sig else "",
        "wall_time_s": _round(row.wall_time_s, 1),
        "tokens_per_sec": _round(row.tokens_per_sec, 1),
        "device": ", ".join(row.devices),
        "state": row.state,
        "reason": "; ".join(f"seed {s}: {r}" for s, r in sorted(row.reasons.items())),
    }


def to_csv(table: ReportTable) -> str:
    """One line per row, every value spelled out (no 'same as base' blanks); empty field = no value."""
    records = [row_record(r) for r in table.rows]
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(row_record(table.rows[0]) if table.rows else ["row"]))
    writer.writeheader()
    writer.writerows(records)
    return buffer.getvalue()


def to_json(table: ReportTable) -> str:
    """The whole report: metadata, legend, and per row the flat values plus per-seed details."""

    def seed_detail(row: ReportRow, seed: int) -> dict[str, Any]:
        status = row.status[seed]
        sig = row.significance
        return {
            "state": status.state,
            "reason": status.reason,
            "bleu": row.bleu.values.get(seed) if row.bleu else None,
            "ppl": row.ppl.values.get(seed) if row.ppl else None,
            "bleu_p_value": sig.p_values.get(seed) if sig else None,
            "record": str(status.record.path) if status.record else None,
        }

    rows = [
        row_record(r)
        | {
            "same_as_base": r.same_as_base,
            "other": r.other,
            "seeds": {str(seed): seed_detail(r, seed) for seed in sorted(r.status)},
        }
        for r in table.rows
    ]
    doc = {
        "study": table.study,
        "preset": table.preset,
        "seeds": table.seeds,
        "base": table.base,
        "out_dir": table.out_dir,
        "generated_at": table.generated_at,
        "legend": legend(table),
        "rows": rows,
        "claims": claims_data(table),
    }
    return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"


def claims_data(table: ReportTable) -> list[dict[str, Any]]:
    """The verdicts as raw values (JSON, the claims CSV and W&B)."""
    out = []
    for cv in table.claims:
        for c in cv.comparisons:
            t = c.test
            out.append(
                {
                    "claim": cv.claim.id,
                    "claim_text": cv.claim.text,
                    "section": cv.claim.section,
                    "claim_verdict": cv.verdict,
                    "row": c.comparison.row,
                    "against": c.comparison.against or table.base,
                    "metric": c.comparison.metric,
                    "expect": c.comparison.expect,
                    "margin": c.comparison.margin,
                    "verdict": c.verdict,
                    "effect": _round(t.effect) if t else None,
                    "ci_low": _round(t.ci[0]) if t and t.effect is not None else None,
                    "ci_high": _round(t.ci[1]) if t and t.effect is not None else None,
                    "p": _round(t.p) if t else None,
                    "p_holm": _round(t.p_holm) if t else None,
                    "se_seeds": _round(t.se_seeds) if t else None,
                    "se_sentences": _round(t.se_sentences) if t else None,
                    "seeds": f"{t.n_row}/{t.n_against}" if t else "",
                    "paper_effect": _round(c.paper_delta),
                }
            )
    return out


def to_claims_csv(table: ReportTable) -> str:
    """One line per comparison of every claim, with its test and verdict (written beside the main CSV)."""
    records = claims_data(table)
    buffer = io.StringIO()
    if records:
        writer = csv.DictWriter(buffer, fieldnames=list(records[0]))
        writer.writeheader()
        writer.writerows(records)
    return buffer.getvalue()


# --- HTML ---------------------------------------------------------------------------------------------------------


def data_uri(path: Path) -> str:
    """A PNG or SVG file as a data: URI, so the page needs no other file."""
    mime = "image/svg+xml" if path.suffix == ".svg" else "image/png"
    return f"data:{mime};base64,{base64.b64encode(path.read_bytes()).decode('ascii')}"


def to_html(table: ReportTable, plots: dict[str, Path] | None = None) -> str:
    """One self-contained page (inline CSS, plots as data URIs, no script, no network)."""
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.PackageLoader("reports", "templates"),
        autoescape=jinja2.select_autoescape(["html", "j2"]),
        trim_blocks=True,
        lstrip_blocks=True,
    )
    cols = display_columns(table)
    groups = []
    for group, rows in table.groups():
        body = []
        for i, row in enumerate(rows):
            cells = display_cells(row) | {"group": group_label(group, rows) if i == 0 else ""}
            body.append({"state": row.state, "cells": [(c.key, c.align, cells[c.key]) for c in cols]})
        groups.append(body)
    images = [
        {"title": title, "src": data_uri(path)}
        for title, path in (plots or {}).items()
        if path.suffix == ".png" and path.is_file()
    ]
    return env.get_template("report.html.j2").render(
        title=f"{table.study} ({table.preset})",
        headers=[(c.align, c.header) for c in cols],
        groups=groups,
        legend=legend(table),
        claims=[
            {
                "title": claim_title(cv),
                "verdict": cv.verdict,
                "evidence": [f"{c.verdict}: {comparison_text(c, table.base)}" for c in cv.comparisons],
            }
            for cv in table.claims
        ],
        claims_legend=CLAIMS_LEGEND,
        images=images,
        generated_at=table.generated_at,
    )


WRITERS = {"md": to_markdown, "tex": to_latex, "csv": to_csv, "json": to_json}
"""Format -> writer, for every format but HTML (which also takes the plots)."""
