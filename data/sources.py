"""Where parallel text comes from: the built-in corpus, a directory of plain files, a TSV file, the hub, or the
machine's gettext message catalogues.

Every source gives the same two things: a `fingerprint()` of its contents (cheap, so that a warm prepare never has to
read or validate the text) and `read()`, which returns the validated splits. All user-facing problems are raised as
one-line AblateErrors that name the file, line or row and say what to do.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from ablate.data import corpus, gettext_corpus
from ablate.data.cache import AtomicDir, cache_root, file_digest, make_key, read_manifest
from ablate.data.config import DataConfig
from ablate.data.errors import UTF8_BOM, AblateError, foreign_encoding, not_utf8
from ablate.data.export import Exported, read_exported

SPLITS = ("train", "valid", "test")
_SPLIT_ALIASES = {"train": ("train",), "valid": ("valid", "dev"), "test": ("test",)}
_TSV_SPLITS = ("train", "valid", "dev", "test")
"""What a TSV file's third column may say (dev: valid)."""
TSV_HELD_OUT = 0.05
"""Fraction of a TSV file held out for valid and for test each (at most 1000 pairs each, at least 1)."""


@dataclass(frozen=True)
class Pairs:
    """One split: aligned source and target sentences, and each pair's line (or row) number in its file."""

    src: list[str]
    tgt: list[str]
    lines: list[int]


class BuiltinSource:
    """The synthetic pair of `data.corpus`; its fingerprint is its settings, so a warm run generates nothing."""

    def __init__(self, cfg: DataConfig) -> None:
        self.name = "builtin"
        self.src_lang, self.tgt_lang = cfg.src or "src", cfg.tgt or "tgt"
        # Test and valid are drawn first, so they stay the same when only the training size changes.
        self.sizes = {"test": cfg.builtin_test, "valid": cfg.builtin_valid, "train": cfg.builtin_train}
        self.seed = cfg.seed
        self.lexicon, self.max_words = cfg.builtin_lexicon, cfg.builtin_max_words

    def fingerprint(self) -> str:
        # Default settings stay out of the key, so caches made before these settings existed remain valid.
        defaults = (DataConfig.builtin_lexicon, DataConfig.builtin_max_words)
        extra = () if (self.lexicon, self.max_words) == defaults else (self.lexicon, self.max_words)
        return make_key("builtin", corpus.GENERATOR_VERSION, self.seed, self.sizes, *extra)

    def read(self) -> dict[str, Pairs]:
        generated = corpus.generate(self.seed, self.sizes, self.lexicon, self.max_words)
        return {split: Pairs(*generated[split], list(range(1, len(generated[split][0]) + 1))) for split in SPLITS}


class DirectorySource:
    """`train.{src}`, `valid.{src}` (or `dev.{src}`), `test.{src}` and the same for `{tgt}`, one sentence a line.
    A directory `ablate data export` wrote is checked against its manifest first (`data.export.Exported.check`)."""

    def __init__(self, directory: Path, src: str | None, tgt: str | None, memo_dir: Path) -> None:
        self.name = str(directory)
        self.directory = directory
        self.memo_dir = memo_dir
        self.exported: Exported | None = read_exported(directory) if directory.is_dir() else None
        if self.exported is not None:
            self.exported.check(memo_dir)
            if src is None and tgt is None:  # re-imported in the direction it was exported, unless asked otherwise
                src, tgt = self.exported.src, self.exported.tgt
        self.src_lang, self.tgt_lang = _pick_pair(directory, src, tgt)
        self.files = {split: (self._file(split, self.src_lang), self._file(split, self.tgt_lang)) for split in SPLITS}

    def _file(self, split: str, lang: str) -> Path:
        for alias in _SPLIT_ALIASES[split]:
            if (self.directory / f"{alias}.{lang}").exists():
                return self.directory / f"{alias}.{lang}"
        path = self.directory / f"{split}.{lang}"
        raise AblateError(f"missing file {path}: the directory needs train, valid (or dev) and test files for {lang}")

    def fingerprint(self) -> str:
        digests = {split: [self._digest(path) for path in pair] for split, pair in self.files.items()}
        return make_key("dir", self.src_lang, self.tgt_lang, digests)

    def _digest(self, path: Path) -> str:
        if not path.is_file():
            raise AblateError(f"missing file {path}: create it or pass another --data.corpus directory")
        return file_digest(path, self.memo_dir)

    def read(self) -> dict[str, Pairs]:
        out = {}
        for split, (src_path, tgt_path) in self.files.items():
            src, tgt = read_lines(src_path), read_lines(tgt_path)
            if len(src) != len(tgt):
                raise AblateError(
                    f"{src_path} has {len(src)} lines but {tgt_path} has {len(tgt)}: the two sides must be "
                    "line-aligned, one sentence per line"
                )
            out[split] = Pairs(src, tgt, list(range(1, len(src) + 1)))
        return out


