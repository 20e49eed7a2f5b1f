"""A `ReportTable` written out: Markdown, LaTeX (booktabs), CSV, JSON and one self-contained HTML page.

Markdown, LaTeX and HTML share the paper's layout (`display_columns`/`display_cells`: blank cell = same as base,
mean ± std, significance marks) and show the `COLUMNS` chosen by key (`ablate report --columns`; each format has its
default: LaTeX's fits a two-column paper). CSV and JSON are for machines: every value spelled out, raw numbers, no
blanks. Test-set scores, when some row has them, appear in every format apart from the dev ones.

Each format is registered with `reports.writers.writer` at the end of this file; that is how `ablate report` finds it.
"""

from __future__ import annotations

import base64
import csv
import io
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ablate.ablations.record import FULL, budget_label
from ablate.data.errors import AblateError
from ablate.reports.claims import ClaimVerdict, comparison_text
from ablate.reports.convergence import PLATEAU_BLEU, PLATEAU_PPL, SOURCE_RATIO_MIN
from ablate.reports.stats import ALPHA, METRICS, POWER, RowTest
from ablate.reports.table import CONFIG_COLUMNS, ReportRow, ReportTable, Stat
from ablate.reports.writers import Context, writer


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
_HTML_HEADERS = {
    "d_model": "d<sub>model</sub>",
    "d_ff": "d<sub>ff</sub>",
    "d_k": "d<sub>k</sub>",
    "d_v": "d<sub>v</sub>",
    "P_drop": "P<sub>drop</sub>",
    "eps_ls": "ε<sub>ls</sub>",
}
"""Headers the page writes in the paper's notation (trusted markup; everything else is escaped)."""

COLUMNS: dict[str, Column] = {
    c.key: c
    for c in (
        Column("group", "", "", "l"),
        Column("row", "row", "row", "l"),
        *(Column(cc.key, _HEADERS.get(cc.key, cc.header), _TEX_HEADERS[cc.key]) for cc in CONFIG_COLUMNS),
        Column("other", "other", "other", "l"),
        Column("ppl", "PPL (dev)", r"\shortstack{PPL\\(dev)}"),
        Column("bleu", "BLEU (dev)", r"\shortstack{BLEU\\(dev)}"),
        Column("chrf", "chrF (dev)", r"\shortstack{chrF\\(dev)}"),
        Column("test_bleu", "BLEU (test)", r"\shortstack{BLEU\\(test)}"),
        Column("test_chrf", "chrF (test)", r"\shortstack{chrF\\(test)}"),
        Column("params", "params ×10⁶", r"\shortstack{params\\$\times 10^6$}"),
        Column("paper_ppl", "paper PPL", r"\shortstack{paper\\PPL}"),
        Column("paper_bleu", "paper BLEU", r"\shortstack{paper\\BLEU}"),
        Column("delta_ppl", "ΔPPL vs base", r"\shortstack{$\Delta$PPL\\vs base}"),
        Column("delta_bleu", "ΔBLEU vs base", r"\shortstack{$\Delta$BLEU\\vs base}"),
        Column("plateau", "plateau", "plateau", "l"),
        Column("source", "source use", r"\shortstack{source\\use}", "l"),
        Column("seeds", "seeds", "seeds", "l"),
        Column("wall", "wall time", r"\shortstack{wall\\time}"),
        Column("tok_s", "tok/s", "tok/s"),
        Column("device", "device", "device", "l"),
    )
}
"""Every column the Markdown, LaTeX and HTML tables can show, by key (`ablate report --columns`), in display order."""

OPTIONAL_COLUMNS = ("test_chrf",)
"""Columns shown only when `columns` asks for them (test chrF is in the CSV and JSON; the tables keep test BLEU)."""

TEX_HIDDEN = ("plateau", "source", "wall", "tok_s", "device")
"""Columns LaTeX leaves out unless `columns` asks for them, so that Table 3 with every paper column fits a two-column
page at a readable size: the machine's (a paper's reader cannot compare wall time, tokens/s or device across papers),
plateau and source use (the caption names every row that did not reach its plateau or did not learn to translate).
'seeds' is left out too when every row has all its seeds complete (the caption names the seeds)."""


def _applies(key: str, table: ReportTable) -> bool:
    """Whether the column has anything to show in this table (paper numbers, a base, test scores, other fields)."""
    if key in ("paper_ppl", "paper_bleu"):
        return table.show_paper
    if key in ("delta_ppl", "delta_bleu"):
        return table.base is not None
    if key in ("test_bleu", "test_chrf"):
        return any(getattr(r, key) is not None for r in table.rows)
    if key == "other":
        return any(r.other for r in table.rows)
    if key == "source":
        return any(r.source_ratio for r in table.rows)
    if key == "device":  # one device for every trial: the legend names it (the table keeps its width)
        return len(_devices(table)) > 1
    return True


def _devices(table: ReportTable) -> list[str]:
    return sorted({d for r in table.rows for d in r.devices})


def check_columns(columns: Sequence[str]) -> tuple[str, ...]:
    """The column keys, checked: AblateError naming an unknown one and listing the valid keys."""
    keys = [c.strip() for c in columns if c.strip()]
    unknown = [k for k in keys if k not in COLUMNS]
    if unknown or not keys:
        what = f"unknown column '{','.join(unknown)}'" if unknown else "no column given"
        raise AblateError(f"--columns: {what}; choose from {','.join(COLUMNS)}")
    return tuple(dict.fromkeys(keys))


