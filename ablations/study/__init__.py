"""A study's definition: its rows as overrides of a base (`Study`, `Row`, `load_study`; the built-in YAML in
`builtin/`), the presets that size it (`PRESETS`, `get_preset`), the run's configuration sections (`RunConfig`) and its
claims read from YAML (`load_claims`; the claims' types are the statistics', `ablations.statistics.claims`)."""

from __future__ import annotations

from ablate.ablations.study.claims import (  # noqa: F401 - the public face
    claims_to_data,
    load_claims,
    parse_claims,
)
from ablate.ablations.study.definition import (  # noqa: F401 - the public face
    load_study,
    parse_rows,
)

__all__ = [
    "claims_to_data",
    "load_claims",
    "load_study",
    "parse_claims",
    "parse_rows",
]
