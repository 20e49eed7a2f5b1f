"""`prepare(cfg)`: corpus -> joint SentencePiece model -> encoded splits, each cached under a content key.

Two keys, so that work is shared as widely as it is valid:
- the tokenizer key covers the training text and the tokenizer settings: every trial of a sweep reuses one model;
- the cache key adds every split's text and the length settings: the encoded arrays and statistics live under it.
A warm call computes the keys (settings for the built-in corpus, memoised file digests otherwise), finds the
completed entry and memory-maps it; it neither reads the text nor imports torch.
"""

from __future__ import annotations

import json
import shutil
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

import numpy as np
from ablate.data import sources, tokenizer
from ablate.data.atomic import write_atomic
from ablate.data.batching import length_order, padding_overhead, plan_batches, plan_buckets
from ablate.data.cache import MANIFEST, AtomicDir, cache_root, content_digest, make_key, read_manifest
from ablate.data.config import DataConfig
from ablate.data.errors import AblateError, ConfigError
from ablate.data.export import Exported, check_new, read_exported, write_export
from ablate.data.fingerprint import FINGERPRINT_VERSION, CorpusFingerprint
from ablate.data.sources import SPLITS, Pairs
from ablate.data.stats import length_summary, split_stats
from ablate.data.tokenizer import Tokenizer

CACHE_VERSION = 1
"""Bump when the layout or content of the encoded cache changes: old entries are then simply not found."""
_CHUNK = 100_000
"""Sentences encoded at a time, so WMT-sized splits never hold all their id lists in Python at once."""
_TEXT_SPLITS = ("valid", "test")
"""Splits whose raw text is kept for BLEU (references) and decoding (sources)."""
_ARRAYS = ("src", "src_off", "tgt", "tgt_off")
"""Each split's arrays, `{split}.{array}.npy`: the ids of each side, flat, and where each pair's ids start."""


class EncodedSplit:
    """One split as flat id arrays plus offsets, memory-mapped: pair i is ids[off[i]:off[i + 1]] on each side."""

    def __init__(self, directory: Path, split: str) -> None:
        self.name = split
        self.src_ids, self.src_off, self.tgt_ids, self.tgt_off = (
            np.load(directory / f"{split}.{part}.npy", mmap_mode="r") for part in _ARRAYS
        )
        self.src_len = np.diff(self.src_off)
        self.tgt_len = np.diff(self.tgt_off)
        self.lines = np.load(directory / f"{split}.lines.npy", mmap_mode="r")
        """Each pair's line (or TSV row) number in its source file, for tracing a pair back to the user's data."""

    def __len__(self) -> int:
        return len(self.src_len)

    def pair(self, i: int) -> tuple[np.ndarray, np.ndarray]:
        """Source and target ids of pair i (no bos/eos)."""
        return self.src_ids[self.src_off[i] : self.src_off[i + 1]], self.tgt_ids[self.tgt_off[i] : self.tgt_off[i + 1]]


