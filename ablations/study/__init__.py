"""A study's definition: its rows as overrides of a base (`Study`, `Row`, `load_study`; the built-in YAML in
`builtin/`), the presets that size it (`PRESETS`, `get_preset`), the run's configuration sections (`RunConfig`) and its
claims read from YAML (`load_claims`; the claims' types are the statistics', `ablations.statistics.claims`)."""

from __future__ import annotations

from ablate.ablations.study.claims import (  # noqa: F401 - the public face
    claims_to_data,
    load_claims,
    parse_claims,
)
from ablate.ablations.study.config import (  # noqa: F401 - the public face
    SECTIONS,
    HardwareConfig,
    RunConfig,
    TrackingConfig,
    add_sections,
    build_run_config,
    check_sections,
    describe_error,
)
from ablate.ablations.study.definition import (  # noqa: F401 - the public face
    BUILTIN_DIR,
    PRESET_RECIPE,
    Row,
    SearchDim,
    Study,
    builtin_studies,
    check_allocation,
    coverage_summary,
    load_study,
    parse_rows,
    parse_study,
)
from ablate.ablations.study.presets import (  # noqa: F401 - the public face
    PRESETS,
    Preset,
    default_base,
    get_preset,
)

__all__ = [
    "BUILTIN_DIR",
    "PRESETS",
    "PRESET_RECIPE",
    "SECTIONS",
    "HardwareConfig",
    "Preset",
    "Row",
    "RunConfig",
    "SearchDim",
    "Study",
    "TrackingConfig",
    "add_sections",
    "build_run_config",
    "builtin_studies",
    "check_allocation",
    "check_sections",
    "claims_to_data",
    "coverage_summary",
    "default_base",
    "describe_error",
    "get_preset",
    "load_claims",
    "load_study",
    "parse_claims",
    "parse_rows",
    "parse_study",
]
