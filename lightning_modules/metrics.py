"""The dev and test metrics, named once: what each is called, how reports label and round it, which way is better,
and how it is computed from a corpus (BLEU and chrF by sacreBLEU, perplexity from the per-token NLL).

Training scores through here (`module.TranslationModule`), and so do claims (`ablations.study.claims`) and the reports'
resampled scores (`ablations.results.scores`), so a trial's number and a report's recomputation are the same metric.
Pure functions on numbers and strings: no torch, Lightning or sacreBLEU import at module level (reports import this).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

NLL_CAP = 50.0
"""Perplexity is exp(NLL) with the NLL capped here (exp(50) ~ 5e21): a diverged run's NLL stays a finite number."""


@dataclass(frozen=True)
class MetricSpec:
    """A metric a claim or report can name: how reports label it, round it, and which way is better."""

    name: str
    label: str
    digits: int
    """Decimals reports show it to (tables, claims, the training log)."""
    higher_is_better: bool
    paper_digits: int | None = None
    """Decimals the paper's Table 3 prints it to (BLEU 1, PPL 2): the paper's column, and our numbers in the LaTeX
    table that sits beside it in a paper. None: as `digits`."""


METRICS = {
    "bleu": MetricSpec("bleu", "BLEU", 2, True, paper_digits=1),
    "chrf": MetricSpec("chrf", "chrF", 1, True),
    "ppl": MetricSpec("ppl", "PPL", 2, False, paper_digits=2),
}
"""The metrics a claim or test can name (`ablations.statistics.significance` scores and tests each)."""


def perplexity(nll: float) -> float:
    """Perplexity from the mean per-token NLL (nats): exp(nll), capped at exp(`NLL_CAP`). Of a difference of two
    mean NLLs on the same tokens, it is the ratio of their perplexities."""
    return math.exp(min(nll, NLL_CAP))


def bleu_metric(signature: str | None = None, references: list[str] | None = None):
    """sacreBLEU's BLEU: its defaults (13a tokenizer, mixed case), or configured like the one whose signature is
    given (tokenizer and case read from it). The one place a BLEU is built. With `references` (one per segment),
    sacreBLEU preprocesses them once and scores every later system against them (`references=None` there)."""
    from sacrebleu.metrics.bleu import BLEU  # lazy: sacreBLEU only to score; reports read this module

    fields = dict(part.split(":", 1) for part in (signature or "").split("|") if ":" in part)
    refs = [references] if references is not None else None
    return BLEU(tokenize=fields.get("tok", "13a"), lowercase=fields.get("case") == "lc", references=refs)


def chrf_metric(references: list[str] | None = None):
    """sacreBLEU's chrF with its defaults (character 6-grams, beta 2). The one place a chrF is built; `references`
    as for `bleu_metric`."""
    from sacrebleu.metrics.chrf import CHRF  # lazy: sacreBLEU only to score; reports read this module

    return CHRF(references=[references] if references is not None else None)


def corpus_score(metric: Any, hypotheses: list[str], references: list[str]) -> tuple[float, str]:
    """`metric`'s (`bleu_metric()` or `chrf_metric()`) corpus score of the hypotheses against one reference each,
    and its signature."""
    score = metric.corpus_score(hypotheses, [references]).score
    return score, str(metric.get_signature())


def chrf_signature() -> str:
    """sacreBLEU's chrF signature (it names the number of references, so the metric must have scored once)."""
    metric = chrf_metric()
    metric.corpus_score(["a"], [["a"]])
    return str(metric.get_signature())


__all__ = [
    "METRICS",
    "NLL_CAP",
    "MetricSpec",
    "bleu_metric",
    "chrf_metric",
    "chrf_signature",
    "corpus_score",
    "perplexity",
]