def _pick_pair(directory: Path, src: str | None, tgt: str | None) -> tuple[str, str]:
    """The language pair to read, checked against the `train.*` files that are there."""
    if not directory.is_dir():
        raise AblateError(f"--data.corpus {directory}: no such directory (expected train/valid/test.<lang> files)")
    langs = sorted(path.suffix[1:] for path in directory.glob("train.*") if path.suffix[1:] and path.is_file())
    if src is None and tgt is None and langs == ["src", "tgt"]:  # the sides named by their role, not a language
        return "src", "tgt"
    if src is None or tgt is None:
        others = [lang for lang in langs if lang not in (src, tgt)]
        if len(langs) == 2 and len(others) == 1:
            if src:
                return src, others[0]
            if tgt:
                return others[0], tgt
        raise AblateError(
            f"{directory} holds train files for languages {', '.join(langs) or 'none'}: pass --data.src and --data.tgt "
            "(e.g. --data.src de --data.tgt en)"
        )
    if src not in langs or tgt not in langs:
        found = ", ".join(f"{a}-{b}" for i, a in enumerate(langs) for b in langs[i + 1 :]) or "none"
        raise AblateError(
            f"{directory} has no {src}-{tgt} pair (no train.{src if src not in langs else tgt}); "
            f"pairs there: {found}; pass --data.src/--data.tgt from those languages"
        )
    return src, tgt


