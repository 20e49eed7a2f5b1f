"""Dev metrics of a finished trial, at the corpus and the sentence level: BLEU and chrF through sacreBLEU (each
with its signature), perplexity from the per-sentence NLL the trial wrote. The statistical tests (`ablations.stats`)
resample these per-sentence statistics.

The statistics of a hypotheses file are kept on disk ($ABLATE_CACHE/scores, by the contents of the hypotheses and
references, the metric, its signature and sacreBLEU's version), so a report or comparison run again reads them
instead of scoring every system's 8000 sentences again: about 0.6 s a system and metric, minutes for two studies."""

from __future__ import annotations

import functools
import io
import time
from collections.abc import Callable, Iterable
from pathlib import Path

import numpy as np
from ablate.ablations.record import Record
from ablate.ablations.stats import SystemScores
from ablate.data.cache import cache_root, file_digest, make_key, write_atomic
from ablate.lightning_modules.metrics import bleu_metric, chrf_metric, chrf_signature, perplexity


def read_lines(path: Path) -> list[str]:
    """The lines of a hypotheses/references file (one segment per line; empty segments kept)."""
    text = path.read_text(encoding="utf-8")
    lines = text.split("\n")
    return lines[:-1] if text.endswith("\n") else lines


@functools.cache
def _lines(path: Path, mtime: float) -> tuple[str, ...]:
    return tuple(read_lines(path))


def _read(path: Path | None) -> list[str] | None:
    if path is None or not path.is_file():
        return None
    return list(_lines(path, path.stat().st_mtime))


@functools.cache
def _scorer(kind: str, signature: str | None, ref_path: Path, stamp: float):
    """sacreBLEU's metric with `ref_path`'s references preprocessed once. A study's systems share their references:
    preprocessing them again for each (sacreBLEU's default when they are passed in) was 44% of a claims comparison
    of two studies' 170 systems."""
    refs = _read(ref_path)
    return bleu_metric(signature, refs) if kind == "bleu" else chrf_metric(refs)


@functools.cache
def _corpus_stats(kind: str, signature: str | None, hyp_path: Path, ref_path: Path, stamp: tuple) -> tuple:
    """Per-sentence sufficient statistics and the corpus score of one hypotheses file against its references.

    sacreBLEU's `_extract_corpus_statistics` / `_compute_score_from_stats` are what its own paired tests use to
    resample sentences; calling them keeps our bootstrap exactly sacreBLEU's metric, smoothing and all."""
    hyps, refs = _read(hyp_path), _read(ref_path)
    if hyps is None or refs is None or len(hyps) != len(refs):
        return None, None, None
    stored = _stored_stats(kind, signature, hyp_path, ref_path)
    stats = _load(stored)
    if stats is None or len(stats) != len(hyps):
        stats = segment_statistics(kind, signature, ref_path, hyps)
        _save(stored, stats)
    metric = bleu_metric(signature) if kind == "bleu" else chrf_metric()
    score = metric._compute_score_from_stats(stats.sum(0).tolist()).score
    return stats, (lambda sums: metric._compute_score_from_stats(sums.tolist()).score), score


_SEGMENTS: dict[tuple, dict[tuple[int, str], tuple]] = {}
"""(metric, signature, references, their mtime) -> (sentence, hypothesis) -> its statistics, for this process."""


def segment_statistics(kind: str, signature: str | None, ref_path: Path, hyps: list[str], lo: int = 0,
                       hi: int | None = None) -> np.ndarray:  # fmt: skip
    """sacreBLEU's per-sentence statistics of `hyps[lo:hi]` against the references, each (sentence, hypothesis)
    scored once in this process: a study's systems share most of their sentences (table3-tiny's 146 dev systems:
    27% of their 1.17M sentences are distinct), so a first report scores about a quarter of them.

    The loop of sacreBLEU's `Metric._extract_corpus_statistics` (preprocess the segment, then
    `_compute_segment_statistics` against the cached reference), one segment at a time so that a segment seen before
    is not scored again; the values are sacreBLEU's own, and a test holds them equal to `_extract_corpus_statistics`.
    Its warning about tokenized input is left out (our hypotheses are detokenized by SentencePiece)."""
    stamp = ref_path.stat().st_mtime
    scorer = _scorer(kind, signature, ref_path, stamp)
    memo = _SEGMENTS.setdefault((kind, signature, ref_path, stamp), {})
    refs = scorer._ref_cache
    rows = []
    for i in range(lo, len(hyps) if hi is None else hi):
        row = memo.get((i, hyps[i]))
        if row is None:
            row = memo[(i, hyps[i])] = tuple(scorer._compute_segment_statistics(scorer._preprocess_segment(hyps[i]),
                                                                                refs[i]))  # fmt: skip
        rows.append(row)
    return np.asarray(rows, dtype=np.float64).reshape(len(rows), -1)


