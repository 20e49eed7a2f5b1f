"""Legend prose: what a reader needs around the numbers (how to read them, the tests, what failed), for every format.

The report's `headline` (above the table), `legend` (below it) and `claims_legend` (below the verdicts), and
`ablate compare`'s `sweep_header` and `sweep_legend`. Plain text: each writer escapes it for its format (the LaTeX
caption, `reports.latex`, is written from the same sentences).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ablate.ablations.statistics import (
    ALPHA,
    PLATEAU_BLEU,
    PLATEAU_PPL,
    POWER,
    SCREEN_ALPHA,
    SOURCE_RATIO_MIN,
    budget_label,
)
from ablate.reports.cells import field_text, has_test, readers_text
from ablate.reports.claims import ClaimVerdict
from ablate.reports.compare import short_value
from ablate.reports.table import ReportTable

if TYPE_CHECKING:
    from ablate.reports.compare import SweepComparison

PPL_CAVEAT = (
    "Our PPL is per subword token of our SentencePiece vocabulary, so it is not comparable with the paper's (per "
    "wordpiece of a 37K BPE vocabulary) nor across vocabularies: compare directions and gaps, not levels."
)


def machines_text(table: ReportTable) -> str:
    """', every trial on cpu (1 thread), torch 2.13.0+cpu, AVX512 kernels', or where they differ ', trials on A (40
    trials), B (1 trial)': the devices, torch versions and kernel sets the complete trials ran on."""
    if len(table.machines) == 1:
        return f", every trial on {next(iter(table.machines))}"
    said = "; ".join(f"{m} ({n} trial{'s' if n != 1 else ''})" for m, n in table.machines.items())
    return f", trials on {said}" if said else ""


def legend(table: ReportTable, corpus: str | None = None) -> list[str]:
    """The lines a reader needs under the table: how to read it, then the notes and every failure in full.
    `corpus` names the data the study trained on (see `reports.build.describe_corpus`)."""
    seeds = ", ".join(str(s) for s in table.seeds)
    data = f", corpus {corpus}" if corpus else ""
    test = " BLEU (test): on the test set, from each trial's final weights." if has_test(table) else ""
    device = machines_text(table)
    lines = [
        f"Study '{table.study}', preset '{table.preset}'{data}, seeds {seeds}{device}; results from {table.out_dir}.",
        "PPL, BLEU and chrF on the dev set: mean ± sample standard deviation over the complete seeds; "
        f"'seeds' counts complete / all.{test}",
    ]
    if table.base is not None:
        lines += [
            blank_text(table),
            "ΔPPL, ΔBLEU: the row's mean minus the base's mean over all the base's seeds, the effect the marks and "
            f"verdicts test (± the row's seed SD). {marks_text(table)}",
        ]
    lines.append(f"chrF: sacreBLEU {table.chrf_signature}. {plateau_legend(table)}")
    lines += budget_lines(table)
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
    elif untrained := untrained_rows(table):
        lines.append(f"DID NOT LEARN TO TRANSLATE: {'; '.join(untrained)}. No claim is judged on them there.")
    unconverged = unconverged_rows(table)
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


def blank_text(table: ReportTable) -> str:
    """What a blank configuration cell and the 'other' differences are measured from: the base, or the row a row is
    read against (the one its claims, or its group's, compare it with); and the base's own values of those fields."""
    readers = readers_text(table)
    against = f" ({'; '.join(readers)}: the row the claims compare them, or their group, with)" if readers else ""
    text = f"Blank configuration cells: same as the base row '{table.base}'{against}."
    if table.base_other:
        named = next((f" ('vs {r.other_against}: ...' where that is not the base)" for r in table.rows
                      if r.other_against and r.other), "")  # fmt: skip
        values = ", ".join(field_text(k, v) for k, v in table.base_other.items())
        text += (
            " other: what a row changes outside these columns (written across its blank configuration cells where "
            f"they are side by side), from the same row as its blank cells{named}; the base has {values}."
        )
    return text


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


def marks_text(table: ReportTable) -> str:
    """What † and ‡ mean: the test behind the marks and the verdicts, and the family each is corrected over."""
    where = "at every budget, with the same sign" if len(table.fractions) > 1 else "at T"
    return (
        f"† / ‡: the BLEU difference from the base is significant at Holm-corrected p < {ALPHA} / p < 0.01 {where}, "
        "by the test behind the marks and the verdicts: seed noise (each row's seed variance moderated toward "
        "the study's; a row whose seeds spread beyond the others' keeps its own) plus a paired bootstrap "
        f"over the dev sentences ({table.n_samples} resamples), Holm over the rows tested against the base. The "
        "marks describe every row; the verdicts are corrected over the study's claimed comparisons instead "
        "(p(claims)), so a marked row can still be inconclusive for its claim. Rows "
        "that give no verdict (diverged, not trainable at this preset, a pipeline-check preset) carry no mark."
    )


