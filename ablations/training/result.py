"""A trial's files: its result.json (`TrainResult`, read and written here only) and, once it is scored, its
`Record` with the hypotheses and references written under OUT (`scored`, `write_outputs`).

result.json lies in the run's own folder (OUT/trials/<key>/, or `ablate train`'s --out; a budget's branch has one
in b<steps>/): rank 0 writes it when the fit ends and again when test scores or budgets join it, and a resumed run
reads it back to skip what had finished. No torch or Lightning import here.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ablate.ablations.results.record import Budget, Layout, Record, key_of
from ablate.data.atomic import write_json_atomic, write_text_atomic

RESULT_FILE = "result.json"


@dataclass
class TrainResult:
    """What one finished run produced (rank 0's view); its result.json, as `read` and `write` have it."""

    metrics: dict[str, Any]
    curves: dict[str, list[dict[str, Any]]]
    hypotheses: list[str]
    references: list[str]
    wandb: dict[str, Any] = field(default_factory=dict)
    sentences: dict[str, list[float]] = field(default_factory=dict)
    """Per dev sentence, in dev order: 'nll' (summed over its target tokens) and 'ntok'."""
    test_hypotheses: list[str] = field(default_factory=list)
    """The test split decoded by the final (or averaged) weights, in test order; empty when not decoded
    (train.test_eval off, or a run stopped before max_steps)."""
    test_references: list[str] = field(default_factory=list)
    """The raw test references, same order; empty when the test split was not decoded."""
    budgets: list[dict[str, Any]] = field(default_factory=list)
    """The shorter budgets of train.budgets, each scored by its own annealed branch of the run: {'fraction',
    'steps', 'metrics', 'hypotheses', 'sentences', 'test_hypotheses'}, the fields above at that budget."""

    @staticmethod
    def path(run_dir: Path) -> Path:
        """The run's result.json: where every reader and writer finds it."""
        return Path(run_dir) / RESULT_FILE

    @classmethod
    def read(cls, run_dir: Path) -> TrainResult:
        """The result the run in `run_dir` wrote (OSError without one, ValueError or TypeError for a damaged one)."""
        return cls(**json.loads(cls.path(run_dir).read_text(encoding="utf-8")))

    def write(self, run_dir: Path) -> None:
        """Write (atomically) as the result of the run in `run_dir`."""
        write_json_atomic(self.path(run_dir), dataclasses.asdict(self))


def scored(record: Record, result: TrainResult | None, layout: Layout) -> Record:
    """The trial's record, complete with what its training returned: metrics, curves, its W&B run, and the files
    written under OUT (`write_outputs`). The one place a trial's result becomes its `Record`."""
    if result is None:
        raise RuntimeError("training returned no result (not rank 0?)")
    files = write_outputs(result, layout, key_of(record.row, record.seed))
    return replace(
        record, state="complete", reason=None, metrics=result.metrics, curves=result.curves, wandb=result.wandb,
        **files,
    )  # fmt: skip


def write_outputs(result: TrainResult, layout: Layout, stem: str) -> dict[str, Any]:
    """Write the dev hypotheses (one per line, dev order) and references of a trial under OUT, and the test ones when
    the test split was decoded (hyps/<stem>.test.txt, refs/test.txt). Each shorter budget's files are
    hyps/<stem>.b<steps>.*. Returns the `Record` fields naming them, and its `budgets`."""
    references = layout.references("valid")
    if not references.exists():
        write_text_atomic(references, "\n".join(result.references) + "\n")
    files: dict[str, Any] = {"references": references}
    files |= _write_hypotheses(layout, stem, result.hypotheses, result.sentences, result.test_hypotheses)
    if result.test_hypotheses:
        test_references = layout.references("test")
        if not test_references.exists():
            write_text_atomic(test_references, "\n".join(result.test_references) + "\n")
        files["test_references"] = test_references
    files["budgets"] = tuple(
        Budget(
            fraction=b["fraction"],
            steps=b["steps"],
            metrics=b["metrics"],
            **_write_hypotheses(layout, f"{stem}.b{b['steps']}", b["hypotheses"], b["sentences"], b["test_hypotheses"]),
        )
        for b in result.budgets
    )
    return files


def _write_hypotheses(
    layout: Layout, stem: str, hypotheses: list[str], sentences: dict[str, list[float]], test: list[str]
) -> dict[str, Path]:
    """hyps/<stem>.txt, .nll.tsv (per dev sentence: summed NLL <tab> target tokens) and .test.txt."""
    files = {"hypotheses": layout.hypotheses(stem)}
    write_text_atomic(files["hypotheses"], "\n".join(hypotheses) + "\n")
    nll, ntok = sentences.get("nll"), sentences.get("ntok")
    if nll and ntok and len(nll) == len(ntok) == len(hypotheses):
        files["sentence_nll"] = layout.hypotheses(stem, "nll")
        write_text_atomic(
            files["sentence_nll"], "".join(f"{a:.6g}\t{int(b)}\n" for a, b in zip(nll, ntok, strict=True))
        )
    if test:
        files["test_hypotheses"] = layout.hypotheses(stem, "test")
        write_text_atomic(files["test_hypotheses"], "\n".join(test) + "\n")
    return files


__all__ = ["RESULT_FILE", "TrainResult", "scored", "write_outputs"]