def forget_segments() -> None:
    """Drop the per-sentence memo (`segment_statistics`) once a study's systems are scored: the cache on disk keeps
    what a later run reads."""
    _SEGMENTS.clear()


def _stored_stats(kind: str, signature: str | None, hyp_path: Path, ref_path: Path) -> Path:
    """Where the statistics of these hypotheses against these references are kept: named by their contents, so a
    changed file (or sacreBLEU) is a new entry and an old entry is never read for it."""
    import sacrebleu

    root = cache_root(None)  # the digests are memoised there by path and mtime: a study's references are read once
    digests = [file_digest(p, root) for p in (hyp_path, ref_path)]
    return root / "scores" / f"{make_key(kind, signature, sacrebleu.__version__, *digests)}.npz"


def _load(path: Path) -> np.ndarray | None:
    try:
        with np.load(path, allow_pickle=False) as stored:
            return stored["stats"].astype(np.float64)
    except (OSError, ValueError, KeyError):  # absent, or unreadable: scored again (and written again)
        return None


def _save(path: Path, stats: np.ndarray) -> None:
    """Counts as int32 (sacreBLEU's statistics are integers), compressed (30-90 KB for 8000 sentences),
    atomically; a cache that cannot be written (read-only home, full disk) only costs the next run the time."""
    counts = stats.astype(np.int32)
    buffer = io.BytesIO()
    np.savez_compressed(buffer, stats=counts if np.array_equal(counts, stats) else stats)
    try:
        write_atomic(path, buffer.getvalue())
    except OSError:
        pass


def _stamp(*paths: Path) -> tuple:
    return tuple(p.stat().st_mtime for p in paths)


def system_scores(record: Record, metric: str) -> SystemScores | None:
    """The record's dev score on `metric` ('bleu', 'chrf', 'ppl') with per-sentence statistics where available."""
    if metric == "ppl":
        return _ppl_scores(record)
    hyp, ref = record.hypotheses, record.references
    if hyp is None or ref is None or not hyp.is_file() or not ref.is_file():
        value = record.metrics.get(metric)
        return SystemScores(score=float(value)) if value is not None else None
    signature = record.metrics.get("bleu_signature") if metric == "bleu" else None
    stats, scorer, score = _corpus_stats(metric, signature, hyp, ref, _stamp(hyp, ref))
    if stats is None:
        value = record.metrics.get(metric)
        return SystemScores(score=float(value)) if value is not None else None
    # The table reports the trial's own BLEU (identical: same hypotheses, same metric); chrF exists only here.
    reported = record.metrics.get("bleu") if metric == "bleu" else None
    return SystemScores(score=float(reported if reported is not None else score), stats=stats, scorer=scorer)