def plateau_legend(table: ReportTable) -> str:
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


def budget_lines(table: ReportTable) -> list[str]:
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


def untrained_rows(table: ReportTable) -> list[str]:
    """'A1 at T/2 (PPL ×1.2 with swapped sources)' for each row that did not learn to translate at some budget."""
    return [
        f"{r.name} at {', '.join(budget_label(f) for f in bad)} (PPL ×{min(bad.values()):.1f} with swapped sources)"
        for r in table.rows
        if (bad := r.no_source())
    ]


def unconverged_rows(table: ReportTable) -> list[str]:
    """Rows not at their plateau, named while the study has one budget (with more, the plateau column says it)."""
    if len(table.fractions) > 1:
        return []
    return [r.name for r in table.rows if r.convergence is not None and r.convergence.state != "plateau"]


def claims_legend(table: ReportTable) -> str:
    """How to read the verdicts: the test, the rules across budgets, what an inconclusive one says."""
    text = (
        "Each comparison: difference of the means over seeds [95% confidence interval counting seed noise (each "
        "row's seed variance moderated toward the study's by empirical Bayes, Smyth 2004; a row whose seeds spread "
        f"beyond the other rows' over every budget at {SCREEN_ALPHA:.1%} keeps its own) and dev-sentence noise "
        "(paired bootstrap)], two-sided p, at each budget; "
        "paper = the paper's difference; "
        "p(claims): the comparison's p over every budget (each budget must decide it the same way: an "
        "intersection-union test), adjusted over every claimed comparison of the study, whatever its metric, "
        "reference or kind (equivalence and non-inferiority as TOST p-values), by Holm's procedure truncated so "
        "that no comparison is tested at more than about a quarter of the level (Dmitrienko, Tamhane and Wiens 2008); "
        f"simulated, the chance of any wrong verdict in the study stays under {ALPHA} over the grid of "
        "docs/method/verdicts.md. Reproduced: p(claims) < "
        f"{ALPHA} in the claimed direction (equivalence: the interval inside the margin) at every budget; "
        "contradicted: significant the other way (equivalence: the interval outside the margin) at every budget; "
        "inconclusive otherwise, saying why: budget-sensitive (the budgets disagree), no verdict for a row that "
        "diverged or was not trainable at this preset, seed noise not yet estimated (one seed per row), or an effect "
        "below the minimum detectable one, "
        f"(t(1 - a/2, df) + t({POWER:g}, df)) × SE at the level a the family first holds the comparison to "
        f"({ALPHA} over the claimed comparisons), the effect the test finds with {POWER:.0%} power ('too "
        "noisy to tell' when it exceeds the paper's own difference). Power, beside each verdict: that effect, and "
        "the chance of finding the paper's own difference at level a, with the seeds the row ran."
    )
    if len(table.fractions) == 1:
        text += " Judged at T alone: not checked across budgets."
    return " ".join([text, *design_text(table)])


def design_text(table: ReportTable) -> list[str]:
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


def sweep_header(cmp: SweepComparison) -> list[str]:
    """Who A and B are, and what the two directories change in every row (said once, not per row)."""
    lines = [
        f"{tag}: {s.out_dir}  (study {s.study}, preset {s.preset}, seeds {', '.join(map(str, s.seeds))})"
        for tag, s in (("A", cmp.a), ("B", cmp.b))
    ]
    if cmp.settings:
        lines.append("B differs from A in every row in common:")
        lines += [f"  {key}: {short_value(va)} → {short_value(vb)}" for key, va, vb in cmp.settings]
    else:
        lines.append("A and B have the same settings in every row in common")
    return lines


def sweep_legend(cmp: SweepComparison) -> list[str]:
    return [
        "A, B: mean ± sample standard deviation over the complete seeds (seeds: complete/all, from the records).",
        "B − A: difference of the means with its 95% interval, counting seed noise (the variance over seeds pooled "
        f"over every row of both directories) and, where both sides scored the same dev sentences, sentence noise "
        f"(paired bootstrap, {cmp.n_samples} resamples); p: two-sided, Holm-corrected over the rows compared on "
        "that metric.",
        f"Not at plateau: dev BLEU moved by {PLATEAU_BLEU:g} or more, or dev PPL fell by more than "
        f"{PLATEAU_PPL:.0%}, between the last two validations: that row's numbers measure speed, not worth.",
        *cmp.notes,
    ]
