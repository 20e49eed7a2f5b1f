"""Cell text: every value of a report or a comparison as the tables show it, and which columns they show.

Markdown, LaTeX and HTML share the paper's layout: `display_columns` (the `COLUMNS` chosen by key, `ablate report
--columns`; each format has its default: LaTeX's fits a two-column paper) and `display_cells` (blank cell = same as
base, mean ± std, significance marks). `ablate compare`'s text and Markdown tables share `sweep_lines`. The numbers
come from `reports.table` and `reports.compare`; the writers (`reports.markdown`, `reports.latex`, ...) lay them out,
and the machine formats take raw values from `reports.values` instead.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ablate.ablations.results import FULL
from ablate.ablations.statistics import RowTest, budget_label
from ablate.data.errors import AblateError
from ablate.lightning_modules.metrics import METRICS
from ablate.reports.claims import p_text
from ablate.reports.compare import RowSide, SweepComparison
from ablate.reports.table import CONFIG_COLUMNS, ReportRow, ReportTable, Stat


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
        return len(table_devices(table)) > 1
    return True


def table_devices(table: ReportTable) -> list[str]:
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


def value_text(value: Any) -> str:
    """A config value: '?' for None, 'true'/'false', a float with its point ('0.0', '1e-05')."""
    if value is None:
        return "?"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float):
        text = f"{value:g}"
        return text if any(c in text for c in ".en") else f"{text}.0"  # 0.0, not 0: a rate reads as a rate
    return str(value)


def field_text(key: str, value: Any) -> str:
    """A field outside the paper's columns and its value: 'activation=swiglu', 'train.lr_factor=1.0', 'n_kv_heads=null'
    (the config's None, as YAML spells it)."""
    return f"{key.removeprefix('model.')}={'null' if value is None else value_text(value)}"


def readers_text(table: ReportTable) -> list[str]:
    """The rows read against another row than the base (`ReportRow.other_against`), by reference: "(M): as row
    'paper'" where a whole group is, else "E2: as row 'E1'"."""
    readers: dict[str, list[str]] = {}
    for row in table.rows:
        if row.other_against:
            readers.setdefault(row.other_against, []).append(row.name)
    parts = []
    for reference, names in readers.items():
        whole = [group_label(g, rows) for g, rows in table.groups() if {r.name for r in rows} <= set(names)]
        within = {r.name for g, rows in table.groups() if group_label(g, rows) in whole for r in rows}
        named = whole + [name for name in names if name not in within]
        parts.append(f"{', '.join(named)}: as row {reference}")
    return parts


def steps_text(value: Any) -> str:
    """A step count in thousands where it is a whole number of them ('100K'), else `value_text`."""
    if isinstance(value, int) and value >= 1000 and value % 1000 == 0:
        return f"{value // 1000}K"
    return value_text(value)


def number_text(value: float, digits: int, sign: str = "") -> str:
    """`value` to `digits` decimals; one that rounds to zero has no minus sign ('+0.00', not '-0.00')."""
    return f"{0.0 if round(value, digits) == 0 else value:{sign}.{digits}f}"


def mean_text(stat: Stat, digits: int, sign: str = "") -> str:
    """The mean to `digits` decimals (-0.00 shown as 0.00)."""
    return number_text(stat.mean, digits, sign)


def sd_text(stat: Stat, digits: int) -> str:
    """The sample standard deviation to `digits` decimals, or '' with one seed."""
    return "" if stat.std is None else f"{stat.std:.{digits}f}"


def stat_text(stat: Stat | None, digits: int, sign: str = "") -> str:
    """mean ± sample std (the mean alone with one seed; -0.00 shown as 0.00), or '' without a value."""
    if stat is None:
        return ""
    text = mean_text(stat, digits, sign)
    return text if stat.std is None else f"{text} ± {sd_text(stat, digits)}"


def params_text(millions: float | None) -> str:
    """Parameters x10^6 to three significant figures ('65.1', '213'), whole from 1000 on."""
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


def rate_text(value: float | None) -> str:
    """Tokens per second: '850', '12.3k'."""
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
            label = f"{label}: {reasons[0] if width is None else cut(reasons[0], width)}"
        parts.append(label)
    return " · ".join(parts) if parts else "no seeds"


STAT_METRICS = {
    "ppl": ("ppl", ""),
    "bleu": ("bleu", ""),
    "chrf": ("chrf", ""),
    "test_bleu": ("bleu", ""),
    "test_chrf": ("chrf", ""),
    "delta_ppl": ("ppl", "+"),
    "delta_bleu": ("bleu", "+"),
}
"""Columns that show a `Stat` (the `ReportRow` field of the same name): key -> (its metric, sign)."""
STAT_COLUMNS = {key: (METRICS[metric].digits, sign) for key, (metric, sign) in STAT_METRICS.items()}
"""key -> (decimals, sign), the decimals the metric's own (`lightning_modules.metrics.METRICS`)."""


def plateau_text(row: ReportRow) -> str:
    """The 'plateau' cell: 'diverged', else BLEU gained from the last shorter budget to T ('+1.3', mean over seeds),
    else (no shorter budget) the state of the last two validations ('yes', 'rising +2.3', ...)."""
    state = row.convergence
    if state is not None and state.state == "diverged":
        return "diverged"
    if row.budget_gain is not None:
        return number_text(row.budget_gain.mean, 1, "+")
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
        shown = steps_text(value) if col.key == "train_steps" else value_text(value)
        cells[col.key] = "" if row.same_as_reference[col.key] else shown
    other = ", ".join(field_text(k, v) for k, v in row.other.items())
    cells["other"] = f"vs {row.other_against}: {other}" if row.other_against and other else other
    for key, (digits, sign) in STAT_COLUMNS.items():
        cells[key] = stat_text(getattr(row, key), digits, sign)
    cells["plateau"] = plateau_text(row)
    cells["source"] = source_text(row)
    cells["params"] = params_text(row.params_m)
    ppl, bleu = METRICS["ppl"].paper_digits, METRICS["bleu"].paper_digits
    cells["paper_ppl"] = f"{row.paper.ppl:.{ppl}f}" if row.paper and row.paper.ppl is not None else ""
    cells["paper_bleu"] = f"{row.paper.bleu:.{bleu}f}" if row.paper and row.paper.bleu is not None else ""
    cells["delta_bleu"] = (cells["delta_bleu"] + f" {row.mark}").strip()
    cells["wall"] = duration(row.wall_time_s)
    cells["tok_s"] = rate_text(row.tokens_per_sec)
    cells["device"] = ", ".join(row.devices)
    cells["seeds"] = state_text(row)
    return cells


def has_test(table: ReportTable) -> bool:
    """True when some row has test-set scores (then every format shows them, apart from the dev columns)."""
    return any(r.test_bleu is not None or r.test_chrf is not None for r in table.rows)


def group_cells(table: ReportTable) -> list[list[tuple[ReportRow, dict[str, str]]]]:
    """Per row group, each row with its cells; the group label in the first row's 'group' cell."""
    out = []
    for group, rows in table.groups():
        labels = [group_label(group, rows)] + [""] * (len(rows) - 1)
        out.append([(row, display_cells(row) | {"group": label}) for row, label in zip(rows, labels, strict=True)])
    return out


def other_spans(table: ReportTable, cols: list[Column]) -> dict[str, tuple[int, int]] | None:
    """Where each row's 'other' differences are written instead of in a column of their own, as the paper writes its
    row (E) across the configuration columns: row name -> (first index, count), in `cols` without 'other', of the
    longest run of the row's blank configuration cells (at least two). None when 'other' is not shown, or some row
    with differences has no such run (then the column keeps them)."""
    if "other" not in {c.key for c in cols}:
        return None
    shown = [c for c in cols if c.key != "other"]
    config = {c.key for c in CONFIG_COLUMNS}
    spans = {}
    for row in table.rows:
        if not row.other:
            continue
        blank = [c.key in config and row.same_as_reference[c.key] for c in shown]
        runs = [(i, n) for i in range(len(shown)) for n in range(2, len(shown) - i + 1) if all(blank[i : i + n])]
        if not runs:
            return None
        spans[row.name] = max(runs, key=lambda run: (run[1], -run[0]))  # the longest, the first of equals
    return spans


def cut(text: str, width: int) -> str:
    """`text` cut to `width` characters, an ellipsis last where it was cut."""
    return text if len(text) <= width else text[: width - 1] + "…"


# --- `ablate compare`: two results directories, one line per row and metric -------------------------------------

SWEEP_COLUMNS = ("row", "seeds A → B", "metric", "A", "B", "B − A [95% CI]", "p (Holm)", "flags")
"""The table's columns (text and Markdown): one line per row and metric."""
SWEEP_NUMERIC = ("A", "B", "B − A [95% CI]", "p (Holm)")
"""The columns set right-aligned (the others, text, left)."""


def delta_text(test: RowTest | None, interval: tuple[float, float] | None, digits: int) -> str:
    """'+0.42 [-0.10, +0.94]': B − A with its 95% interval (where one could be estimated), or '' without a test."""
    if test is None or test.effect is None:
        return ""
    ci = f" [{interval[0]:+.{digits}f}, {interval[1]:+.{digits}f}]" if interval else ""
    return f"{test.effect:+.{digits}f}{ci}"


def seeds_text(side: RowSide | None) -> str:
    """'2/3': complete seeds / all on one side; '-' where the side lacks the row."""
    return "-" if side is None else f"{side.complete}/{side.total}"


def sweep_lines(cmp: SweepComparison) -> list[tuple[str, ...]]:
    """The table's cells, one tuple per row x metric; row name, seeds and flags on the row's first line."""
    lines = []
    for row in cmp.rows:
        for i, (metric, spec) in enumerate(METRICS.items()):
            first = i == 0
            test = row.tests.get(metric)
            lines.append(
                (
                    row.name if first else "",
                    f"{seeds_text(row.a)} → {seeds_text(row.b)}" if first else "",
                    spec.label,
                    stat_text(row.a.stats.get(metric) if row.a else None, spec.digits),
                    stat_text(row.b.stats.get(metric) if row.b else None, spec.digits),
                    delta_text(test, row.interval(metric), spec.digits),
                    p_text(test.p_holm) if test and test.p_holm is not None else "",
                    "; ".join(row.flags) if first else "",
                )
            )
    return lines
