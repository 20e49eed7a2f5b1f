"""The paper's Table 3 (Vaswani et al., 2017): its numbers as the built-in study `table3` states them.

`ablations/study/builtin/table3.yaml` is their one home (each row's `paper:` entry); it is read here as package data,
not through the study code, so reports stay independent of training code. A results directory's study.json carries the
same numbers per row; this is the fallback for one written before it did."""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources

import yaml


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


def load_paper_table() -> dict[str, PaperRow]:
    """Row name -> the paper's numbers for it (rows of table3.yaml that have a `paper` entry)."""
    text = resources.files("ablate.ablations.study").joinpath("builtin/table3.yaml").read_text(encoding="utf-8")
    rows = yaml.safe_load(text)["rows"]
    return {
        r["name"]: PaperRow(
            row=r["name"],
            group=r["group"],
            ppl=r["paper"].get("ppl"),
            bleu=r["paper"].get("bleu"),
            params_m=r["paper"].get("params_m"),
        )
        for r in rows
        if r.get("paper")
    }
