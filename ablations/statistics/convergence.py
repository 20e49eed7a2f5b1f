"""Did a trial reach its plateau? Read from its validation curve, so a table never passes off an untrained or a
diverged model as a result.

A trial is at its plateau when dev BLEU moved by less than PLATEAU_BLEU between its last two validations, on the
same dev sentences (the final validation also scores the subset the periodic ones decode: `bleu_tracked`), and its
dev perplexity fell by less than PLATEAU_PPL. It is *rising* when BLEU still gained that much, or when perplexity
still fell that much (a model that has not started to translate has a flat BLEU of 0 while it learns; measured:
docs/reference/code-figures.md, "ablations/statistics/convergence.py"), *falling* when BLEU
lost that much (over-fitting or instability), and *diverged* when training failed as diverged or its dev perplexity
ended above that of a uniform guess over the vocabulary (a finite blow-up). The state is information for the reader:
a verdict is withheld for a diverged row, not for one still rising (verdicts are checked across training budgets
instead).

Did a trial learn to translate? Its `source_ppl_ratio` (dev perplexity with every sentence's source swapped for
another dev sentence's, over the true dev perplexity) says whether its predictions use the source at all: a model
below SOURCE_RATIO_MIN learnt a language model of the target, not a translation. When the base is below it, the
study learnt nothing and gives no verdict at all; a row well below the base's own source use at a budget
(`trainable_threshold`) is *not trainable at this preset* there: it never left the language-model plateau, so it
says nothing about the paper's claim, and no verdict rests on it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

PLATEAU_BLEU = 1.0
"""Largest BLEU change between the last two validations of a trial at its plateau."""
PLATEAU_PPL = 0.05
"""Largest relative fall of dev perplexity between the last two validations of a trial at its plateau: above what
rows whose BLEU had settled still fell at the tiny preset, below what a model still learning falls (measured:
docs/reference/code-figures.md, "ablations/statistics/convergence.py")."""

SOURCE_RATIO_MIN = 2.0
"""Lowest source_ppl_ratio of a model that learnt to translate: the right source must at least halve its dev
perplexity (be worth log 2 = 0.69 nats per target token). A model that learnt only a language model of the target
scores about 1, since swapping sources changes nothing it uses; one that translates scores far above, as the right
source makes most target tokens predictable. 2 lies well clear of both, so neither noise in the swap nor a weak but
real translator is misjudged."""


def trainable_threshold(base_ratio: float) -> float:
    """The lowest source_ppl_ratio of a row this preset trained, given the base's at the same budget: the midpoint on
    the log scale between a language model of the target (x1) and the base (sqrt of the base's ratio), and never
    below SOURCE_RATIO_MIN. Calibrated on the base alone, so it follows the corpus (values on two corpora:
    docs/reference/code-figures.md, "ablations/statistics/convergence.py"). A row below it
    at a budget has not left the language-model plateau there, however well the base did: 'not trainable at this
    preset'."""
    return max(SOURCE_RATIO_MIN, base_ratio**0.5)


class Trial(Protocol):
    """What these rules read of a finished trial (`ablations.results.record.Record` is one): its state, the reason it
    failed, its config, its dev metrics and its curves."""

    @property
    def state(self) -> str: ...
    @property
    def reason(self) -> str | None: ...
    @property
    def config(self) -> dict[str, Any]: ...
    @property
    def metrics(self) -> dict[str, Any]: ...
    @property
    def curves(self) -> dict[str, list[dict[str, Any]]]: ...


State = Literal["plateau", "rising", "falling", "diverged", "unknown"]


@dataclass(frozen=True, kw_only=True)
class Convergence:
    state: State
    delta: float | None = None
    """BLEU at the last validation minus BLEU at the one before, on the same sentences."""
    ppl_change: float | None = None
    """Relative change of dev perplexity between the last two validations (-0.07: fell by 7%)."""
    detail: str = ""

    @property
    def text(self) -> str:
        """'yes', 'rising +2.3', 'diverged', ... for a table cell."""
        if self.state == "plateau":
            return "yes"
        if self.state == "rising" and self.ppl_change is not None and abs(self.delta or 0.0) < PLATEAU_BLEU:
            return f"rising (PPL {self.ppl_change:+.0%})"
        if self.delta is not None and self.state in ("rising", "falling"):
            return f"{self.state} {self.delta:+.1f}"
        return self.state


def _bleu(point: dict) -> float | None:
    value = point.get("bleu_tracked", point.get("bleu"))
    return float(value) if value is not None else None


def convergence(record: Trial) -> Convergence:
    """Where one finished trial stands (see the module docstring)."""
    if record.state == "failed" and (record.reason or "").startswith("diverged"):
        return Convergence(state="diverged", detail=record.reason or "")
    if record.state != "complete":
        return Convergence(state="unknown", detail=f"trial {record.state}")
    vocab = (record.config.get("model") or {}).get("vocab_size")
    ppl = record.metrics.get("ppl")
    if vocab and ppl is not None and float(ppl) > float(vocab):
        return Convergence(state="diverged", detail=f"dev PPL {float(ppl):.3g} is above the uniform guess ({vocab})")
    points = [p for p in record.curves.get("val", []) if _bleu(p) is not None]
    if len(points) < 2:
        return Convergence(state="unknown", detail="fewer than two validations with BLEU: lower train.val_every")
    last, before = _bleu(points[-1]), _bleu(points[-2])
    assert last is not None and before is not None  # `points` keeps the validations with BLEU
    delta = last - before
    steps = f"steps {points[-2].get('step')} -> {points[-1].get('step')}"
    if delta >= PLATEAU_BLEU:
        return Convergence(state="rising", delta=delta, detail=f"BLEU {delta:+.2f} over {steps}: train longer")
    if delta <= -PLATEAU_BLEU:
        return Convergence(state="falling", delta=delta, detail=f"BLEU {delta:+.2f} over {steps}")
    before, after = points[-2].get("ppl"), points[-1].get("ppl")
    if before and after is not None and float(after) / float(before) - 1 < -PLATEAU_PPL:
        change = float(after) / float(before) - 1
        detail = f"BLEU {delta:+.2f} but dev PPL {float(before):.3g} -> {float(after):.3g} over {steps}: train longer"
        return Convergence(state="rising", delta=delta, ppl_change=change, detail=detail)
    return Convergence(state="plateau", delta=delta, detail=f"BLEU {delta:+.2f} over {steps}")


def row_convergence(records: Sequence[Trial]) -> Convergence | None:
    """The row's state: its worst trial's (diverged > falling > rising > unknown > plateau), None without trials."""
    if not records:
        return None
    rank = {"diverged": 0, "falling": 1, "rising": 2, "unknown": 3, "plateau": 4}
    states = [convergence(r) for r in records]
    return min(states, key=lambda c: (rank[c.state], -abs(c.delta or 0.0)))


def source_ratio(records: Sequence[Trial]) -> float | None:
    """The lowest source_ppl_ratio over the complete records that have one (their budget's), None if none has."""
    ratios = [float(r.metrics["source_ppl_ratio"]) for r in records if r.metrics.get("source_ppl_ratio") is not None]
    return min(ratios) if ratios else None


__all__ = [
    "PLATEAU_BLEU",
    "PLATEAU_PPL",
    "SOURCE_RATIO_MIN",
    "Convergence",
    "convergence",
    "row_convergence",
    "trainable_threshold",
    "source_ratio",
]
