"""Dev metrics of a finished trial, at the corpus and the sentence level: BLEU and chrF through sacreBLEU (each
with its signature), perplexity from the per-sentence NLL the trial wrote. The statistical tests
(`ablations.statistics.significance`)
resample these per-sentence statistics.

The statistics of a hypotheses file are kept on disk ($ABLATE_CACHE/scores, by the contents of the hypotheses and
references, the metric, its signature and sacreBLEU's version), so a report or comparison run again reads them
instead of scoring every system's dev sentences again, which takes minutes for a study (timed:
docs/reference/code-figures.md, "ablations/results/scores.py")."""

from __future__ import annotations

import functools
import io
import multiprocessing
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
from ablate.ablations.results.record import Record
from ablate.ablations.runtime import environment
from ablate.ablations.statistics.significance import SystemScores
from ablate.data.atomic import write_atomic
from ablate.data.cache import cache_root, file_digest, make_key
from ablate.lightning_modules.metrics import NLL_CAP, bleu_metric, chrf_metric, chrf_signature, perplexity


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
    preprocessing them again for each (sacreBLEU's default when they are passed in) was a large share of a claims
    comparison's time (docs/reference/code-figures.md, "ablations/results/scores.py")."""
    refs = _read(ref_path)
    return bleu_metric(signature, refs) if kind == "bleu" else chrf_metric(refs)


@functools.cache
def _corpus_stats(kind: str, signature: str | None, hyp_path: Path, ref_path: Path, stamp: tuple) -> tuple:
    """Per-sentence sufficient statistics and the corpus score of one hypotheses file against its references.

    sacreBLEU's `_extract_corpus_statistics` / `_compute_score_from_stats` are what its own paired tests use to
    resample sentences; calling them keeps our bootstrap exactly sacreBLEU's metric, smoothing and all."""
    hyps, refs = _read(hyp_path), _read(ref_path)
    if hyps is None or refs is None or len(hyps) != len(refs):
        return None, None, None, None
    stored = _stored_stats(kind, signature, hyp_path, ref_path)
    stats = _load(stored)
    if stats is None or len(stats) != len(hyps):
        stats = segment_statistics(kind, signature, ref_path, hyps)
        _save(stored, stats)
    metric = bleu_metric(signature) if kind == "bleu" else chrf_metric()
    score = metric._compute_score_from_stats(stats.sum(0).tolist()).score
    many = bleu_scores(metric) if kind == "bleu" else chrf_scores(metric)
    return stats, (lambda sums: metric._compute_score_from_stats(sums.tolist()).score), score, many


# sacreBLEU scores one vector of sums per Python call; the bootstrap asks it for 1000 replicates of every system,
# most of a report's time (docs/reference/code-figures.md, "ablations/results/scores.py").
# The two functions below are its `BLEU.compute_bleu` and `CHRF._compute_f_score` over an (n, k) array, step for
# step in the same order, and a test holds them to sacreBLEU's own on real and edge-case statistics
# (tests/ablations/results/test_scores_many.py). A metric configured some way they do not follow gives None: the
# bootstrap then calls sacreBLEU row by row.
_NO_LOG = -9999999999.0
"""sacreBLEU's `my_log(0)`."""


def bleu_scores(metric: Any) -> Callable[[np.ndarray], np.ndarray] | None:
    """(n, 2 + 2N) sums of sacreBLEU BLEU statistics -> n corpus BLEUs, as `metric._compute_score_from_stats`."""
    method, order, effective = metric.smooth_method, metric.max_ngram_order, metric.effective_order
    if method not in ("none", "floor", "add-k", "exp"):
        return None
    value = metric.smooth_value if metric.smooth_value is not None else type(metric).SMOOTH_DEFAULTS[method]

    def scores(sums: np.ndarray) -> np.ndarray:
        sums = np.asarray(sums, dtype=np.float64)
        sys_len, ref_len = np.trunc(sums[:, 0]), np.trunc(sums[:, 1])
        correct, total = sums[:, 2 : 2 + order].copy(), sums[:, 2 + order :].copy()
        any_correct = (correct != 0).any(axis=1)
        with np.errstate(divide="ignore", invalid="ignore"):
            bp = np.where(sys_len < ref_len, np.where(sys_len > 0, np.exp(1 - ref_len / sys_len), 0.0), 1.0)
            precisions = np.zeros_like(correct)
            alive = np.ones(len(sums), dtype=bool)  # not yet stopped at an order without n-grams
            eff = np.full(len(sums), float(order))
            smooth = np.ones(len(sums))
            for n in range(order):
                if method == "add-k" and n > 0:
                    correct[:, n] += value
                    total[:, n] += value
                alive &= total[:, n] != 0
                if effective:
                    eff = np.where(alive, n + 1.0, eff)
                zero = correct[:, n] == 0
                if method == "exp":
                    smooth = np.where(alive & zero, smooth * 2, smooth)
                    smoothed = 100.0 / (smooth * total[:, n])
                elif method == "floor":
                    smoothed = 100.0 * value / total[:, n]
                else:
                    smoothed = np.zeros(len(sums))
                exact = 100.0 * correct[:, n] / total[:, n]
                precisions[:, n] = np.where(alive, np.where(zero, smoothed, exact), 0.0)
            logs = np.where(precisions != 0, np.log(np.where(precisions != 0, precisions, 1.0)), _NO_LOG)
            summed = np.zeros(len(sums))
            for n in range(order):  # in sacreBLEU's order, over the first eff orders
                summed = summed + np.where(n < eff, logs[:, n], 0.0)
            score = bp * np.exp(summed / eff)
        return np.where(any_correct, score, 0.0)

    return scores


def chrf_scores(metric: Any) -> Callable[[np.ndarray], np.ndarray]:
    """(n, 3 * order) sums of sacreBLEU chrF statistics -> n corpus chrFs, as `metric._compute_score_from_stats`."""
    eps, factor, order, eps_smoothing = 1e-16, metric.beta**2, metric.order, metric.eps_smoothing

    def scores(sums: np.ndarray) -> np.ndarray:
        sums = np.asarray(sums, dtype=np.float64)
        n = len(sums)
        score, avg_prec, avg_rec, effective = np.zeros(n), np.zeros(n), np.zeros(n), np.zeros(n)
        with np.errstate(divide="ignore", invalid="ignore"):
            for i in range(order):
                n_hyp, n_ref, n_match = sums[:, 3 * i], sums[:, 3 * i + 1], sums[:, 3 * i + 2]
                prec = np.where(n_hyp > 0, n_match / n_hyp, eps)
                rec = np.where(n_ref > 0, n_match / n_ref, eps)
                denom = factor * prec + rec
                score = score + np.where(denom > 0, (1 + factor) * prec * rec / denom, eps)
                both = (n_hyp > 0) & (n_ref > 0)
                avg_prec = np.where(both, avg_prec + prec, avg_prec)
                avg_rec = np.where(both, avg_rec + rec, avg_rec)
                effective = effective + both
            if eps_smoothing:
                return 100 * score / order
            avg_prec = np.where(effective > 0, avg_prec / effective, 0.0)
            avg_rec = np.where(effective > 0, avg_rec / effective, 0.0)
            f = (1 + factor) * avg_prec * avg_rec / ((factor * avg_prec) + avg_rec)
        return np.where(avg_prec + avg_rec != 0, 100 * f, 0.0)

    return scores


_SEGMENTS: dict[tuple, dict[tuple[int, str], tuple]] = {}
"""(metric, signature, references, their mtime) -> (sentence, hypothesis) -> its statistics, for this process."""


def segment_statistics(kind: str, signature: str | None, ref_path: Path, hyps: list[str], lo: int = 0,
                       hi: int | None = None) -> np.ndarray:  # fmt: skip
    """sacreBLEU's per-sentence statistics of `hyps[lo:hi]` against the references, each (sentence, hypothesis)
    scored once in this process: a study's systems share most of their sentences, so a first report scores only the
    distinct ones (docs/reference/code-figures.md, "ablations/results/scores.py").

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
    import sacrebleu  # lazy: sacreBLEU only to score; reports read this module

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
    """Counts as int32 (sacreBLEU's statistics are integers), compressed and atomically; a cache that cannot be
    written (read-only home, full disk) only costs the next run the time. Sizes:
    docs/reference/code-figures.md, "ablations/results/scores.py"."""
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
    """The record's dev score on `metric` ('bleu', 'chrf', 'ppl') with per-sentence statistics where available:
    one object for the same files and values in a process, so that what is resampled from it once (its
    bootstrap replicates, `ablations.statistics.significance.bootstrap_all`) serves every look and budget of a
    report."""
    if metric == "ppl":
        value, path = record.metrics.get("ppl"), record.sentence_nll
        if value is None:
            return None
        stamp = path.stat().st_mtime if path is not None and path.is_file() else None
        return _ppl_system(float(value), path if stamp is not None else None, stamp)
    hyp, ref = record.hypotheses, record.references
    value = record.metrics.get(metric)
    if hyp is None or ref is None or not hyp.is_file() or not ref.is_file():
        return SystemScores(score=float(value)) if value is not None else None
    signature = record.metrics.get("bleu_signature") if metric == "bleu" else None
    return _text_system(metric, signature, hyp, ref, _stamp(hyp, ref), None if value is None else float(value))


@functools.cache
def _text_system(metric: str, signature: str | None, hyp: Path, ref: Path, stamp: tuple,
                 value: float | None) -> SystemScores | None:  # fmt: skip
    stats, scorer, score, many = _corpus_stats(metric, signature, hyp, ref, stamp)
    if stats is None:
        return SystemScores(score=value) if value is not None else None
    # The table reports the trial's own BLEU (identical: same hypotheses, same metric); chrF exists only here.
    reported = value if metric == "bleu" else None
    return SystemScores(
        score=float(reported if reported is not None else score), stats=stats, scorer=scorer, scores_of=many
    )


@functools.cache
def _ppl_system(value: float, path: Path | None, stamp: float | None) -> SystemScores:
    stats = _nll_stats(path, stamp) if path is not None and stamp is not None else None
    if stats is None:
        return SystemScores(score=value)
    return SystemScores(score=value, stats=stats, scorer=_ppl_from_sums, scores_of=_ppls_from_sums)


def score_ahead(records: Iterable[Record], say: Callable[[str], None] | None = None, after_s: float = 5.0) -> None:
    """Score every record's dev translations (BLEU and chrF, per sentence) before a table needs them, saying how far
    it is every few seconds once it has taken `after_s`: a study not reported before scores every dev sentence of a
    system and metric (minutes for a study), one reported before reads them from the disk (timed:
    docs/reference/code-figures.md, "ablations/results/scores.py")."""
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
    sacreBLEU is pure Python (a study's systems take one core minutes: `score_ahead`), and most sentences recur
    across a study's systems (`segment_statistics`): each process takes one share of the sentences of every system,
    so that a sentence it has seen is not scored again. False (nothing done) when there are fewer than 4 systems to
    score or only one core."""

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


@functools.cache
def _nll_stats(path: Path, mtime: float) -> np.ndarray | None:
    """(n, [summed NLL, target tokens]) of a sentence_nll file, read once a process (None when empty)."""
    lines = _read(path)
    if not lines:
        return None
    # numpy parses the numbers in C, far faster than float() a field:
    # docs/reference/code-figures.md, "ablations/results/scores.py"
    fields = "\t".join(lines).split("\t")
    stats = np.array(fields, dtype=np.float64).reshape(len(lines), -1) if len(fields) == 2 * len(lines) else None
    if stats is None:  # a malformed line: numpy's reshape would hide which
        stats = np.array([[float(x) for x in line.split("\t")] for line in lines], dtype=np.float64)
    stats.flags.writeable = False
    return stats


def _ppl_from_sums(sums: np.ndarray) -> float:
    return perplexity(sums[0] / max(sums[1], 1.0))


def _ppls_from_sums(sums: np.ndarray) -> np.ndarray:
    """`_ppl_from_sums` of each row."""
    return np.exp(np.minimum(sums[:, 0] / np.maximum(sums[:, 1], 1.0), NLL_CAP))


def chrf_of(record: Record) -> float | None:
    """The record's dev chrF (computed from its hypotheses), or None without them."""
    scores = system_scores(record, "chrf")
    return scores.score if scores is not None else None


__all__ = ["bleu_metric", "chrf_of", "chrf_signature", "read_lines", "score_ahead", "system_scores"]