def display_columns(table: ReportTable, columns: Sequence[str] | None = None, fmt: str = "md") -> list[Column]:
    """The columns shown for this table: `columns` in the order given, else the format's default (every column
    but the optional ones, and for LaTeX but `TEX_HIDDEN`); either way only those with something to show."""
    if columns is None:
        hidden = set(OPTIONAL_COLUMNS)
        if fmt == "tex":
            hidden |= set(TEX_HIDDEN) | ({"seeds"} if all(r.state == "complete" for r in table.rows) else set())
        columns = [key for key in COLUMNS if key not in hidden]
    return [COLUMNS[key] for key in check_columns(columns) if _applies(key, table)]


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


def _number(value: float, digits: int, sign: str = "") -> str:
    """`value` to `digits` decimals; one that rounds to zero has no minus sign ('+0.00', not '-0.00')."""
    return f"{0.0 if round(value, digits) == 0 else value:{sign}.{digits}f}"


def stat_text(stat: Stat | None, digits: int, sign: str = "") -> str:
    """mean ± sample std (the mean alone with one seed; -0.00 shown as 0.00), or '' without a value."""
    if stat is None:
        return ""
    text = _number(stat.mean, digits, sign)
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
    """'2/2', '1/2 · 1 running', 'pending', 'failed: <reason>' (reasons cut to `width` characters; 0: no reason)."""
    total, done = row.n_seeds, row.count("complete")
    parts = [f"{done}/{total}"] if done else []
    for state in ("running", "pending", "pruned", "failed"):
        n = row.count(state)
        if not n:
            continue
        label = state if n == total else f"{n} {state}"
        reasons = [r for seed, r in sorted(row.reasons.items()) if row.status[seed].state == state]
        if reasons and width != 0:
            label = f"{label}: {reasons[0] if width is None else _cut(reasons[0], width)}"
        parts.append(label)
    return " · ".join(parts) if parts else "no seeds"


STAT_COLUMNS = {
    "ppl": (2, ""),
    "bleu": (2, ""),
    "chrf": (1, ""),
    "test_bleu": (2, ""),
    "test_chrf": (1, ""),
    "delta_ppl": (2, "+"),
    "delta_bleu": (2, "+"),
}
"""Columns that show a `Stat` (the `ReportRow` field of the same name): key -> (decimals, sign)."""


def plateau_text(row: ReportRow) -> str:
    """The 'plateau' cell: 'diverged', else BLEU gained from the last shorter budget to T ('+1.3', mean over seeds),
    else (no shorter budget) the state of the last two validations ('yes', 'rising +2.3', ...)."""
    state = row.convergence
    if state is not None and state.state == "diverged":
        return "diverged"
    if row.budget_gain is not None:
        return _number(row.budget_gain.mean, 1, "+")
    return state.text if state else ""


def source_text(row: ReportRow) -> str:
    """The 'source use' cell: the lowest source_ppl_ratio over the seeds at T ('×18.4'), or where the row did not
    learn to translate ('no source use ×1.2 at T/2'); '' when the records do not say."""
    if row.untrainable:
        bad = {f: row.source_ratio[f] for f in row.untrainable}
        return f"not trainable ×{min(bad.values()):.1f} at {', '.join(budget_label(f) for f in sorted(bad))}"
    if bad := row.no_source():
        return f"no source use ×{min(bad.values()):.1f} at {', '.join(budget_label(f) for f in bad)}"
    ratio = row.source_ratio.get(FULL)
    return f"×{ratio:.1f}" if ratio is not None else ""


def display_cells(row: ReportRow) -> dict[str, str]:
    """Column key -> cell text in the paper's layout (blank config cell = same as base)."""
    cells = {"row": row.name}
    for col in CONFIG_COLUMNS:
        value = row.config[col.key]
        shown = _steps(value) if col.key == "train_steps" else _value(value)
        cells[col.key] = "" if row.same_as_base[col.key] else shown
    cells["other"] = ", ".join(f"{k.removeprefix('model.')}={_value(v)}" for k, v in row.other.items())
    for key, (digits, sign) in STAT_COLUMNS.items():
        cells[key] = stat_text(getattr(row, key), digits, sign)
    cells["plateau"] = plateau_text(row)
    cells["source"] = source_text(row)
    cells["params"] = _params(row.params_m)
    cells["paper_ppl"] = f"{row.paper.ppl:.2f}" if row.paper and row.paper.ppl is not None else ""
    cells["paper_bleu"] = f"{row.paper.bleu:.1f}" if row.paper and row.paper.bleu is not None else ""
    cells["delta_bleu"] = (cells["delta_bleu"] + f" {row.mark}").strip()
    cells["wall"] = duration(row.wall_time_s)
    cells["tok_s"] = _rate(row.tokens_per_sec)
    cells["device"] = ", ".join(row.devices)
    cells["seeds"] = state_text(row)
    return cells


def has_test(table: ReportTable) -> bool:
    """True when some row has test-set scores (then every format shows them, apart from the dev columns)."""
    return any(r.test_bleu is not None or r.test_chrf is not None for r in table.rows)


PPL_CAVEAT = (
    "Our PPL is per subword token of our SentencePiece vocabulary, so it is not comparable with the paper's (per "
    "wordpiece of a 37K BPE vocabulary) nor across vocabularies: compare directions and gaps, not levels."
)


