"""Is a row's BLEU really different from the base's? Paired bootstrap resampling on the same dev set (Koehn, 2004).

We use sacrebleu's own test (`sacrebleu.significance.PairedTest`, test_type='bs', the port of Moses'
`bootstrap-hypothesis-difference-significance.pl`) rather than writing one. Seeds are paired: row@seed s is tested
against base@seed s, sentence by sentence on the same dev references. A row is marked only when the difference
is significant for every paired seed and has the same sign on all of them, so one lucky seed cannot earn a mark.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from reports.results import Record

ALPHA = 0.05
"""A difference is marked when p < ALPHA on every paired seed."""
MARKS = ((0.01, "‡"), (ALPHA, "†"))
"""(threshold, mark), strictest first: ‡ p < 0.01, † p < 0.05 (largest p over paired seeds)."""
N_SAMPLES = 1000
"""Bootstrap resamples (sacrebleu's default for the paired bootstrap)."""


@dataclass(frozen=True, kw_only=True)
class Significance:
    """The paired bootstrap test of one row against the base, over the seeds both have."""

    p_values: dict[int, float] = field(default_factory=dict)
    """seed -> p-value of the test on that seed."""
    deltas: dict[int, float] = field(default_factory=dict)
    """seed -> corpus BLEU of the row minus that of the base on that seed (sacrebleu, as tested)."""
    note: str | None = None
    """Why the row could not be tested (no paired seed, missing or mismatched hypotheses), else None."""

    @property
    def p_value(self) -> float | None:
        """The largest p over paired seeds (the row is as significant as its weakest seed), or None if untested."""
        return max(self.p_values.values()) if self.p_values else None

    @property
    def consistent(self) -> bool:
        """True when the difference has the same sign on every paired seed."""
        signs = {d > 0 for d in self.deltas.values() if d != 0}
        return len(signs) == 1 and all(d != 0 for d in self.deltas.values())

    @property
    def mark(self) -> str:
        """'‡' (p < 0.01), '†' (p < 0.05) on every paired seed with a consistent sign, else ''."""
        p = self.p_value
        if p is None or not self.consistent:
            return ""
        return next((mark for threshold, mark in MARKS if p < threshold), "")


def read_lines(path: Path) -> list[str]:
    """The lines of a hypotheses/references file (one segment per line; empty segments kept)."""
    text = path.read_text(encoding="utf-8")
    lines = text.split("\n")
    return lines[:-1] if text.endswith("\n") else lines


def _bleu_metric(signature: str | None):
    """A sacrebleu BLEU configured like the one that scored the records (tokenizer and case from the signature)."""
    from sacrebleu.metrics import BLEU

    fields = dict(part.split(":", 1) for part in (signature or "").split("|") if ":" in part)
    return BLEU(tokenize=fields.get("tok", "13a"), lowercase=fields.get("case") == "lc")


def paired_test(
    baseline: list[str],
    systems: dict[str, list[str]],
    refs: list[str],
    *,
    signature: str | None = None,
    n_samples: int = N_SAMPLES,
) -> dict[str, tuple[float, float]]:
    """sacrebleu's paired bootstrap of each system against `baseline` on the same references.

    Returns name -> (p-value, BLEU(system) - BLEU(baseline)). The resampled indices are shared by all systems
    (sacrebleu seeds its RNG from SACREBLEU_SEED, 12345 by default), so results are reproducible.
    """
    from sacrebleu.significance import PairedTest

    # Identical outputs are not a difference: p = 1. (sacrebleu's p-value counts resamples with a strictly larger
    # difference, which gives its smallest p, 1/(n+1), to a system tested against itself.)
    results = {name: (1.0, 0.0) for name, hyps in systems.items() if hyps == baseline}
    named = [("__baseline__", baseline), *((n, h) for n, h in systems.items() if n not in results)]
    if len(named) > 1:
        test = PairedTest(named, {"BLEU": _bleu_metric(signature)}, [refs], test_type="bs", n_samples=n_samples)
        _, scores = test()
        base_score = scores["BLEU"][0].score
        for name, result in zip(scores["System"][1:], scores["BLEU"][1:], strict=True):
            results[name] = (float(result.p_value), float(result.score - base_score))
    return {name: results[name] for name in systems}


def paired_bootstrap_vs_base(
    base: list[Record], rows: dict[str, list[Record]], *, n_samples: int = N_SAMPLES
) -> dict[str, Significance]:
    """Test every row's complete records against the base's, seed by seed; row name -> Significance."""
    p_values: dict[str, dict[int, float]] = defaultdict(dict)
    deltas: dict[str, dict[int, float]] = defaultdict(dict)
    problems: dict[str, str] = {}

    for base_record in sorted(base, key=lambda r: r.seed):
        seed = base_record.seed
        if base_record.hypotheses is None or base_record.references is None:
            continue
        if not base_record.hypotheses.is_file() or not base_record.references.is_file():
            continue
        refs = read_lines(base_record.references)
        base_hyps = read_lines(base_record.hypotheses)
        if len(base_hyps) != len(refs):
            continue
        systems: dict[str, list[str]] = {}
        for name, records in rows.items():
            record = next((r for r in records if r.seed == seed), None)
            if record is None:
                continue
            problem = check_pair(record, base_record)
            if problem:
                problems.setdefault(name, problem)
                continue
            systems[name] = read_lines(record.hypotheses)  # type: ignore[arg-type]
        if not systems:
            continue
        signature = base_record.metrics.get("bleu_signature")
        for name, (p, delta) in paired_test(base_hyps, systems, refs, signature=signature, n_samples=n_samples).items():
            p_values[name][seed] = p
            deltas[name][seed] = delta

    results: dict[str, Significance] = {}
    for name in rows:
        if p_values.get(name):
            results[name] = Significance(p_values=p_values[name], deltas=deltas[name])
        else:
            note = problems.get(name) or "no seed where both this row and the base have dev hypotheses"
            results[name] = Significance(note=note)
    return results


def check_pair(record: Record, base: Record) -> str | None:
    """Why `record` cannot be paired with `base` sentence by sentence on the same dev set, or None if it can."""
    if record.hypotheses is None or not record.hypotheses.is_file():
        return f"{record.label}: no dev hypotheses file"
    if base.hypotheses is None or not base.hypotheses.is_file():
        return f"{base.label}: no dev hypotheses file"
    if base.references is None or not base.references.is_file():
        return f"{base.label}: no dev references file"
    if record.references is not None and record.references != base.references:
        if not record.references.is_file() or read_lines(record.references) != read_lines(base.references):
            return f"{record.label}: dev references differ from those of {base.label}"
    n_refs = len(read_lines(base.references))
    n_hyps = len(read_lines(record.hypotheses))
    if n_hyps != n_refs:
        return f"{record.label}: {n_hyps} hypotheses for {n_refs} references"
    return None
