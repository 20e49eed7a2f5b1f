"""Raw values for machines: a report's rows and claims, and a comparison's rows, as flat records of numbers.

CSV and JSON write these (`reports.csvfile`, `reports.jsonfile`), and W&B logs them (`reports.wandb_log`): every
value spelled out, no 'same as base' blanks, numbers rounded by `rounded` alone. The text the tables show is in
`reports.cells`.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from ablate.ablations.results import FULL
from ablate.ablations.statistics import RowTest, budget_label
from ablate.lightning_modules.metrics import METRICS
from ablate.reports.cells import has_test, value_text
from ablate.reports.compare import short_value
from ablate.reports.table import ReportRow, ReportTable, Stat

if TYPE_CHECKING:
    from ablate.reports.compare import RowComparison


def rounded(value: float | None, digits: int = 6) -> float | None:
    """`value` to `digits` decimals; None (an empty CSV field, JSON null) for no value and for a NaN or infinity
    (a test that could not estimate its noise), which JSON cannot spell."""
    return None if value is None or not math.isfinite(value) else round(value, digits)


def _stat_fields(name: str, stat: Stat | None) -> dict[str, float | None]:
    return {f"{name}_mean": rounded(stat.mean) if stat else None, f"{name}_std": rounded(stat.std) if stat else None}


def row_record(row: ReportRow, test: bool = True) -> dict[str, Any]:
    """One row as flat, raw values (the CSV line; also the core of the JSON row). `test`: include the test-set
    fields (`table_records` leaves them out of a table where no row has them)."""
    return {
        "row": row.name,
        "group": row.group,
        **row.config,
        "other": "; ".join(f"{k}={value_text(v)}" for k, v in row.other.items()),
        "ppl_mean": rounded(row.ppl.mean) if row.ppl else None,
        "ppl_std": rounded(row.ppl.std) if row.ppl else None,
        "bleu_mean": rounded(row.bleu.mean) if row.bleu else None,
        "bleu_std": rounded(row.bleu.std) if row.bleu else None,
        "seeds_complete": row.count("complete"),
        "seeds_total": row.n_seeds,
        "params_M": rounded(row.params_m),
        "paper_ppl": row.paper.ppl if row.paper else None,
        "paper_bleu": row.paper.bleu if row.paper else None,
        "delta_bleu": rounded(row.delta_bleu.mean) if row.delta_bleu else None,
        "delta_bleu_std": rounded(row.delta_bleu.std) if row.delta_bleu else None,
        "delta_ppl": rounded(row.delta_ppl.mean) if row.delta_ppl else None,
        "delta_ppl_std": rounded(row.delta_ppl.std) if row.delta_ppl else None,
        "chrf_mean": rounded(row.chrf.mean) if row.chrf else None,
        "chrf_std": rounded(row.chrf.std) if row.chrf else None,
        "delta_chrf": rounded(row.delta_chrf.mean) if row.delta_chrf else None,
        **(_stat_fields("test_bleu", row.test_bleu) | _stat_fields("test_chrf", row.test_chrf) if test else {}),
        "plateau": row.convergence.state if row.convergence else None,
        "budget_gain_bleu": rounded(row.budget_gain.mean) if row.budget_gain else None,
        "source_ppl_ratio": rounded(row.source_ratio.get(FULL)),
        "no_source_use": ", ".join(budget_label(f) for f in row.no_source()),
        "not_trainable": "; ".join(row.untrainable[f] for f in sorted(row.untrainable)),
        **{
            f"{metric}_{key}": rounded(getattr(row.tests.get(metric), attr, None))
            for metric in METRICS
            for key, attr in (("delta_se", "se"), ("p", "p"), ("p_holm", "p_holm"), ("mde", "mde"))
        },
        **{
            f"{metric}_ci_{end}": rounded(row.tests[metric].ci[i]) if metric in row.tests else None
            for metric in METRICS
            for i, end in enumerate(("low", "high"))
        },
        "significance": row.mark,
        "wall_time_s": rounded(row.wall_time_s, 1),
        "tokens_per_sec": rounded(row.tokens_per_sec, 1),
        "device": ", ".join(row.devices),
        "state": row.state,
        "reason": "; ".join(f"seed {s}: {r}" for s, r in sorted(row.reasons.items())),
    }


def table_records(table: ReportTable) -> list[dict[str, Any]]:
    """Every row's `row_record`, with the test-set fields only when some row has test scores."""
    return [row_record(r, test=has_test(table)) for r in table.rows]


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
                **test_fields(t),
                "se_seeds": rounded(t.se_seeds) if t else None,
                "se_sentences": rounded(t.se_sentences) if t else None,
                "seeds": f"{t.n_row}/{t.n_against}" if t else "",
                "paper_effect": rounded(c.paper_delta),
                "p_claims": rounded(c.p_family),
                "level": rounded(c.level),
                "family": c.family,
                "detectable": rounded(c.detectable),
                "power_at_paper": rounded(c.power),
            }
            if len(c.budgets) > 1:
                for b in c.budgets:
                    fields = {"verdict": b.verdict, **test_fields(b.test), "excluded": "; ".join(b.excluded)}
                    record |= {f"at{b.fraction:g}_{key}": value for key, value in fields.items()}
            out.append(record)
    return out


def test_fields(t: RowTest | None) -> dict[str, Any]:
    """A test's effect, 95% interval, p, Holm-corrected p and minimum detectable effect as raw values."""
    tested = t if t is not None and t.effect is not None else None
    return {
        "effect": rounded(t.effect) if t else None,
        "ci_low": rounded(tested.ci[0]) if tested else None,
        "ci_high": rounded(tested.ci[1]) if tested else None,
        "p": rounded(t.p) if t else None,
        "p_holm": rounded(t.p_holm) if t else None,
        "mde": rounded(t.mde) if t else None,
    }


def sweep_record(row: RowComparison) -> dict[str, Any]:
    """One row as flat raw values (a CSV line; the core of a JSON row)."""
    record: dict[str, Any] = {"row": row.name, "group": row.group, "in_a": row.a is not None, "in_b": row.b is not None}
    for tag, side in (("a", row.a), ("b", row.b)):
        record[f"seeds_complete_{tag}"] = side.complete if side else None
        record[f"seeds_total_{tag}"] = side.total if side else None
    for metric in METRICS:
        for tag, side in (("a", row.a), ("b", row.b)):
            stat = side.stats.get(metric) if side else None
            record[f"{metric}_mean_{tag}"] = rounded(stat.mean) if stat else None
            record[f"{metric}_std_{tag}"] = rounded(stat.std) if stat else None
        test = row.tests.get(metric)
        record[f"{metric}_delta"] = rounded(test.effect) if test else None
        ci = row.interval(metric)
        record[f"{metric}_ci_low"] = rounded(ci[0]) if ci else None
        record[f"{metric}_ci_high"] = rounded(ci[1]) if ci else None
        record[f"{metric}_se"] = rounded(test.se) if test else None
        record[f"{metric}_p"] = test.p if test else None  # not rounded: a p of 1e-9 is not 0
        record[f"{metric}_p_holm"] = test.p_holm if test else None
    for tag, side in (("a", row.a), ("b", row.b)):
        record[f"plateau_{tag}"] = side.convergence.state if side and side.convergence else None
    record["same_sentences"] = row.same_sentences
    differences = (f"{k}={short_value(va)}->{short_value(vb)}" for k, va, vb in row.differences)
    record["other_differences"] = "; ".join(differences)
    record["flags"] = "; ".join(row.flags)
    return record
