"""Corpus statistics for `ablate data prepare`: pairs, tokens, length percentiles and filtered pairs per split.

Kept as plain JSON-ready dicts so the same numbers go to the terminal, `--json`, the cache manifest and W&B.
"""

from __future__ import annotations

import numpy as np

PERCENTILES = (50, 90, 99)


def length_summary(lengths: np.ndarray) -> dict[str, float]:
    """Mean, p50/p90/p99 and max of per-sentence lengths (zeros for an empty split)."""
    if len(lengths) == 0:
        return {"mean": 0.0, **{f"p{p}": 0 for p in PERCENTILES}, "max": 0}
    values = np.percentile(lengths, PERCENTILES)
    return {
        "mean": round(float(lengths.mean()), 2),
        **{f"p{p}": int(np.ceil(v)) for p, v in zip(PERCENTILES, values, strict=True)},
        "max": int(lengths.max()),
    }


def split_stats(
    *,
    pairs: int,
    filtered_long: int,
    filtered_empty: int,
    truncated: int,
    src_len: np.ndarray,
    tgt_len: np.ndarray,
    src_words: dict,
    tgt_words: dict,
) -> dict:
    """One split's statistics; token lengths are subwords without bos/eos, after filtering or truncation."""
    return {
        "pairs": pairs,
        "filtered_long": filtered_long,
        "filtered_empty": filtered_empty,
        "truncated": truncated,
        "src_tokens": int(src_len.sum()),
        "tgt_tokens": int(tgt_len.sum()),
        "src_len": length_summary(src_len),
        "tgt_len": length_summary(tgt_len),
        "src_words": src_words,
        "tgt_words": tgt_words,
    }


def filtered(stats: dict) -> str | None:
    """How many pairs the preparation left out and why, in one sentence: per split, those longer than max_len and
    those with a side that encodes to nothing, with what keeps the long ones. None when it left out none."""
    splits = stats["splits"]
    long = {name: s.get("filtered_long", 0) for name, s in splits.items() if s.get("filtered_long")}
    empty = {name: s.get("filtered_empty", 0) for name, s in splits.items() if s.get("filtered_empty")}
    if not long and not empty:
        return None
    total = sum(s["pairs"] for s in splits.values()) + sum(long.values()) + sum(empty.values())
    parts = []
    if long:
        parts.append(f"{_counted(long)} longer than max_len={stats['max_len']} subwords on a side")
    if empty:
        parts.append(f"{_counted(empty)} with a side that encodes to nothing")
    keep = "; --data.max_len or --data.truncate true keeps the long ones" if long else ""
    left = sum(long.values()) + sum(empty.values())
    return f"filtered {left:,} of {total:,} pairs of {stats['corpus']}: {'; '.join(parts)}{keep}"


def _counted(by_split: dict[str, int]) -> str:
    """'2 (train 1, test 1)', or '1 (train)' for one split."""
    if len(by_split) == 1:
        ((name, count),) = by_split.items()
        return f"{count:,} ({name})"
    return f"{sum(by_split.values()):,} ({', '.join(f'{name} {count:,}' for name, count in by_split.items())})"


def format_text(stats: dict) -> str:
    """The statistics as an aligned plain-text report."""
    of = stats.get("of")
    whose = f", the corpus {of['study']} row {of['row']} trains on at preset {of['preset']}" if of else ""
    lines = [
        f"corpus      {stats['corpus']} ({stats['src_lang']} -> {stats['tgt_lang']}){whose}",
        f"cache key   {stats['cache_key']}  ({stats['cache_dir']})",
        *(
            [f"fingerprint {stats['fingerprint']['digest']} (what the text is: the same on every machine)"]
            if "fingerprint" in stats
            else []
        ),
        f"vocabulary  {stats['vocab_size']} joint subwords; word types in train: "
        f"{stats['word_types']['src']} {stats['src_lang']}, {stats['word_types']['tgt']} {stats['tgt_lang']}",
        f"max_len     {stats['max_len']} per side ({'truncate' if stats['truncate'] else 'filter'} longer pairs)",
        "",
        f"{'split':<6} {'pairs':>8} {'filtered':>9} {'trunc':>6} {'src tok':>10} {'tgt tok':>10}  "
        f"{'src len p50/p90/p99/max':>24}  {'tgt len p50/p90/p99/max':>24}",
    ]
    for name in ("train", "valid", "test"):
        s = stats["splits"][name]
        lens = ["/".join(str(s[side][k]) for k in ("p50", "p90", "p99", "max")) for side in ("src_len", "tgt_len")]
        lines.append(
            f"{name:<6} {s['pairs']:>8} {s['filtered_long'] + s['filtered_empty']:>9} {s['truncated']:>6} "
            f"{s['src_tokens']:>10} {s['tgt_tokens']:>10}  {lens[0]:>24}  {lens[1]:>24}"
        )
    if note := filtered(stats):
        lines.append(note)
    pad = stats["padding"]
    lines += [
        "",
        f"padding at {pad['tokens_per_batch']} tokens per batch (train, source + target, bos/eos included; "
        "shapes: distinct (batch, source, target) in one epoch):",
    ]
    for name, label in (
        ("bucketed", "length-bucketed (ours):"),
        ("fixed", f"fixed shapes, {pad['fixed']['buckets']} buckets:" if "fixed" in pad else ""),
        ("random", "random batching:"),
    ):
        if name in pad:
            p = pad[name]
            lines.append(
                f"  {label:<28}{p['overhead']:>6.1%} in {p['batches']} batches ({p['pairs_per_batch']} pairs each, "
                f"{p['shapes']} shapes)"
            )
    if "prepare_seconds" in stats:
        lines.append(f"prepared in {stats['prepare_seconds']:.2f}s ({'cache hit' if stats['warm'] else 'built'})")
    return "\n".join(lines)