def legend(table: ReportTable, corpus: str | None = None) -> list[str]:
    """The lines a reader needs under the table: how to read it, then the notes and every failure in full.
    `corpus` names the data the study trained on (see `reports.build.describe_corpus`)."""
    seeds = ", ".join(str(s) for s in table.seeds)
    data = f", corpus {corpus}" if corpus else ""
    test = " BLEU (test): on the test set, from each trial's final weights." if has_test(table) else ""
    devices = _devices(table)
    device = f", every trial on {devices[0]}" if len(devices) == 1 else ""
    lines = [
        f"Study '{table.study}', preset '{table.preset}'{data}, seeds {seeds}{device}; results from {table.out_dir}.",
        "PPL, BLEU and chrF on the dev set: mean ± sample standard deviation over the complete seeds; "
        f"'seeds' counts complete / all.{test}",
    ]
    if table.base is not None:
        lines += [
            f"Blank configuration cells: same as the base row '{table.base}'.",
            f"ΔPPL, ΔBLEU: the row's minus the base's, paired by seed. {_marks_text(table)}",
        ]
    lines.append(f"chrF: sacreBLEU {table.chrf_signature}. {_plateau_legend(table)}")
    lines += _budget_lines(table)
    if any(r.source_ratio for r in table.rows):
        lines.append(
            "source use: dev PPL with each sentence's source swapped for another dev sentence's, over the dev PPL "
            "(the lowest over the seeds, at T): far above 1 for a model that translates, about 1 for one that learnt "
            "only a language model of the target. Below the midpoint on the log scale between x1 and the base's "
            f"(the square root of the base's ratio, at least {SOURCE_RATIO_MIN:g}) at a budget: 'not trainable', "
            "the preset did not train the row there (it stayed on the language-model plateau) and no claim is "
            f"judged on it at that budget. A base below {SOURCE_RATIO_MIN:g}: nothing learnt, no verdict at all."
        )
    if untrainable := [
        f"{r.name}: {'; '.join(r.untrainable[f] for f in sorted(r.untrainable))}" for r in table.rows if r.untrainable
    ]:
        lines.append(
            f"NOT TRAINABLE AT THIS PRESET: {'; '.join(untrainable)}. These rows never left the language-model "
            "plateau there, so they say nothing about the paper's claims: no verdict rests on them."
        )
    elif untrained := _untrained(table):
        lines.append(f"DID NOT LEARN TO TRANSLATE: {'; '.join(untrained)}. No claim is judged on them there.")
    unconverged = _unconverged(table)
    if unconverged:
        lines.append(
            f"NOT AT PLATEAU: {', '.join(unconverged)}. Their numbers measure how fast a model learns as much as what "
            "it is worth (their verdicts are not withheld for it): raise train.max_steps, or set train.budgets to "
            "check the verdicts across budgets."
        )
    lines.append(PPL_CAVEAT)
    if table.show_paper:
        lines.append("paper: Vaswani et al. (2017), Table 3, single runs on newstest2013 (EN-DE).")
    for row in table.rows:
        for seed, reason in sorted(row.reasons.items()):
            lines.append(f"{row.name} seed {seed} {row.status[seed].state}: {reason}")
    return lines + table.notes


EFFECT_SCALE_SAID = 3.0
"""A preset whose effects are a median of this many times the paper's (or fewer than 1/this) says so at the top."""


def headline(table: ReportTable) -> list[str]:
    """What a reader must know before the table, each said once: that the study gives no verdict and why, and that
    this preset's effects are the regime's size, not the paper's."""
    lines = [f"NO VERDICTS: {table.withheld}."] if table.withheld else []
    scale = table.effect_scale
    if scale is not None and not table.withheld and not 1 / EFFECT_SCALE_SAID < scale < EFFECT_SCALE_SAID:
        lines.append(
            f"EFFECT SIZES ARE THIS PRESET'S REGIME: its differences from the base are a median {scale:.1f}x the "
            "paper's (each claim's comparison gives its own ratio). Read directions and order, not sizes: a "
            "verdict says whether the paper's direction holds here, not that its effect is this large."
        )
    return lines


def _marks_text(table: ReportTable) -> str:
    """What † and ‡ mean: the one test behind the marks and the verdicts."""
    where = "at every budget, with the same sign" if len(table.fractions) > 1 else "at T"
    return (
        f"† / ‡: the BLEU difference from the base is significant at Holm-corrected p < {ALPHA} / p < 0.01 {where}, "
        "by the one test behind the marks and the verdicts: seed noise (each row's seed variance moderated toward "
        "the study's; a row whose seeds disagree far more keeps its own) plus a paired bootstrap "
        f"over the dev sentences ({table.n_samples} resamples), Holm over the rows tested against the base. Rows "
        "that give no verdict (diverged, did not learn to translate, a pipeline-check preset) carry no mark."
    )


def _plateau_legend(table: ReportTable) -> str:
    if len(table.fractions) > 1:
        shorter = budget_label(table.fractions[-2])
        return (
            f"plateau: BLEU at T minus BLEU at {shorter} (mean over seeds, each budget annealed): what the rest of "
            "training still bought; 'diverged': a seed failed or ended above the uniform guess's perplexity."
        )
    return (
        f"plateau: 'yes' when dev BLEU moved by less than {PLATEAU_BLEU:g} and dev PPL fell by less than "
        f"{PLATEAU_PPL:.0%} between the last two validations of every seed (on the same sentences); 'rising' means "
        "train longer, 'diverged' that a seed failed or ended above the uniform guess's perplexity."
    )


