"""The report's formats, by the names they had when they all lived here: a map, and the names other code imports.

Each job now has its own module:

- `reports.cells`: the column registry (`COLUMNS`, `display_columns`) and every cell's text (`display_cells`);
- `reports.legend`: the prose around the numbers (`headline`, `legend`, `claims_legend`);
- `reports.values`: raw values for machines (`row_record`, `table_records`, `claims_data`, `rounded`);
- one module per format, each with the report's writer and, where it has one, the comparison's: `reports.markdown`,
  `reports.latex`, `reports.csvfile`, `reports.jsonfile`, `reports.htmlpage` (and `reports.text`, the terminal's).

The writers register with `reports.writers`, which lists these modules in `BUILTIN_MODULES`.
"""

from __future__ import annotations

from ablate.reports.cells import (
    COLUMNS,
    OPTIONAL_COLUMNS,
    STAT_COLUMNS,
    TEX_HIDDEN,
    Column,
    check_columns,
    display_cells,
    display_columns,
    duration,
    group_label,
    has_test,
    plateau_text,
    source_text,
    stat_text,
    state_text,
)
from ablate.reports.csvfile import to_claims_csv, to_csv, write_claims_csv, write_csv
from ablate.reports.htmlpage import data_uri, to_html, write_html
from ablate.reports.jsonfile import to_json, write_json
from ablate.reports.latex import TEX_DIGITS, TEX_PACKAGES, tex_escape, to_latex, write_latex
from ablate.reports.legend import EFFECT_SCALE_SAID, PPL_CAVEAT, claim_title, claims_legend, headline, legend
from ablate.reports.markdown import to_markdown, write_markdown
from ablate.reports.values import claims_data, row_record, table_records

__all__ = [
    "COLUMNS",
    "EFFECT_SCALE_SAID",
    "OPTIONAL_COLUMNS",
    "PPL_CAVEAT",
    "STAT_COLUMNS",
    "TEX_DIGITS",
    "TEX_HIDDEN",
    "TEX_PACKAGES",
    "Column",
    "check_columns",
    "claim_title",
    "claims_data",
    "claims_legend",
    "data_uri",
    "display_cells",
    "display_columns",
    "duration",
    "group_label",
    "has_test",
    "headline",
    "legend",
    "plateau_text",
    "row_record",
    "source_text",
    "stat_text",
    "state_text",
    "table_records",
    "tex_escape",
    "to_claims_csv",
    "to_csv",
    "to_html",
    "to_json",
    "to_latex",
    "to_markdown",
    "write_claims_csv",
    "write_csv",
    "write_html",
    "write_json",
    "write_latex",
    "write_markdown",
]
