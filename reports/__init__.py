"""Reports: finished results read into tables, verdicts, plots and pages. `load(OUT)` opens a study from Python."""

from ablate.reports.api import Study, load

__all__ = ["Study", "load"]
