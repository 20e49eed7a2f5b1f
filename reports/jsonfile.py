"""JSON: the whole report (metadata, legend, per row the flat values of `reports.values` plus per-seed details) and
a comparison (every value, per row and side). Registered with `reports.writers` as format 'json' of `ablate report`
and of `ablate compare`.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from ablate.reports.cells import has_test
from ablate.reports.legend import headline, legend, sweep_legend
from ablate.reports.table import ReportRow, ReportTable
from ablate.reports.values import claims_data, rounded, sweep_record, table_records
from ablate.reports.writers import Context, writer

if TYPE_CHECKING:
    from ablate.reports.compare import RowComparison, SweepComparison, SweepSide


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
            **({"other_against": r.other_against, "same_as_reference": r.same_as_reference} if r.other_against else {}),
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


@writer("json", "the whole report, per seed", suffix=".json")
def write_json(table: ReportTable, ctx: Context) -> str:
    return to_json(table, corpus=ctx.corpus)


@writer("json", "every value, per row and side", suffix=".json", subject="comparison")
def sweep_to_json(cmp: SweepComparison, ctx: Context) -> str:
    def side(s: SweepSide) -> dict[str, Any]:
        return {"out_dir": str(s.out_dir), "study": s.study, "preset": s.preset, "seeds": s.seeds}

    def detail(row: RowComparison) -> dict[str, Any]:
        per_side = {
            tag: None
            if r is None
            else {
                "states": r.states,
                "values": {m: {str(k): v for k, v in s.values.items()} for m, s in r.stats.items() if s is not None},
                "convergence": None
                if r.convergence is None
                else {"state": r.convergence.state, "text": r.convergence.text, "detail": r.convergence.detail},
            }
            for tag, r in (("a", row.a), ("b", row.b))
        }
        tests = {
            m: {
                "se_seeds": rounded(t.se_seeds),
                "se_sentences": rounded(t.se_sentences),
                "df": rounded(t.df),
                "notes": list(t.notes),
            }
            for m, t in row.tests.items()
        }
        differences = [{"field": k, "a": va, "b": vb} for k, va, vb in row.differences]
        return sweep_record(row) | {"flags": row.flags, "differences": differences, "sides": per_side, "tests": tests}

    doc = {
        "a": side(cmp.a),
        "b": side(cmp.b),
        "settings": [{"setting": k, "a": va, "b": vb} for k, va, vb in cmp.settings],
        "n_samples": cmp.n_samples,
        "legend": sweep_legend(cmp),
        "rows": [detail(r) for r in cmp.rows],
    }
    return json.dumps(doc, indent=2, ensure_ascii=False, default=str) + "\n"