def read_lines(path: Path, *, strip: bool = True) -> list[str]:
    """Lines of a UTF-8 text file, stripped (or only of a trailing CR); missing, empty and non-UTF-8 files are
    one-line AblateErrors (a file in UTF-16 or another encoding with a byte-order mark is named as such)."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise AblateError(f"missing file {path}: create it or pass another --data.corpus") from None
    except OSError as err:
        raise AblateError(f"cannot read {path}: {err.strerror}") from None
    if foreign_encoding(raw) is not None:  # UTF-16 and the like: named, before a byte of them is read as UTF-8
        raise AblateError(not_utf8(path, raw))
    raw = raw.removeprefix(UTF8_BOM)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise AblateError(not_utf8(path, raw, err.start)) from None
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    lines = [line.strip() if strip else line.removesuffix("\r") for line in lines]
    if not any(lines):
        raise AblateError(f"{path} is empty: it needs one sentence per line")
    return lines


class TsvSource:
    """One `source<TAB>target[<TAB>split]` file. Without a split column, valid and test are held out by a hash of
    the source sentence, so the split does not depend on row order and a repeated sentence stays in one split."""

    def __init__(self, path: Path, src: str | None, tgt: str | None, memo_dir: Path) -> None:
        if not path.is_file():
            raise AblateError(f"missing file {path}: pass an existing .tsv file or a directory with --data.corpus")
        self.name = str(path)
        self.path = path
        self.memo_dir = memo_dir
        self.src_lang, self.tgt_lang = src or "src", tgt or "tgt"

    def fingerprint(self) -> str:
        return make_key("tsv", 1, TSV_HELD_OUT, file_digest(self.path, self.memo_dir))

    def read(self) -> dict[str, Pairs]:
        rows: list[tuple[int, str, str, str | None]] = []
        shape = None  # the first row's columns: 2, or 3 when its third names a split
        for number, line in enumerate(read_lines(self.path, strip=False), start=1):
            if not line.strip():
                continue  # blank rows carry no pair
            cols = line.split("\t")
            shape = shape or (3 if len(cols) == 3 and cols[2].strip() in _TSV_SPLITS else 2)
            rows.append(self._row(number, cols, shape))
        with_split = sum(row[3] is not None for row in rows)
        if 0 < with_split < len(rows):
            raise AblateError(
                f"{self.path}: {with_split} of {len(rows)} rows name a split; name it on every row or none"
            )
        # every row names its split here, or none does and the hold-out assigns them
        split_rows = _hold_out(rows) if not with_split else [(n, s, t, sp) for n, s, t, sp in rows if sp is not None]
        out = {split: Pairs([], [], []) for split in SPLITS}
        for number, src, tgt, split in split_rows:
            out[split].src.append(src)
            out[split].tgt.append(tgt)
            out[split].lines.append(number)
        for split, pairs in out.items():
            if not pairs.src:
                raise AblateError(
                    f"{self.path} has no {split} pairs: add rows (at least 3 distinct sources) or a split column"
                )
        return out

    def _row(self, number: int, cols: list[str], shape: int) -> tuple[int, str, str, str | None]:
        """Row `number` (its tab-separated `cols`) as (number, source, target, split or None), in a file whose first
        row has `shape` columns (3: its third names a split). A row with more, or with a third that names no split
        where the first row has none, holds a tab inside a sentence: said so, not read as a split."""
        where = f"{self.path} row {number}"
        split = cols[2].strip() if len(cols) == 3 else None
        if len(cols) > shape and (len(cols) > 3 or split not in _TSV_SPLITS):
            layout = "source<TAB>target" + ("<TAB>split" if shape == 3 else "")
            third = f", and its third, {_clip(cols[2])!r}, names no split" if len(cols) == 3 else ""
            raise AblateError(
                f"{where} has {len(cols)} tab-separated columns, where a row is {layout}{third}: a tab inside a "
                "sentence? replace it with a space"
            )
        if len(cols) not in (2, 3) or not cols[0].strip() or not cols[1].strip():
            raise AblateError(
                f"{where}: expected 'source<TAB>target' (optionally <TAB>train|valid|test), found {len(cols)} "
                f"column(s){' with an empty side' if len(cols) in (2, 3) else ''}: fix or delete the row"
            )
        if split is not None and split not in _TSV_SPLITS:
            raise AblateError(f"{where}: split column is {split!r}; use train, valid or test")
        return number, cols[0].strip(), cols[1].strip(), "valid" if split == "dev" else split


def _clip(text: str, width: int = 30) -> str:
    """The start of a sentence, for a message."""
    text = text.strip()
    return text if len(text) <= width else text[:width].rstrip() + "..."


def _hold_out(rows: list[tuple[int, str, str, str | None]]) -> list[tuple[int, str, str, str]]:
    """Assign test, then valid, to the rows whose source hashes lowest; the rest is train."""
    n_held = max(1, min(1000, round(TSV_HELD_OUT * len(rows))))
    by_hash = sorted(rows, key=lambda row: (hashlib.blake2b(row[1].encode(), digest_size=8).digest(), row[0]))
    out: list[tuple[int, str, str, str]] = []
    counts, split_at = {"test": 0, "valid": 0}, "test"
    previous_src = None
    for number, src, tgt, _ in by_hash:
        if src != previous_src and split_at != "train" and counts[split_at] >= n_held:
            split_at = "valid" if split_at == "test" else "train"
        if split_at != "train":
            counts[split_at] += 1
        out.append((number, src, tgt, split_at))
        previous_src = src
    return sorted(out)


_HUB_REPOS = {f"wmt{year}": f"wmt/wmt{year}" for year in range(14, 20)}
"""Short names for the WMT sets, which live under the `wmt` organisation on the Hugging Face hub."""


class HubSource:
    """`hub:NAME[:CONFIG]` through Hugging Face `datasets` (the [hub] extra), test set from sacrebleu when it has one.

    NAME is a hub repository (`wmt/wmt14`) or a short WMT name (`wmt14`); CONFIG defaults to the pair with English
    last (`de-en`), as the WMT configs are named. The first run exports the splits to plain files under the cache
    (`hub/NAME-SRC-TGT/`), which is then read as a directory: later runs need neither the network nor `datasets`,
    and an offline user can put the files there by hand.
    """

    DEFAULT_PAIR = ("de", "en")

    def __init__(self, spec: str, src: str | None, tgt: str | None, root: Path) -> None:
        self.dataset, _, config = spec.removeprefix("hub:").partition(":")
        if not self.dataset:
            raise AblateError(f"--data.corpus {spec}: name a dataset, e.g. hub:wmt14 or hub:wmt/wmt14:de-en")
        self.src_lang, self.tgt_lang = src or self.DEFAULT_PAIR[0], tgt or self.DEFAULT_PAIR[1]
        pair = (self.src_lang, self.tgt_lang)
        self.config = config or "-".join(sorted(pair, key=lambda lang: lang == "en"))
        self.name = spec
        self.local = root / "hub" / f"{self.dataset.replace('/', '_')}-{self.src_lang}-{self.tgt_lang}"
        self.memo_dir = root

    def _directory(self) -> DirectorySource:
        if read_manifest(self.local) is None and not (self.local / f"train.{self.src_lang}").is_file():
            self._download()
        return DirectorySource(self.local, self.src_lang, self.tgt_lang, self.memo_dir)

    def fingerprint(self) -> str:
        return self._directory().fingerprint()

    def read(self) -> dict[str, Pairs]:
        return self._directory().read()

    def _offline_help(self, why: str) -> AblateError:
        s, t, short_name = self.src_lang, self.tgt_lang, self.dataset.rpartition("/")[2]
        return AblateError(
            f"hub:{self.dataset} {why}: install the [hub] extra (pip install 'ablate[hub]') on a machine with network, "
            f"or download {self.dataset} {s}-{t} as plain text (one sentence a line: train.{s} train.{t} valid.{s} "
            f"valid.{t} test.{s} test.{t}, e.g. `sacrebleu -t {short_name} -l {s}-{t} --echo src > test.{s}`) into "
            f"{self.local} and rerun, or into any directory and pass --data.corpus DIR --data.src {s} --data.tgt {t}"
        )

    def _download(self) -> None:
        try:
            import datasets  # pyright: ignore[reportMissingImports]  # the optional [hub] extra
        except ImportError:
            raise self._offline_help("needs the Hugging Face `datasets` package") from None
        try:
            loaded = datasets.load_dataset(_HUB_REPOS.get(self.dataset, self.dataset), self.config)
        except Exception as err:  # network, hub and config errors all end in the same advice
            raise self._offline_help(f"could not be loaded ({type(err).__name__})") from None
        splits = {"train": "train", "valid": "validation", "test": "test"}
        atomic = AtomicDir(self.local)
        with atomic as tmp:
            for split, hub_split in splits.items():
                if hub_split not in loaded:
                    raise AblateError(f"hub:{self.dataset}:{self.config} has no {hub_split} split; use a directory")
                rows = loaded[hub_split]["translation"]
                short_name = self.dataset.rpartition("/")[2]
                pairs = _sacrebleu_test(short_name, self.src_lang, self.tgt_lang) if split == "test" else None
                src, tgt = pairs or ([r[self.src_lang] for r in rows], [r[self.tgt_lang] for r in rows])
                for lang, lines in ((self.src_lang, src), (self.tgt_lang, tgt)):
                    text = "\n".join(" ".join(line.split()) for line in lines) + "\n"
                    (tmp / f"{split}.{lang}").write_text(text, encoding="utf-8")
            atomic.commit({"source": self.name, "config": self.config})


def _sacrebleu_test(name: str, src: str, tgt: str) -> tuple[list[str], list[str]] | None:
    """The sacrebleu test set (the one BLEU is reported on, e.g. newstest2014 for wmt14), or None if unavailable."""
    try:
        from sacrebleu.dataset import DATASETS  # lazy: sacreBLEU only to score; reports read this module

        test_set = DATASETS.get(f"{name}/full") or DATASETS.get(name)
        if test_set is None or f"{src}-{tgt}" not in test_set.langpairs:
            return None
        sources = list(test_set.source(f"{src}-{tgt}"))
        references = [refs[0].strip() for refs in test_set.references(f"{src}-{tgt}")]
    except Exception:  # offline or unknown set: the hub's own test split is used instead
        return None
    return sources, references


class GettextSource:
    """`gettext:LANG[:ROOT]`: the translated message catalogues `ROOT/LANG/LC_MESSAGES/*.mo` (ROOT defaults to
    /usr/share/locale), English msgid -> LANG msgstr, read and cleaned by `data.gettext_corpus`.

    Valid and test are each the sources whose hash falls in a fixed 2.5% of the hash range, so a pair's split never
    changes when packages are installed or removed. `--data.src LANG --data.tgt en` reads the same pairs the other way
    round.
    A pair's "line" is its position in its split, which is sorted by source.
    """

    DEFAULT_ROOT = "/usr/share/locale"
    MIN_PAIRS = 3000
    """Fewer pairs than this after cleaning are too few to train on: the command suggests a richer language."""

    def __init__(self, spec: str, src: str | None, tgt: str | None) -> None:
        self.lang, _, root = spec.removeprefix("gettext:").partition(":")
        self.root = Path(root or self.DEFAULT_ROOT).expanduser()
        if not self.lang or "/" in self.lang:
            raise AblateError(f"--data.corpus {spec}: name a language directory of {self.root}, e.g. gettext:de")
        self.name = spec
        self.reverse = (src, tgt) == (self.lang, "en")
        if self.reverse:
            self.src_lang, self.tgt_lang = self.lang, "en"
        elif (src or "en") == "en" and (tgt or self.lang) == self.lang:
            self.src_lang, self.tgt_lang = "en", self.lang
        else:
            raise AblateError(
                f"--data.corpus {spec} pairs English with {self.lang}, not {src or 'en'}-{tgt or self.lang}: leave out "
                f"--data.src and --data.tgt (or pass --data.src {self.lang} --data.tgt en for the other direction), "
                f"or use gettext:{tgt or src}"
            )
        self.directory = self.root / self.lang / "LC_MESSAGES"

    def _files(self) -> list[Path]:
        """The language's catalogues, each once (Debian links aliases such as iso_639.mo to iso_639-2.mo)."""
        files = sorted({path.resolve() for path in self.directory.glob("*.mo") if path.is_file()})
        if not files:
            raise AblateError(
                f"--data.corpus {self.name}: no catalogues in {self.directory}/*.mo; languages with the most there: "
                f"{_richest(self.root) or 'none (is ' + str(self.root) + ' a locale directory?)'}"
            )
        return files

    def fingerprint(self) -> str:
        stats = [(str(path), path.stat().st_size, path.stat().st_mtime_ns) for path in self._files()]
        version = (gettext_corpus.CLEANING_VERSION, gettext_corpus.MAX_WORDS, gettext_corpus.HELD_OUT)
        return make_key("gettext", version, self.lang, self.reverse, stats)

    def read(self) -> dict[str, Pairs]:
        splits = gettext_corpus.corpus(self._files())
        total = sum(len(pairs) for pairs in splits.values())
        if total < self.MIN_PAIRS or not all(splits.values()):
            raise AblateError(
                f"--data.corpus {self.name}: only {total} pairs after cleaning (at least {self.MIN_PAIRS} needed): "
                f"pick a language with more catalogues, e.g. {_richest(self.root, exclude=self.lang)}"
            )
        out = {}
        for split, pairs in splits.items():
            src, tgt = [s for s, _ in pairs], [t for _, t in pairs]
            out[split] = Pairs(*((tgt, src) if self.reverse else (src, tgt)), list(range(1, len(pairs) + 1)))
        return out