def _budget_lines(table: ReportTable) -> list[str]:
    """The budgets the claims were judged at, and the study's precision at each (what a reader can quote)."""
    labels = [budget_label(f) for f in table.fractions]
    if len(labels) > 1:
        lines = [
            f"Budgets: {', '.join(labels)} (T = each row's train.max_steps; the table shows T, each shorter budget "
            "is a branch of the same run, annealed): claims are judged at each."
        ]
    else:
        lines = [
            "One budget, T: the verdicts were not checked across budgets (records without shorter budgets; set "
            "train.budgets, e.g. [0.5], to score T/2 from the same runs)."
        ]
    if table.precision:
        widths = ", ".join(f"{budget_label(f)} {w:.2f}" for f, w in sorted(table.precision.items()))
        lines.append(f"median 95% CI half-width of ΔBLEU vs base: {widths}")
    return lines


def _untrained(table: ReportTable) -> list[str]:
    """'A1 at T/2 (PPL ×1.2 with swapped sources)' for each row that did not learn to translate at some budget."""
    return [
        f"{r.name} at {', '.join(budget_label(f) for f in bad)} (PPL ×{min(bad.values()):.1f} with swapped sources)"
        for r in table.rows
        if (bad := r.no_source())
    ]


def _unconverged(table: ReportTable) -> list[str]:
    """Rows not at their plateau, named while the study has one budget (with more, the plateau column says it)."""
    if len(table.fractions) > 1:
        return []
    return [r.name for r in table.rows if r.convergence is not None and r.convergence.state != "plateau"]


def _group_cells(table: ReportTable) -> list[list[tuple[ReportRow, dict[str, str]]]]:
    """Per row group, each row with its cells; the group label in the first row's 'group' cell."""
    out = []
    for group, rows in table.groups():
        labels = [group_label(group, rows)] + [""] * (len(rows) - 1)
        out.append([(row, display_cells(row) | {"group": label}) for row, label in zip(rows, labels, strict=True)])
    return out


# --- Markdown -----------------------------------------------------------------------------------------------------