class PreparedCorpus:
    """A completed cache entry: the tokenizer, the encoded splits, the kept raw text of valid/test, the statistics."""

    def __init__(self, directory: Path, tok: Tokenizer, manifest: dict, *, cached: bool, origin: str) -> None:
        self.directory = directory
        self.cached = cached
        """True when this call found a completed entry (a warm prepare), False when it built one."""
        self.origin = origin
        """Where this call read the text from (`data.sources.origin`): the entry may have been built from a copy."""
        self.tokenizer = tok
        self.manifest = manifest
        self.cache_key: str = manifest["cache_key"]
        self.src_lang: str = manifest["src_lang"]
        self.tgt_lang: str = manifest["tgt_lang"]
        self._splits: dict[str, EncodedSplit] = {}
        self._text: dict[tuple[str, str], list[str]] = {}

    @property
    def vocab_size(self) -> int:
        return self.tokenizer.vocab_size

    @property
    def fingerprint(self) -> CorpusFingerprint:
        """What this corpus is (`data.fingerprint`): kept in the manifest when built, computed here for an entry
        built before fingerprints (the entry itself is never rewritten)."""
        kept = CorpusFingerprint.from_json(self.manifest.get("fingerprint"), self.directory / MANIFEST)
        if kept is None:
            kept = fingerprint_of(self.directory, self.tokenizer, self.src_lang, self.tgt_lang)
            self.manifest["fingerprint"] = kept.to_json()
        return replace(kept, source=self.origin)

    def split(self, name: str) -> EncodedSplit:
        if name not in SPLITS:
            raise ConfigError(f"unknown split {name!r}: use one of {', '.join(SPLITS)}")
        if name not in self._splits:
            self._splits[name] = EncodedSplit(self.directory, name)
        return self._splits[name]

    def references(self, split: str) -> list[str]:
        """Raw target sentences of 'valid' or 'test', in the order of the encoded split (the batches' `index`)."""
        return self._raw(split, self.tgt_lang)

    def sources(self, split: str) -> list[str]:
        """Raw source sentences of 'valid' or 'test', in the order of the encoded split."""
        return self._raw(split, self.src_lang)

    def _raw(self, split: str, lang: str) -> list[str]:
        if split not in _TEXT_SPLITS:
            raise ConfigError(f"raw text is kept for {' and '.join(_TEXT_SPLITS)} only, not {split!r}")
        if (split, lang) not in self._text:
            self._text[split, lang] = json.loads((self.directory / f"{split}.{lang}.json").read_text("utf-8"))
        return self._text[split, lang]

    def padding(self, tokens_per_batch: int, seed: int = 0, buckets: int = 0) -> dict:
        """Padding share of the training batches (epoch 0) under our greedy length bucketing, under random batching,
        and with fixed shapes (`buckets` length buckets, or 8 when 0: what data.buckets would give), with the
        (batch, source, target) shapes each sees in that epoch."""
        train = self.split("train")
        src, tgt = train.src_len + 1, train.tgt_len + 1
        rng = np.random.default_rng([seed, 0])
        out: dict = {"tokens_per_batch": tokens_per_batch}
        for name, order in (("bucketed", length_order(src, tgt, rng)), ("random", rng.permutation(len(src)))):
            batches = plan_batches(src, tgt, order, tokens_per_batch)
            out[name] = {
                "overhead": round(padding_overhead(src, tgt, batches), 4),
                "batches": len(batches),
                "pairs_per_batch": round(len(src) / max(1, len(batches)), 1),
                "shapes": len({(len(b), int(src[b].max()), int(tgt[b].max())) for b in batches}),
            }
        fixed = plan_buckets(src, tgt, buckets or 8, tokens_per_batch)
        batches = fixed.batches(rng, every_pair=False)
        count = len(batches)
        out["fixed"] = {
            "buckets": len(fixed.size),
            "overhead": round(fixed.padding(src, tgt), 4),
            "batches": count,
            "pairs_per_batch": round(sum(len(b) for b in batches) / max(1, count), 1),
            "shapes": len(fixed.shapes(every_pair=False)),
        }
        return out

    def statistics(self, tokens_per_batch: int, seed: int = 0, buckets: int = 0) -> dict:
        """Everything `ablate data prepare` prints: the build-time statistics plus padding at this budget."""
        stats = {**self.manifest["stats"], "corpus": self.origin}  # the entry may have been built from a copy
        return {**stats, "padding": self.padding(tokens_per_batch, seed, buckets)}


