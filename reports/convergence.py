"""The old name of `ablations.convergence`, kept only while tests/lightning_modules/test_source_use.py imports
`SOURCE_RATIO_MIN` from here: delete this file once it imports `ablate.ablations.convergence`."""

from ablate.ablations.convergence import SOURCE_RATIO_MIN

__all__ = ["SOURCE_RATIO_MIN"]