def _md_escape(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def to_markdown(table: ReportTable, columns: Sequence[str] | None = None, *, corpus: str | None = None) -> str:
    """A GitHub-flavoured Markdown table in the paper's layout, with its legend. `columns`: keys of `COLUMNS` to
    show, in that order (default: all that apply but the optional ones); `corpus`: named in the legend."""
    cols = display_columns(table, columns, "md")
    lines = [f"## {table.study} ({table.preset})", ""]
    if top := headline(table):
        lines += [*(f"**{_md_escape(line)}**" for line in top), ""]
    lines += [
        "| " + " | ".join(c.header for c in cols) + " |",
        "|" + "|".join(":--" if c.align == "l" else "--:" for c in cols) + "|",
    ]
    for group in _group_cells(table):
        lines += ["| " + " | ".join(_md_escape(cells[c.key]) for c in cols) + " |" for _, cells in group]
    lines.append("")
    if table.claims:
        # A list rather than a table: it reads the same in a terminal (the sweep prints this file) and rendered.
        lines += ["### The paper's claims", ""]
        for cv in table.claims:
            lines.append(f"- **{cv.verdict.upper()}**: {claim_title(cv)}")
            lines += [f"  - {c.verdict}: {comparison_text(c, table.base)}" for c in cv.comparisons]
        lines += ["", claims_legend(table), ""]
    lines += [f"- {_md_escape(line)}" for line in legend(table, corpus)]
    return "\n".join(lines) + "\n"


def claims_legend(table: ReportTable) -> str:
    """How to read the verdicts: the test, the rules across budgets, what an inconclusive one says."""
    text = (
        "Each comparison: difference of the means over seeds [95% confidence interval counting seed noise (each "
        "row's seed variance moderated toward the study's by empirical Bayes, Smyth 2004, robust to outlying rows "
        "as in Phipson et al. 2016) and dev-sentence noise (paired bootstrap)], two-sided p and Holm-corrected p "
        "over every row "
        "against the base on that metric, at each budget; paper = the paper's difference. Reproduced: Holm p < "
        f"{ALPHA} in the claimed direction (equivalence: the interval inside the margin) at every budget; "
        "contradicted: significant the other way (equivalence: the interval outside the margin) at every budget; "
        "inconclusive otherwise, saying why: budget-sensitive (the budgets disagree), no verdict for a row that "
        "diverged or did not learn to translate, or an effect below the minimum detectable one, "
        f"(t(1 - {ALPHA}/2, df) + t({POWER:g}, df)) × SE, the effect the test finds with {POWER:.0%} power ('too "
        "noisy to tell' when it exceeds the paper's own difference)."
    )
    if len(table.fractions) == 1:
        text += " Judged at T alone: not checked across budgets."
    return " ".join([text, *_design_text(table)])


def _design_text(table: ReportTable) -> list[str]:
    """The seeds behind the comparisons: the base's extra ones, and the measured seed correlation (why rows are not
    paired by seed)."""
    lines = []
    if table.base is not None:
        base = next((r for r in table.rows if r.name == table.base), None)
        others = [r.n_seeds for r in table.rows if r.name != table.base]
        if base is not None and others and base.n_seeds > max(others):
            lines.append(
                f"The base trains {base.n_seeds} seeds against {max(others)} a row: it is in every comparison "
                "(Dunnett's sqrt(k) allocation, the study's control_seeds)."
            )
    if (rho := table.seed_correlation) is not None:
        lines.append(
            f"Rows are not paired by seed: the seed effect shared by the rows (the same seed, the same data order) "
            f"is rho = {rho.rho:.2f} of a row's seed variance (F test p {rho.p:.2f}, {rho.rows} rows x {rho.seeds} "
            "seeds of dev BLEU at T)."
        )
    return lines


def claim_title(cv: ClaimVerdict) -> str:
    section = f" ({cv.claim.section})" if cv.claim.section else ""
    return f"{cv.claim.text}{section}"


# --- LaTeX --------------------------------------------------------------------------------------------------------

_TEX_SPECIAL = {
    "\\": r"\textbackslash{}",
    "|": r"\textbar{}",
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
    """Plain text as LaTeX: special characters escaped, the symbols we use as math, 'p < 0.05' as $p<0.05$ and any
    other < or > as math (in text mode, the default OT1 font encoding prints them as ¡ and ¿)."""
    out = re.sub(r"[\\&%$#_{}~^|]", lambda m: _TEX_SPECIAL[m.group()], text)
    out = re.sub(r"(?<![\w.])-(?=\d)", "$-$", out)  # a minus sign, not a hyphen
    out = re.sub(r"\bp ?([<>]) ?(\d+(?:\.\d+)?)|[<>]", lambda m: f"$p{m[1]}{m[2]}$" if m[1] else f"${m[0]}$", out)
    for symbol, tex in _TEX_SYMBOLS.items():
        out = out.replace(symbol, tex)
    return out


TEX_PACKAGES = ("booktabs", "graphicx")
r"""What the LaTeX needs in the preamble: booktabs for the rules, graphicx for \resizebox."""


def to_latex(table: ReportTable, columns: Sequence[str] | None = None, *, corpus: str | None = None) -> str:
    """A booktabs table* that pastes into a one- or two-column paper as is, with a caption saying what the numbers
    are; then the claims' verdicts, if any. `columns`: keys of `COLUMNS` (default: all that apply but the optional and
    the machine's); `corpus`: named in the caption."""
    cols = display_columns(table, columns, "tex")
    span = _other_span(table, cols)
    if span is not None:  # as the paper's row (E): the difference written across the blank configuration cells
        cols = [c for c in cols if c.key != "other"]
    label = re.sub(r"[^A-Za-z0-9-]", "-", table.study)
    lines = _tex_head(table, cols) + _tex_rows(table, cols, span)
    lines += [
        r"\bottomrule",
        r"\end{tabular}}%",
        r"\ifdim\wd\ablatetablebox>\textwidth",
        r"\resizebox{\textwidth}{!}{\usebox{\ablatetablebox}}",
        r"\else",
        r"\usebox{\ablatetablebox}",
        r"\fi",
        r"\caption{" + _tex_caption(table, {c.key for c in cols}, corpus) + "}",
        r"\label{tab:" + label + "}",
        r"\end{table*}",
    ]
    if table.claims:
        lines += ["", *_tex_claims(table, label)]
    return "\n".join(lines) + "\n"


def _tex_head(table: ReportTable, cols: list[Column]) -> list[str]:
    """What the LaTeX needs (a comment), the table* measured in a box, down to the column headers."""
    packages = ", ".join(rf"\usepackage{{{p}}}" for p in TEX_PACKAGES)
    return [
        f"% Generated by `ablate report` (study {table.study}, preset {table.preset}). Needs {packages}.",
        "% table* spans both columns of a two-column paper. The tabular is measured in a box and scaled down to",
        r"% \textwidth only if it is wider (a wide tabular runs into the margin; a narrow one keeps its font size).",
        r"\begin{table*}[t]",
        r"\centering",
        r"\scriptsize",
        r"\setlength{\tabcolsep}{3pt}",
        r"\ifdefined\ablatetablebox\else\newsavebox{\ablatetablebox}\fi",
        r"\sbox{\ablatetablebox}{%",
        r"\begin{tabular}{" + "".join(c.align for c in cols) + "}",
        r"\toprule",
        " & ".join(c.tex for c in cols) + r" \\",
    ]


def _tex_rows(table: ReportTable, cols: list[Column], span: tuple[int, int] | None) -> list[str]:
    """The body: a rule above each row group, one line per row (the 'other' differences across `span`)."""
    lines = []
    for group in _group_cells(table):
        lines.append(r"\midrule")
        for row, cells in group:
            cells = {key: tex_escape(text) for key, text in cells.items()} | _tex_stats(row)
            cells["seeds"] = tex_escape(state_text(row, width=0))  # counts only: the reasons are in the caption
            texts = [cells[c.key] for c in cols]
            if span is not None and row.other:
                start, n = span
                texts[start : start + n] = [rf"\multicolumn{{{n}}}{{l}}{{{cells['other']}}}"]
            lines.append(" & ".join(texts) + r" \\")
    return lines


def _tex_claims(table: ReportTable, label: str) -> list[str]:
    """The claims' verdicts: a second table* of claim, verdict and evidence, the claims legend as its caption."""
    lines = [
        r"\begin{table*}[t]",
        r"\centering",
        r"\scriptsize",
        r"\begin{tabular}{p{0.3\linewidth}lp{0.5\linewidth}}",
    ]
    lines += [r"\toprule", r"claim & verdict & evidence \\", r"\midrule"]
    for cv in table.claims:
        # ragged right in the narrow columns (justified, they stretch); \tabularnewline, as \raggedright takes \\
        evidence = r" \newline ".join(tex_escape(comparison_text(c, table.base)) for c in cv.comparisons)
        cells = [rf"\raggedright {tex_escape(claim_title(cv))}", cv.verdict, rf"\raggedright {evidence}"]
        lines.append(" & ".join(cells) + r" \tabularnewline")
    lines += [r"\bottomrule", r"\end{tabular}", r"\caption{" + tex_escape(claims_legend(table)) + "}"]
    return lines + [r"\label{tab:" + label + "-claims}", r"\end{table*}"]


def _other_span(table: ReportTable, cols: list[Column]) -> tuple[int, int] | None:
    """Where the 'other' differences can be written instead of their own column: (first index, count) of the shown
    configuration columns, when they are side by side and blank in every row that has other differences."""
    if "other" not in {c.key for c in cols}:
        return None
    config = {c.key for c in CONFIG_COLUMNS}
    at = [i for i, c in enumerate(cols) if c.key in config]
    if len(at) < 2 or at != list(range(at[0], at[0] + len(at))):
        return None
    if any(r.other and any(not r.same_as_base[cols[i].key] for i in at) for r in table.rows):
        return None
    return at[0], len(at)


_TEX_MARKS = {"†": r"{}^{\dagger}", "‡": r"{}^{\ddagger}"}


TEX_DIGITS = {"bleu": 1, "test_bleu": 1, "delta_bleu": 1}
"""Decimals LaTeX shows where they differ from `STAT_COLUMNS`': BLEU to one decimal, as the paper's Table 3."""


def _tex_stats(row: ReportRow) -> dict[str, str]:
    r"""The `STAT_COLUMNS` cells as math, the standard deviation as a subscript ($49.1_{\pm 3.6}$, as in many ML
    papers): narrower than '49.1 ± 3.6', so that Table 3 fits a page at a readable size."""
    cells = {}
    for key, (digits, sign) in STAT_COLUMNS.items():
        stat = getattr(row, key)
        digits = TEX_DIGITS.get(key, digits)
        if stat is None:
            cells[key] = ""
            continue
        text = _number(stat.mean, digits, sign) + (f"_{{\\pm {stat.std:.{digits}f}}}" if stat.std is not None else "")
        mark = _TEX_MARKS.get(row.mark, "") if key == "delta_bleu" else ""  # {}: beside the subscript, not above
        cells[key] = f"${text}{mark}$"
    return cells


def _tex_caption(table: ReportTable, shown: set[str], corpus: str | None) -> str:
    """What the numbers are: the study, preset, corpus and seeds, dev vs test, the tests, the PPL caveat, and what
    did not converge or failed. Only sentences about columns that are shown."""

    def name(text: str) -> str:
        return r"\texttt{" + tex_escape(text) + "}"

    seeds = ", ".join(str(s) for s in table.seeds)
    data = f", corpus {tex_escape(corpus)}" if corpus else ""
    study = f"study {name(table.study)}, preset {name(table.preset)}{data}, seeds {seeds}"
    test = "; BLEU (test) on the test set" if shown & {"test_bleu", "test_chrf"} else ""
    parts = [
        f"Variations on the Transformer: {study}.",
        f"PPL, BLEU and chrF on the dev set{test}: mean $\\pm$ sample standard deviation over the complete seeds.",
    ]
    if "seeds" in shown:
        parts.append("The seeds column counts complete / all trials.")
    if table.base is not None:
        parts.append("Blank configuration cells: same as the base row.")
        if shown & {"delta_ppl", "delta_bleu"}:
            parts.append(r"$\Delta$: the row's minus the base's, paired by seed. " + tex_escape(_marks_text(table)))
    parts += [tex_escape(line) + "." for line in _budget_lines(table)[1:]]  # the precision (budgets: in the claims)
    parts.append(tex_escape(PPL_CAVEAT))
    if shown & {"paper_ppl", "paper_bleu"}:
        parts.append("paper: Vaswani et al. (2017), Table 3, single runs on newstest2013 (EN-DE).")
    unconverged = _unconverged(table)
    if unconverged:
        parts.append(
            f"Not at plateau: {tex_escape(', '.join(unconverged))}; their numbers say how fast a model learns, "
            "not what it is worth."
        )
    if untrained := _untrained(table):
        parts.append(f"Did not learn to translate: {tex_escape('; '.join(untrained))}; no claim judged on them there.")
    if table.withheld:
        parts.append(f"No verdicts: {tex_escape(table.withheld)}")
    failures = [
        f"{row.name} seed {seed} {row.status[seed].state} ({_cut(reason, 60)})"
        for row in table.rows
        for seed, reason in sorted(row.reasons.items())
    ]
    if failures:
        parts.append(tex_escape("; ".join(failures)) + ".")
    return " ".join(parts)


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


# --- CSV and JSON -------------------------------------------------------------------------------------------------


def _round(value: float | None, digits: int = 6) -> float | None:
    return None if value is None else round(value, digits)


def _stat_fields(name: str, stat: Stat | None) -> dict[str, float | None]:
    return {f"{name}_mean": _round(stat.mean) if stat else None, f"{name}_std": _round(stat.std) if stat else None}


def row_record(row: ReportRow, test: bool = True) -> dict[str, Any]:
    """One row as flat, raw values (the CSV line; also the core of the JSON row). `test`: include the test-set
    fields (`table_records` leaves them out of a table where no row has them)."""
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
        "delta_ppl_std": _round(row.delta_ppl.std) if row.delta_ppl else None,
        "chrf_mean": _round(row.chrf.mean) if row.chrf else None,
        "chrf_std": _round(row.chrf.std) if row.chrf else None,
        "delta_chrf": _round(row.delta_chrf.mean) if row.delta_chrf else None,
        **(_stat_fields("test_bleu", row.test_bleu) | _stat_fields("test_chrf", row.test_chrf) if test else {}),
        "plateau": row.convergence.state if row.convergence else None,
        "budget_gain_bleu": _round(row.budget_gain.mean) if row.budget_gain else None,
        "source_ppl_ratio": _round(row.source_ratio.get(FULL)),
        "no_source_use": ", ".join(budget_label(f) for f in row.no_source()),
        "not_trainable": "; ".join(row.untrainable[f] for f in sorted(row.untrainable)),
        **{
            f"{metric}_{key}": _round(getattr(row.tests.get(metric), attr, None))
            for metric in METRICS
            for key, attr in (("delta_se", "se"), ("p", "p"), ("p_holm", "p_holm"), ("mde", "mde"))
        },
        **{
            f"{metric}_ci_{end}": _round(row.tests[metric].ci[i]) if metric in row.tests else None
            for metric in METRICS
            for i, end in enumerate(("low", "high"))
        },
        "significance": row.mark,
        "wall_time_s": _round(row.wall_time_s, 1),
        "tokens_per_sec": _round(row.tokens_per_sec, 1),
        "device": ", ".join(row.devices),
        "state": row.state,
        "reason": "; ".join(f"seed {s}: {r}" for s, r in sorted(row.reasons.items())),
    }


def table_records(table: ReportTable) -> list[dict[str, Any]]:
    """Every row's `row_record`, with the test-set fields only when some row has test scores."""
    return [row_record(r, test=has_test(table)) for r in table.rows]


def to_csv(table: ReportTable) -> str:
    """One line per row, every value spelled out (no 'same as base' blanks); empty field = no value."""
    records = table_records(table)
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(records[0]) if records else ["row"])
    writer.writeheader()
    writer.writerows(records)
    return buffer.getvalue()


