"""The paper's Table 3 (Vaswani et al., 2017), shipped as package data (`reports/paper_table3.csv`)."""

from __future__ import annotations

import csv
from dataclasses import dataclass
from importlib import resources


@dataclass(frozen=True, kw_only=True)
class PaperRow:
    """One row of the paper's Table 3: its dev results on EN-DE newstest2013 (single runs, no error bars)."""

    row: str
    """Row name as we call it ('base', 'A1', ..., 'big')."""
    group: str
    """Row group ('base', 'A'-'E', 'big')."""
    ppl: float | None
    """Dev perplexity per wordpiece (shared BPE vocabulary of about 37000)."""
    bleu: float | None
    """Dev BLEU."""
    params_m: float | None
    """Parameters x10^6, where the paper gives them."""


def _number(text: str) -> float | None:
    return float(text) if text.strip() else None


def load_paper_table() -> dict[str, PaperRow]:
    """Row name -> the paper's numbers for it."""
    text = resources.files("reports").joinpath("paper_table3.csv").read_text(encoding="utf-8")
    lines = [line for line in text.splitlines() if line and not line.startswith("#")]
    return {
        r["row"]: PaperRow(
            row=r["row"],
            group=r["group"],
            ppl=_number(r["PPL_dev"]),
            bleu=_number(r["BLEU_dev"]),
            params_m=_number(r["params_M"]),
        )
        for r in csv.DictReader(lines)
    }
