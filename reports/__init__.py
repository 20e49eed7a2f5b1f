"""Reports: finished results read into tables, verdicts, plots and pages. `load(OUT)` opens a study from Python."""

from ablate.reports.api import LoadedStudy, load

__all__ = ["LoadedStudy", "load"]