def to_json(table: ReportTable, *, corpus: str | None = None) -> str:
    """The whole report: metadata, legend, and per row the flat values plus per-seed details."""
    test = has_test(table)

    def seed_detail(row: ReportRow, seed: int) -> dict[str, Any]:
        status = row.status[seed]
        scores = {"bleu": row.bleu, "ppl": row.ppl}
        if test:
            scores |= {"test_bleu": row.test_bleu, "test_chrf": row.test_chrf}
        return {
            "state": status.state,
            "reason": status.reason,
            **{key: stat.values.get(seed) if stat else None for key, stat in scores.items()},
            "record": str(status.record.path) if status.record else None,
        }

    rows = [
        record
        | {
            "same_as_base": r.same_as_base,
            "other": r.other,
            "seeds": {str(seed): seed_detail(r, seed) for seed in sorted(r.status)},
        }
        for r, record in zip(table.rows, table_records(table), strict=True)
    ]
    doc = {
        "study": table.study,
        "preset": table.preset,
        "corpus": corpus,
        "seeds": table.seeds,
        "base": table.base,
        "out_dir": table.out_dir,
        "generated_at": table.generated_at,
        "headline": headline(table),
        "legend": legend(table, corpus),
        "rows": rows,
        "claims": claims_data(table),
    }
    return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"