def prepare(cfg: DataConfig, *, progress: bool = False) -> PreparedCorpus:
    """Build (cold) or load (warm) the tokenizer and encoded splits for `cfg`. Idempotent and safe to interrupt."""
    source = sources.resolve(cfg)
    root = cache_root(cfg.cache_dir)
    with _step(progress, f"fingerprinting {source.name}", quiet_under=0.5):
        fingerprint = source.fingerprint()
    spm_key = make_key("spm", fingerprint, cfg.vocab_size, cfg.spm_model_type, tokenizer.PAD_ID)
    cache_key = make_key(
        "enc", CACHE_VERSION, spm_key, fingerprint, source.src_lang, source.tgt_lang, cfg.max_len, cfg.truncate
    )
    spm_path = root / "spm" / f"{spm_key}.model"
    directory = root / "encoded" / cache_key
    manifest = read_manifest(directory)
    if manifest is not None and manifest.get("spm_key") == spm_key and spm_path.is_file():
        return PreparedCorpus(directory, Tokenizer.load(spm_path), manifest, cached=True, origin=sources.origin(source))

    started = time.perf_counter()
    with _step(progress, f"reading {source.name}"):
        splits = source.read()
    atomic = AtomicDir(directory)
    with atomic as tmp:
        model = None
        if spm_path.is_file():
            tok = Tokenizer.load(spm_path)
        else:  # trained into the temporary entry: a failure below leaves no tokenizer behind either
            with _step(progress, f"training SentencePiece {cfg.spm_model_type} (vocabulary {cfg.vocab_size})"):
                train = splits["train"]
                model = tokenizer.train_bytes(
                    train.src + train.tgt, vocab_size=cfg.vocab_size, model_type=cfg.spm_model_type
                )
            (tmp / "spm.model").write_bytes(model)
            tok = Tokenizer.load(tmp / "spm.model")
        with _step(progress, "encoding splits"):
            stats = {split: _encode_split(tok, splits[split], split, cfg, tmp, source) for split in SPLITS}
        stats = _corpus_stats(source, splits, tok, cfg, stats, time.perf_counter() - started)
        manifest = {"cache_key": cache_key, "spm_key": spm_key, **{k: stats[k] for k in ("src_lang", "tgt_lang")}}
        manifest["stats"] = stats
        manifest["fingerprint"] = fingerprint_of(tmp, tok, source.src_lang, source.tgt_lang).to_json()
        if model is not None:
            (tmp / "spm.model").unlink()
            write_atomic(spm_path, model)  # before the manifest: an entry is trusted only with its tokenizer
        atomic.commit(manifest)
    return PreparedCorpus(directory, Tokenizer.load(spm_path), manifest, cached=False, origin=sources.origin(source))


def export_corpus(cfg: DataConfig, directory: Path, *, progress: bool = False) -> tuple[Exported, CorpusFingerprint]:
    """Write the text of `cfg`'s corpus as plain parallel files into the new `directory` (`data.export`), and check
    that the copy prepares, with the same settings, to the same fingerprint. Returns the export and the fingerprint;
    a copy that would differ is removed, with one line."""
    check_new(directory)
    original = prepare(cfg, progress=progress)
    source = sources.resolve(cfg)
    with _step(progress, f"exporting {source.name} to {directory}"):
        write_export(directory, sources.origin(source), (source.src_lang, source.tgt_lang), source.read())
    exported = read_exported(directory)
    assert exported is not None  # written just above
    copy = prepare(exported.config_for(cfg), progress=progress)
    if copy.fingerprint != original.fingerprint:
        shutil.rmtree(directory, ignore_errors=True)
        raise AblateError(
            f"the export of {source.name} to {directory} does not read back as the same corpus "
            f"({copy.fingerprint.describe()} against {original.fingerprint.describe()}): a sentence holds a line "
            "break or edge whitespace that plain files cannot keep"
        )
    return exported, original.fingerprint


def fingerprint_of(directory: Path, tokenizer: Tokenizer, src_lang: str, tgt_lang: str) -> CorpusFingerprint:
    """The fingerprint of an encoded cache directory (`data.prepare`'s layout) and its tokenizer (no `source`: one
    cache entry serves every copy of the same text)."""
    digest = content_digest()
    digest.update(json.dumps(["ablate-corpus", FINGERPRINT_VERSION, src_lang, tgt_lang, tokenizer.vocabulary()],
                             ensure_ascii=False).encode())  # fmt: skip
    sizes = {}
    for split in SPLITS:
        for part in _ARRAYS:
            array = np.load(directory / f"{split}.{part}.npy", mmap_mode="r")
            digest.update(f"{split}.{part} {array.dtype.str} {array.shape}\n".encode())
            digest.update(np.ascontiguousarray(array).tobytes())
            if part == "src_off":
                sizes[split] = len(array) - 1
    for split in _TEXT_SPLITS:
        for lang in (src_lang, tgt_lang):
            digest.update((directory / f"{split}.{lang}.json").read_bytes())
    return CorpusFingerprint(digest=digest.hexdigest(), **sizes)


