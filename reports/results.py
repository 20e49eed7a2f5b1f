"""The old name of `ablations.results`, kept only while tests/benchmarks/test_archives.py imports `load_results`
from here: delete this file once it imports `ablate.ablations.results`."""

from ablate.ablations.results import load_results

__all__ = ["load_results"]