def claims_data(table: ReportTable) -> list[dict[str, Any]]:
    """The verdicts as raw values (JSON, the claims CSV and W&B), one per comparison: its test at T unprefixed, and
    with several budgets every budget's as 'at<fraction>_...' ('at0.5_effect')."""
    out = []
    for cv in table.claims:
        for c in cv.comparisons:
            t = c.test
            record = {
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
                "reason": c.reason,
                "budgets": ", ".join(budget_label(b.fraction) for b in c.budgets),
                **_test_fields(t),
                "se_seeds": _round(t.se_seeds) if t else None,
                "se_sentences": _round(t.se_sentences) if t else None,
                "seeds": f"{t.n_row}/{t.n_against}" if t else "",
                "paper_effect": _round(c.paper_delta),
            }
            if len(c.budgets) > 1:
                for b in c.budgets:
                    fields = {"verdict": b.verdict, **_test_fields(b.test), "excluded": "; ".join(b.excluded)}
                    record |= {f"at{b.fraction:g}_{key}": value for key, value in fields.items()}
            out.append(record)
    return out


def _test_fields(t: RowTest | None) -> dict[str, Any]:
    """A test's effect, 95% interval, p, Holm-corrected p and minimum detectable effect as raw values."""
    tested = t is not None and t.effect is not None
    return {
        "effect": _round(t.effect) if t else None,
        "ci_low": _round(t.ci[0]) if tested else None,  # type: ignore[union-attr]
        "ci_high": _round(t.ci[1]) if tested else None,  # type: ignore[union-attr]
        "p": _round(t.p) if t else None,
        "p_holm": _round(t.p_holm) if t else None,
        "mde": _round(t.mde) if t else None,
    }


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