def score_ahead(records: Iterable[Record], say: Callable[[str], None] | None = None, after_s: float = 5.0) -> None:
    """Score every record's dev translations (BLEU and chrF, per sentence) before a table needs them, saying how far
    it is every few seconds once it has taken `after_s`: a study not reported before scores 8000 sentences a system
    and metric (about 0.6 s each, minutes for a study), one reported before reads them from the disk in a second."""
    todo = [(r, m) for r in records if r.hypotheses is not None for m in ("bleu", "chrf")]
    start = last = time.monotonic()
    if _score_in_processes(todo, say):  # the uncached ones on every core, each into the cache
        if say is not None:
            say(f"scoring the dev translations per sentence (BLEU, chrF): {len(todo)}/{len(todo)}, done in "
                f"{time.monotonic() - start:.0f} s")  # fmt: skip
        return
    for done, (record, metric) in enumerate(todo, 1):
        system_scores(record, metric)
        now = time.monotonic()
        if say is not None and now - start >= after_s and (now - last >= after_s or done == len(todo)):
            left = (now - start) / done * (len(todo) - done)
            more = f"about {left:.0f} s left" if done < len(todo) else f"done in {now - start:.0f} s"
            say(f"scoring the dev translations per sentence (BLEU, chrF): {done}/{len(todo)}, {more}")
            last = now
    forget_segments()


def _score_in_processes(todo: list[tuple[Record, str]], say: Callable[[str], None] | None = None) -> bool:
    """Score the systems whose statistics are not cached yet in worker processes, writing them to the cache.
    sacreBLEU is pure Python (one core scores a system and metric in about 0.6 s, a study's 300 in minutes), and most
    sentences recur across a study's systems (`segment_statistics`): each process takes one share of the sentences
    of every system, so that a sentence it has seen is not scored again. False (nothing done) when there are fewer
    than 4 systems to score or only one core."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    from ablate.ablations import environment

    cores = environment.cpu_cores()
    groups: dict[tuple, list[Path]] = {}
    for record, metric in todo:
        hyp, ref = record.hypotheses, record.references
        if hyp is None or ref is None or not hyp.is_file() or not ref.is_file():
            continue
        signature = record.metrics.get("bleu_signature") if metric == "bleu" else None
        if not _stored_stats(metric, signature, hyp, ref).is_file() and len(_read(hyp) or []) == len(_read(ref) or []):
            groups.setdefault((metric, signature, ref), []).append(hyp)  # (other lengths: refused where they are read)
    count = sum(len(hyps) for hyps in groups.values())
    if cores < 2 or count < 4:
        return False
    if say is not None:
        say(f"scoring the dev translations per sentence (BLEU, chrF): {count} not cached, on {cores} cores")
    context = multiprocessing.get_context("fork" if "fork" in multiprocessing.get_all_start_methods() else None)
    with ProcessPoolExecutor(max_workers=cores, mp_context=context) as pool:
        for (metric, signature, ref), hyps in groups.items():
            n = len(_read(ref) or [])
            cuts = sorted({n * k // cores for k in range(cores + 1)})
            jobs = [(metric, signature, ref, hyps, lo, hi) for lo, hi in zip(cuts, cuts[1:], strict=False)]
            parts = list(pool.map(_score_share, jobs))
            for i, hyp in enumerate(hyps):
                _save(_stored_stats(metric, signature, hyp, ref), np.concatenate([part[i] for part in parts]))
    return True


def _score_share(job: tuple) -> list[np.ndarray]:
    """One share of the sentences (`lo` to `hi`) of every system in `hyps` (a worker process of
    `_score_in_processes`)."""
    kind, signature, ref, hyps, lo, hi = job
    out = [segment_statistics(kind, signature, ref, _read(path) or [], lo, hi) for path in hyps]
    forget_segments()
    return out


def _ppl_scores(record: Record) -> SystemScores | None:
    value = record.metrics.get("ppl")
    if value is None:
        return None
    lines = _read(record.sentence_nll)
    if not lines:
        return SystemScores(score=float(value))
    stats = np.array([[float(x) for x in line.split("\t")] for line in lines], dtype=np.float64)  # (n, [nll, ntok])
    return SystemScores(score=float(value), stats=stats, scorer=_ppl_from_sums)


def _ppl_from_sums(sums: np.ndarray) -> float:
    return perplexity(sums[0] / max(sums[1], 1.0))


def chrf_of(record: Record) -> float | None:
    """The record's dev chrF (computed from its hypotheses), or None without them."""
    scores = system_scores(record, "chrf")
    return scores.score if scores is not None else None


__all__ = ["bleu_metric", "chrf_of", "chrf_signature", "read_lines", "score_ahead", "system_scores"]
