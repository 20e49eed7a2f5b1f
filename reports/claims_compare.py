"""Two studies' verdicts side by side, claim by claim: which of the paper's findings survive a change of block, corpus
or preset (`ablate compare A B --claims`).

Claims are matched by id (the shipped studies share them: `table3.claims.yaml` and `modern.claims.yaml` use the same
ids for Table 3's claims), each side judged by its own study exactly as its report judges it (`reports.table`). A
claim only one study has is listed as such. Numbers stay numbers here; the writers (Markdown, LaTeX, HTML, text)
turn them into text. One comparison in one study (`Effect`) is `reports.trend`'s, which follows claims over any number
of studies at several sizes.
"""

from __future__ import annotations

from dataclasses import dataclass
from html import escape

from ablate.ablations.statistics import budget_label, ratio_text
from ablate.reports.claims import ClaimVerdict
from ablate.reports.latex import page_chunks, tex_escape, tex_notes, text_lines
from ablate.reports.markdown import md_table
from ablate.reports.table import ReportTable
from ablate.reports.trend import Effect, effect_of, interval_text, study_labels
from ablate.reports.writers import Context, writer


@dataclass(frozen=True, kw_only=True)
class Side:
    """A claim as one study judged it."""

    verdict: str
    effects: tuple[Effect, ...]


@dataclass(frozen=True, kw_only=True)
class ClaimRow:
    id: str
    text: str
    section: str
    a: Side | None
    b: Side | None

    @property
    def agree(self) -> bool | None:
        """True when both studies give the same decisive verdict, False when their decisive verdicts differ, None
        when either is inconclusive or missing."""
        if self.a is None or self.b is None:
            return None
        decisive = {"reproduced", "contradicted"}
        if self.a.verdict in decisive and self.b.verdict in decisive:
            return self.a.verdict == self.b.verdict
        return None


@dataclass(frozen=True, kw_only=True)
class ClaimsComparison:
    a: str
    """Study A's label ('table3 (tiny)')."""
    b: str
    rows: tuple[ClaimRow, ...]
    only_a: tuple[str, ...]
    only_b: tuple[str, ...]
    budgets_a: tuple[str, ...]
    budgets_b: tuple[str, ...]


def _side(cv: ClaimVerdict | None, base: str | None) -> Side | None:
    if cv is None:
        return None
    return Side(verdict=cv.verdict, effects=tuple(effect_of(c, base) for c in cv.comparisons))


def compare_claims(a: ReportTable, b: ReportTable) -> ClaimsComparison:
    """Every claim of either study, in A's order then B's, each with both studies' verdicts and effects at T."""
    by_a = {cv.claim.id: cv for cv in a.claims}
    by_b = {cv.claim.id: cv for cv in b.claims}
    ids = list(dict.fromkeys([*by_a, *by_b]))
    rows = []
    for claim_id in ids:
        claim = (by_a.get(claim_id) or by_b[claim_id]).claim
        rows.append(
            ClaimRow(
                id=claim_id,
                text=claim.text,
                section=claim.section or "",
                a=_side(by_a.get(claim_id), a.base),
                b=_side(by_b.get(claim_id), b.base),
            )
        )
    label_a, label_b = study_labels(a, b)
    return ClaimsComparison(
        a=label_a,
        b=label_b,
        rows=tuple(rows),
        only_a=tuple(i for i in ids if i not in by_b),
        only_b=tuple(i for i in ids if i not in by_a),
        budgets_a=tuple(budget_label(f) for f in a.fractions),
        budgets_b=tuple(budget_label(f) for f in b.fractions),
    )


def effect_text(effect: Effect) -> str:
    """'C1 -11.50 [-20.68, -2.33] (4.2x the paper's)'; 'C1 untested' without trials."""
    if effect.effect is None:
        return f"{effect.row} untested"
    text = f"{effect.row} {interval_text(effect)}"
    return f"{text} ({ratio_text(effect.paper_ratio)} the paper's)" if effect.paper_ratio is not None else text


def side_text(side: Side | None) -> str:
    """'REPRODUCED: B1 -14.56 [...]; B2 ...' or 'not in this study'."""
    if side is None:
        return "not in this study"
    return f"{side.verdict.upper()}: " + "; ".join(effect_text(e) for e in side.effects)


def summary_line(cmp: ClaimsComparison) -> str:
    """How many shared claims agree, differ, or cannot be compared: untested on a side (a subset of the rows ran
    there), else inconclusive on a side."""
    shared = [(r, (r.a.verdict, r.b.verdict)) for r in cmp.rows if r.a is not None and r.b is not None]
    agree = sum(r.agree is True for r, _ in shared)
    differ = sum(r.agree is False for r, _ in shared)
    untested = sum(r.agree is None and "untested" in verdicts for r, verdicts in shared)
    text = (
        f"{len(shared)} claims in both: {agree} with the same verdict, {differ} with opposite verdicts, "
        f"{len(shared) - agree - differ - untested} inconclusive in at least one study"
    )
    if untested:
        text += f", {untested} untested in at least one (its rows did not run there)"
    if cmp.only_a:
        text += f"; only in {cmp.a}: {', '.join(cmp.only_a)}"
    if cmp.only_b:
        text += f"; only in {cmp.b}: {', '.join(cmp.only_b)}"
    return text