def _richest(root: Path, exclude: str = "", n: int = 6) -> str:
    """The languages under a locale root with the most catalogues, e.g. 'fr (88), de (86), ...'."""
    counts = {lang.name: len(list(lang.glob("LC_MESSAGES/*.mo"))) for lang in root.glob("*") if lang.name != exclude}
    ranked = sorted((lang for lang, count in counts.items() if count), key=lambda lang: (-counts[lang], lang))
    return ", ".join(f"gettext:{lang} ({counts[lang]} catalogues)" for lang in ranked[:n])


Source = BuiltinSource | DirectorySource | TsvSource | HubSource | GettextSource
MACHINE_DEPENDENT = (GettextSource,)
"""Sources whose text depends on the machine that reads them (its installed packages): a study pins their text in
its own directory (`ablations.sweep.corpora`)."""


def origin(source: Source) -> str:
    """Where a source's text came from, as a fingerprint names it: an export's own source (`gettext:de`), else the
    source's name."""
    return source.exported.source if isinstance(source, DirectorySource) and source.exported else source.name


def resolve(cfg: DataConfig) -> Source:
    """The source named by `cfg.corpus`."""
    root = cache_root(cfg.cache_dir)
    if cfg.corpus == "builtin":
        return BuiltinSource(cfg)
    if cfg.corpus.startswith("hub:"):
        return HubSource(cfg.corpus, cfg.src, cfg.tgt, root)
    if cfg.corpus.startswith("gettext:"):
        return GettextSource(cfg.corpus, cfg.src, cfg.tgt)
    path = Path(cfg.corpus).expanduser()
    if path.suffix == ".tsv":
        return TsvSource(path, cfg.src, cfg.tgt, root)
    if path.is_file():
        raise AblateError(f"--data.corpus {path}: a file must end in .tsv (source<TAB>target); or pass a directory")
    return DirectorySource(path, cfg.src, cfg.tgt, root)