def _html_cell(col: Column, text: str) -> dict[str, Any]:
    """A cell for the template; '4.55 ± 0.18' split so the page sets the deviation in a smaller type (the mean reads
    first, and Table 3 fits a 1400 px window)."""
    mean, _, sd = text.partition(" ± ")
    sd, mark = (sd[:-2], sd[-1]) if sd.endswith((" †", " ‡")) else (sd, "")  # the significance mark in full size
    return {"key": col.key, "align": col.align, "text": mean, "sd": sd, "mark": mark}


def to_html(
    table: ReportTable,
    plots: dict[str, Path] | None = None,
    columns: Sequence[str] | None = None,
    *,
    corpus: str | None = None,
    claim_plots: dict[str, Path] | None = None,
) -> str:
    """One self-contained page (inline CSS, plots as data URIs, no script, no network). `plots`: title -> PNG, shown
    under the table; `claim_plots`: claim id -> PNG, shown beside its claim; `columns`: keys of `COLUMNS` (default:
    all that apply but the optional ones); `corpus`: named in the legend."""
    import jinja2
    import markupsafe

    env = jinja2.Environment(
        loader=jinja2.PackageLoader("ablate.reports", "templates"),
        autoescape=jinja2.select_autoescape(["html", "j2"]),
        trim_blocks=True,
        lstrip_blocks=True,
    )
    cols = display_columns(table, columns, "html")
    span = _other_span(table, cols)
    if span is not None:  # as in LaTeX: the difference written across the blank configuration cells
        cols = [c for c in cols if c.key != "other"]
    groups = []
    for group in _group_cells(table):
        body = []
        for row, cells in group:
            tds = [_html_cell(c, cells[c.key]) for c in cols]
            # seeds: the counts in the cell (a failure's reason would make the row tall), the reasons on hover and
            # in the legend
            for td in tds:
                if td["key"] == "seeds":
                    td.update(text=state_text(row, width=0), title=state_text(row) if row.reasons else "")
            if span is not None and row.other:
                start, n = span
                tds[start : start + n] = [{"key": "other", "align": "l", "text": cells["other"], "colspan": n}]
            body.append({"state": row.state, "cells": tds})
        groups.append(body)
    images = [
        {"title": title, "src": data_uri(path)}
        for title, path in (plots or {}).items()
        if path.suffix == ".png" and path.is_file()
    ]
    return env.get_template("report.html.j2").render(
        title=f"{table.study} ({table.preset})",
        headers=[
            (c.key, c.align, markupsafe.Markup(_HTML_HEADERS[c.key]) if c.key in _HTML_HEADERS else c.header)
            for c in cols
        ],
        groups=groups,
        headline=headline(table),
        legend=legend(table, corpus),
        claims=_html_claims(table, claim_plots or {}),
        claims_legend=claims_legend(table),
        images=images,
        generated_at=table.generated_at,
    )


def _html_claims(table: ReportTable, plots: dict[str, Path]) -> list[dict[str, Any]]:
    """Each claim for the template: title, verdict, one line of evidence per comparison, and its plot if drawn."""
    return [
        {
            "title": claim_title(cv),
            "verdict": cv.verdict,
            "evidence": [f"{c.verdict}: {comparison_text(c, table.base)}" for c in cv.comparisons],
            "plot": data_uri(plots[cv.claim.id]) if cv.claim.id in plots and plots[cv.claim.id].is_file() else None,
        }
        for cv in table.claims
    ]


# --- The registered writers (`reports.writers`): each format's file from the table and the report's context ------


@writer("md", "Markdown table, claims and legend", suffix=".md", aliases=("markdown",))
def write_markdown(table: ReportTable, ctx: Context) -> str:
    return to_markdown(table, ctx.columns, corpus=ctx.corpus)


@writer("tex", "LaTeX booktabs table* with its caption", suffix=".tex", aliases=("latex",))
def write_latex(table: ReportTable, ctx: Context) -> str:
    return to_latex(table, ctx.columns, corpus=ctx.corpus)


@writer("csv", "every value of every row", suffix=".csv")
def write_csv(table: ReportTable, ctx: Context) -> str:
    return to_csv(table)  # every value, whatever the columns shown


@writer("claims.csv", "every claim's comparisons and verdicts", suffix=".claims.csv", companion_of="csv")
def write_claims_csv(table: ReportTable, ctx: Context) -> str | None:
    return to_claims_csv(table) if table.claims else None


@writer("json", "the whole report, per seed", suffix=".json")
def write_json(table: ReportTable, ctx: Context) -> str:
    return to_json(table, corpus=ctx.corpus)


@writer("html", "one self-contained page with the plots", suffix=".html")
def write_html(table: ReportTable, ctx: Context) -> str:
    plots = {p.title: p.png for p in ctx.plots if p.claim is None}
    claim_plots = {p.claim: p.png for p in ctx.plots if p.claim is not None}
    return to_html(table, plots, ctx.columns, corpus=ctx.corpus, claim_plots=claim_plots)
