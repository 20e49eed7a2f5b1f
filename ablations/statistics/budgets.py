"""Training budgets named as fractions of T (train.max_steps): how verdicts, records, progress lines, W&B keys and
reports write them."""

from __future__ import annotations

from fractions import Fraction


def budget_label(fraction: float) -> str:
    """A training budget (train.budgets) as a fraction of T, the way verdicts, progress lines, W&B keys and reports
    name it: 'T', 'T/2', '3T/4'. (A record's files name it by its steps: hyps/<key>.b<steps>.txt.)"""
    share = Fraction(fraction).limit_denominator(64)
    head = "T" if share.numerator == 1 else f"{share.numerator}T"
    return head if share.denominator == 1 else f"{head}/{share.denominator}"


__all__ = ["budget_label"]
