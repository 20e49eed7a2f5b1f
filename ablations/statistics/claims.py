"""Claims as the statistics read them: a claim is one or more comparisons of a row against a reference row (the base
by default) on one metric, with the direction it expects (`higher`, `lower`), an equivalence margin (`same`) or a
non-inferiority margin (`no_worse`). Reading and checking a claims file is the study definition's job
(`ablations.study.claims`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Protocol

Expect = Literal["higher", "lower", "same", "no_worse"]
EXPECTS = ("higher", "lower", "same", "no_worse")
MARGINED = ("same", "no_worse")
"""The expectations judged against a margin rather than a sign."""


class Metric(Protocol):
    """What the verdicts need to know of a metric: which way is better, and how to name and round an effect in it.
    `ablate.lightning_modules.metrics.METRICS` holds the ones a study scores; the statistics are handed it."""

    @property
    def label(self) -> str: ...
    @property
    def digits(self) -> int: ...
    @property
    def higher_is_better(self) -> bool: ...


@dataclass(frozen=True, kw_only=True)
class Comparison:
    """One testable statement: `row`'s `metric` is higher / lower than `against`'s, the same within `margin`, or no
    worse than it by more than `margin` (the metric's own direction says which way is worse)."""

    row: str
    """The row the comparison tests."""
    metric: str
    """'bleu', 'chrf' or 'ppl' (`lightning_modules.metrics.METRICS`)."""
    expect: Expect
    """'higher' or 'lower': the sign of the row's value minus `against`'s, whatever the metric's direction (D3's
    perplexity is `lower`); 'same': within `margin` either way; 'no_worse': worse, in the metric's own direction, by
    no more than `margin`."""
    against: str | None = None
    """Reference row; None: the study's base."""
    margin: float | None = None
    """Equivalence or non-inferiority margin in the metric's units (expect: same or no_worse only)."""


@dataclass(frozen=True, kw_only=True)
class Claim:
    """A claim of the paper (or of the user) and the comparisons that test it."""

    id: str
    """A short name, unique in the study (`C-depth`); the report and `ablate compare --claims` match claims by it."""
    text: str
    """The claim in words, as the report prints it beside its verdict."""
    section: str = ""
    """Where the paper (or the literature) makes it (`6.2`), shown beside the text."""
    compare: tuple[Comparison, ...]
    """The comparisons that test it, each `{row, metric, expect, against, margin}` in the file; the claim's verdict
    combines theirs (`ablations.statistics.verdicts`)."""


__all__ = ["EXPECTS", "MARGINED", "Claim", "Comparison", "Expect", "Metric"]