def to_markdown(cmp: ClaimsComparison) -> str:
    """The claims side by side as a Markdown table, effects at T with their 95% intervals."""
    rows = (
        (f"{row.text} ({row.section})" if row.section else row.text, side_text(row.a), side_text(row.b))
        for row in cmp.rows
    )
    lines = [f"## Claims: {cmp.a} vs {cmp.b}", "", *md_table(["claim", cmp.a, cmp.b], "lll", rows)]
    lines += [
        "",
        f"- {summary_line(cmp)}.",
        "- Effects at T: difference from each study's base (or the comparison's reference row) [95% interval, seed "
        "and dev-sentence noise]; each verdict needs every budget of its study to agree "
        f"({cmp.a}: {', '.join(cmp.budgets_a)}; {cmp.b}: {', '.join(cmp.budgets_b)}).",
    ]
    return "\n".join(lines) + "\n"


def to_latex(cmp: ClaimsComparison) -> str:
    """Booktabs table*s of the claims side by side (needs booktabs), as many as fit a page each (letter or A4), the
    first with the summary as its notes, each with a short caption."""
    rows = []
    for row in cmp.rows:
        texts = [f"{row.text} ({row.section})" if row.section else row.text, side_text(row.a), side_text(row.b)]
        height = max(text_lines(texts[0], "claim"), *(text_lines(text, "side") for text in texts[1:]))
        # ragged right in the narrow columns; \tabularnewline, as \raggedright takes \\
        rows.append((height, " & ".join(rf"\raggedright {tex_escape(t)}" for t in texts) + r" \tabularnewline"))
    notes = tex_escape(
        f"{summary_line(cmp)}. Effects at T: the difference from each study's base (or the comparison's reference "
        "row) with its 95% interval (seed and dev-sentence noise)."
    )
    chunks = page_chunks(rows, text_lines(notes, "notes"))
    lines = []
    for i, chunk in enumerate(chunks):
        part = f" ({i + 1} of {len(chunks)})" if len(chunks) > 1 else ""
        lines += [r"\begin{table*}[t]", r"\centering", r"\scriptsize", r"\setlength{\tabcolsep}{3pt}"]
        lines += [r"\begin{tabular}{p{0.29\textwidth}p{0.325\textwidth}p{0.325\textwidth}}", r"\toprule"]
        lines += [f"Claim & {tex_escape(cmp.a)} & {tex_escape(cmp.b)} \\\\", r"\midrule", *chunk, r"\bottomrule"]
        lines += [r"\end{tabular}", *(tex_notes(notes) if i == 0 else [])]
        lines += [rf"\caption{{The paper's claims in two studies{part}: each study's verdict and effects at $T$.}}"]
        lines.append(r"\end{table*}")
    return "\n".join(lines) + "\n"


def to_html(cmp: ClaimsComparison) -> str:
    """One self-contained page with the claims side by side."""

    def cell(side: Side | None) -> str:
        if side is None:
            return "<td class='none'>not in this study</td>"
        effects = "<br>".join(escape(effect_text(e)) for e in side.effects)
        return f"<td class='{side.verdict}'><b>{side.verdict}</b><br>{effects}</td>"

    body = "\n".join(
        f"<tr><td>{escape(r.text)}<br><small>{escape(r.section)}</small></td>{cell(r.a)}{cell(r.b)}</tr>"
        for r in cmp.rows
    )
    style = (
        "body{font-family:sans-serif;margin:2rem}table{border-collapse:collapse}td,th{border:1px solid #ccc;"
        "padding:.4rem;vertical-align:top;text-align:left}.reproduced{background:#e6f4ea}"
        ".contradicted{background:#fce8e6}.inconclusive{background:#f8f9fa}"
    )
    return (
        f"<!doctype html><html lang='en'><head><meta charset='utf-8'><title>Claims: {escape(cmp.a)} vs "
        f"{escape(cmp.b)}</title><style>{style}</style></head><body><h1>Claims: {escape(cmp.a)} vs {escape(cmp.b)}"
        f"</h1><table><tr><th>claim</th><th>{escape(cmp.a)}</th><th>{escape(cmp.b)}</th></tr>\n{body}\n</table>"
        f"<p>{escape(summary_line(cmp))}.</p></body></html>\n"
    )


@writer("md", "Markdown table, as a terminal prints it", suffix=".md", subject="claims", aliases=("text",))
def write_markdown(cmp: ClaimsComparison, ctx: Context) -> str:
    return to_markdown(cmp)


@writer("tex", "LaTeX table (booktabs)", suffix=".tex", subject="claims")
def write_latex(cmp: ClaimsComparison, ctx: Context) -> str:
    return to_latex(cmp)


@writer("html", "one self-contained HTML page", suffix=".html", subject="claims")
def write_html(cmp: ClaimsComparison, ctx: Context) -> str:
    return to_html(cmp)


__all__ = ["ClaimRow", "ClaimsComparison", "Effect", "Side", "compare_claims", "summary_line"]
