"""CSV: every value of every row, for machines (raw numbers from `reports.values`, no blanks; empty field = no
value). The report's rows, its claims (a companion file beside it) and a comparison's rows, all through `csv_text`.
Registered with `reports.writers` as format 'csv' of `ablate report` (with 'claims.csv') and of `ablate compare`.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ablate.reports.table import ReportTable
from ablate.reports.values import claims_data, sweep_record, table_records
from ablate.reports.writers import Context, writer

if TYPE_CHECKING:
    from ablate.reports.compare import SweepComparison


def csv_text(records: Sequence[dict[str, Any]], columns: Sequence[str] = ()) -> str:
    """A header line (the first record's keys) and one line per record; with no record, the header `columns`
    alone ('' without them)."""
    fields = list(records[0]) if records else list(columns)
    if not fields:
        return ""
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=fields)
    writer.writeheader()
    writer.writerows(records)
    return buffer.getvalue()


def to_csv(table: ReportTable) -> str:
    """One line per row, every value spelled out (no 'same as base' blanks); empty field = no value."""
    return csv_text(table_records(table), columns=["row"])


def to_claims_csv(table: ReportTable) -> str:
    """One line per comparison of every claim, with its test and verdict (written beside the main CSV)."""
    return csv_text(claims_data(table))


@writer("csv", "every value of every row", suffix=".csv")
def write_csv(table: ReportTable, ctx: Context) -> str:
    return to_csv(table)  # every value, whatever the columns shown


@writer("claims.csv", "every claim's comparisons and verdicts", suffix=".claims.csv", companion_of="csv")
def write_claims_csv(table: ReportTable, ctx: Context) -> str | None:
    return to_claims_csv(table) if table.claims else None


@writer("csv", "one line per row", suffix=".csv", subject="comparison")
def sweep_to_csv(cmp: SweepComparison, ctx: Context) -> str:
    return csv_text([sweep_record(r) for r in cmp.rows])
