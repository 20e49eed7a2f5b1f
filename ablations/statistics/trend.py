"""The trend of one comparison over a study's sizes (rungs: one study at several presets, smallest base first):
does the effect approach the paper's as the model grows? `classify` is the rule; the report that follows each
comparison over the rungs is `reports.trend`'s."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal

Trend = Literal["toward", "away", "flips", "mixed", "flat", "n/a"]

PAPER_FLOOR = 0.3
"""The smallest paper difference a ratio is taken to (as `reports.claims.paper_ratio`: a ratio to 0.1 BLEU says
little)."""


def ratio_text(ratio: float) -> str:
    """'10.5x', '-0.8x'; '0.0x', never '-0.0x', for a ratio that rounds to zero."""
    return f"{0.0 if round(ratio, 1) == 0 else ratio:.1f}x"


def classify(points: Sequence[tuple[float, float, float, float | None]], labels: Sequence[str]) -> tuple[Trend, str]:
    """The trend of one comparison over the rungs it was classified at, smallest base first: `points` are (effect,
    low, high, paper's difference) at T, the 95% interval [low, high]; `labels` name the rungs. Returns the trend
    and what it rests on.

    With r_i = effect_i / paper_i the ratio at rung i and h_i = (high_i - low_i) / 2 / |paper_i| its noise:

    - 'n/a': fewer than two rungs; or, unless it flips, a paper difference missing or below PAPER_FLOOR at some rung
      (there is no ratio to follow);
    - 'flips': two rungs whose intervals both exclude zero, on opposite sides (the paper's value plays no part);
    - otherwise each rung's distance from the paper's is |ln r_i| where r_i > 0, and a ratio at or below zero (the
      effect not on the paper's side) is farther than any positive ratio, the farther the more negative. A change
      between rungs i and j is *real* when |r_j - r_i| > sqrt(h_i^2 + h_j^2), and it goes toward or away as the
      distance falls or rises;
    - 'toward': a real change from the smallest rung to the largest that goes toward, and no real change away
      between neighbouring rungs; 'away' the mirror image;
    - 'mixed': real changes both ways between neighbouring rungs, or ends that change really one way while a
      neighbouring step changes really the other;
    - 'flat': no real change between the ends, nor opposite real steps.

    With two rungs the ends are the only step, so 'mixed' cannot occur.
    """
    # Why this rule. A sign change that both rungs' own intervals vouch for is the regime, whatever the sizes; it is
    # told first because it also moves the ratio. Otherwise the question is the reviewer's: is the largest model's
    # effect nearer the paper's than the smallest's, by more than the noise? The ratio is read on a log scale because
    # effects are quoted as multiples of the paper's (docs/findings/table3-builtin.md): 10x -> 2x and 0.1x -> 0.5x are
    # both moves toward it, and 3x -> 0.2x (the effect vanishing) is a move away. The noise test is that of the
    # difference of two independent estimates (the rungs are separate trials): the difference lies outside its own 95%
    # interval. They share the dev sentences, whose noise then partly cancels, so the test errs on the side of 'flat'.
    # The ends, not a fitted slope, carry the verdict: two or three points give a slope no usable error and assume a
    # shape; the neighbouring steps only keep a zig-zag from reading as a trend.
    if len(points) < 2:
        return "n/a", f"tested at {len(points)} rung{'s' * (len(points) != 1)}: a trend needs two"
    for i, (e_i, lo_i, hi_i, _) in enumerate(points):
        for j in range(i + 1, len(points)):
            e_j, lo_j, hi_j, _ = points[j]
            if (lo_i > 0 and hi_j < 0) or (hi_i < 0 and lo_j > 0):
                return "flips", f"{e_i:+.2f} at {labels[i]}, {e_j:+.2f} at {labels[j]}, both clear of 0" + _side(points)
    if any(paper is None or abs(paper) < PAPER_FLOOR for *_, paper in points):
        return "n/a", f"the paper's difference is missing or below {PAPER_FLOOR:g}: no ratio to follow"
    ratios = [(e / p, (hi - lo) / 2 / abs(p)) for e, lo, hi, p in points if p is not None]

    def step(i: int, j: int) -> int:
        """+1: a real change toward the paper's from rung i to j; -1: away; 0: within the noise (or level)."""
        (r_i, h_i), (r_j, h_j) = ratios[i], ratios[j]
        if abs(r_j - r_i) <= math.hypot(h_i, h_j):
            return 0
        d_i, d_j = _distance(r_i), _distance(r_j)
        return 1 if d_j < d_i else -1 if d_j > d_i else 0

    ends = step(0, len(ratios) - 1)
    steps = {step(i, i + 1) for i in range(len(ratios) - 1)}
    path = " -> ".join(ratio_text(r) for r, _ in ratios)
    if ends == 1 and -1 not in steps:
        return "toward", f"{path}: nearer the paper's beyond the noise"
    if ends == -1 and 1 not in steps:
        return "away", f"{path}: farther from the paper's beyond the noise"
    if {1, -1} <= steps or ends != 0:
        return "mixed", f"{path}: real changes both toward and away from the paper's"
    return "flat", f"{path}: no change beyond the noise"


def _side(points: Sequence[tuple[float, float, float, float | None]]) -> str:
    """'; the paper's sign at the largest rung' (or 'against ...') where its interval is clear of 0, else ''."""
    _, lo, hi, paper = points[-1]
    if paper is None or paper == 0 or lo <= 0 <= hi:
        return ""
    return (
        "; the paper's sign at the largest rung"
        if (lo > 0) == (paper > 0)
        else "; against the paper's sign at the largest rung"
    )


def _distance(ratio: float) -> tuple[int, float]:
    """How far a ratio is from 1 (the paper's value), ordered: (0, |ln r|) on the paper's side, (1, -r) off it."""
    return (0, abs(math.log(ratio))) if ratio > 0 else (1, -ratio)


__all__ = ["PAPER_FLOOR", "Trend", "classify", "ratio_text"]