def _corpus_stats(
    source: sources.Source, splits: dict[str, Pairs], tok: Tokenizer, cfg: DataConfig, per_split: dict, seconds: float
) -> dict:
    """The build-time statistics kept in the manifest (padding is computed on demand: it depends on the budget)."""
    train = splits["train"]
    return {
        "corpus": source.name,
        "src_lang": source.src_lang,
        "tgt_lang": source.tgt_lang,
        "vocab_size": tok.vocab_size,
        "word_types": {
            side: len({w for line in getattr(train, side) for w in line.split()}) for side in ("src", "tgt")
        },
        "max_len": cfg.max_len,
        "truncate": cfg.truncate,
        "splits": per_split,
        "build_seconds": round(seconds, 2),
    }


def _encode_split(tok: Tokenizer, pairs: Pairs, split: str, cfg: DataConfig, out: Path, source: sources.Source) -> dict:
    """Encode, filter (or truncate) by max_len, write the arrays (and raw valid/test text); return the split's stats."""
    dtype = np.uint16 if tok.vocab_size <= np.iinfo(np.uint16).max + 1 else np.int32
    src_ids, tgt_ids, src_len, tgt_len, kept = [], [], [], [], []
    empty = too_long = truncated = 0
    for start in range(0, len(pairs.src), _CHUNK):
        chunk_src = tok.encode(pairs.src[start : start + _CHUNK])
        chunk_tgt = tok.encode(pairs.tgt[start : start + _CHUNK])
        for offset, (s, t) in enumerate(zip(chunk_src, chunk_tgt, strict=True)):
            if not s or not t:
                empty += 1
                continue
            if len(s) > cfg.max_len or len(t) > cfg.max_len:
                if not cfg.truncate:
                    too_long += 1
                    continue
                truncated += 1
                s, t = s[: cfg.max_len], t[: cfg.max_len]
            src_ids.append(np.asarray(s, dtype=dtype))
            tgt_ids.append(np.asarray(t, dtype=dtype))
            src_len.append(len(s))
            tgt_len.append(len(t))
            kept.append(start + offset)
    if not kept:
        raise AblateError(
            f"no {split} pair is left of {len(pairs.src)} ({too_long} longer than max_len={cfg.max_len} subwords, "
            f"{empty} with an empty side): raise --data.max_len or pass --data.truncate true"
        )
    for side, ids, lens in (("src", src_ids, src_len), ("tgt", tgt_ids, tgt_len)):
        np.save(out / f"{split}.{side}.npy", np.concatenate(ids) if ids else np.zeros(0, dtype))
        np.save(out / f"{split}.{side}_off.npy", np.concatenate([[0], np.cumsum(lens, dtype=np.int64)]))
    np.save(out / f"{split}.lines.npy", np.asarray([pairs.lines[i] for i in kept], dtype=np.int64))
    if split in _TEXT_SPLITS:
        for lang, texts in ((source.src_lang, pairs.src), (source.tgt_lang, pairs.tgt)):
            (out / f"{split}.{lang}.json").write_text(json.dumps([texts[i] for i in kept], ensure_ascii=False), "utf-8")
    return split_stats(
        pairs=len(kept),
        filtered_long=too_long,
        filtered_empty=empty,
        truncated=truncated,
        src_len=np.asarray(src_len, dtype=np.int64),
        tgt_len=np.asarray(tgt_len, dtype=np.int64),
        src_words=length_summary(np.asarray([len(pairs.src[i].split()) for i in kept], dtype=np.int64)),
        tgt_words=length_summary(np.asarray([len(pairs.tgt[i].split()) for i in kept], dtype=np.int64)),
    )


@contextmanager
def _step(enabled: bool, message: str, quiet_under: float = 0.0) -> Iterator[None]:
    """Progress on stderr for the long steps (stdout stays clean for --json)."""
    started = time.perf_counter()
    if enabled and not quiet_under:
        print(f"ablate data: {message} ...", file=sys.stderr, flush=True)
    yield
    elapsed = time.perf_counter() - started
    if enabled and elapsed >= quiet_under:
        print(f"ablate data: {message}: done in {elapsed:.1f}s", file=sys.stderr, flush=True)
