"""`ablate data prepare`: build (or find) the cached corpus and print its statistics; `ablate data export DIR`: write
it as plain parallel files that any machine reads the same.

The options are `DataConfig`'s fields (`--data.corpus`, `--data.vocab_size`, ...), with each field's docstring as
help, from the parser every command shares, so the command line never drifts from the config. Only `data.*`
modules are imported here (no torch), which keeps the command fast.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from ablate.ablations.commands.options import (
    command_parser,
    overrides,
    own_options,
    parse,
    print_config,
    wants_help,
)
from ablate.ablations.commands.train import PRESET, STUDY
from ablate.ablations.study.definition import load_study
from ablate.data.cache import cache_root
from ablate.data.config import DataConfig
from ablate.data.errors import AblateError
from ablate.data.stats import format_text

DESCRIPTION = """Prepare parallel text for training: build (or find in the cache) the joint SentencePiece model and
the encoded splits, then print pairs per split, tokens, vocabulary, length percentiles, filtered pairs and padding
overhead. `export DIR` writes the corpus as train/valid/test.{src,tgt} files (the form --data.corpus DIR reads) and
checks that they prepare to the same corpus fingerprint.

--preset NAME acts on the corpus that preset trains on: the data section of --row (default: the base) of --study
(default: table3) resolved at it, as `ablate train` and `ablate sweep` resolve it; --data.* fields apply on top.
--study or --row without --preset: the study's own preset (`preset:` in its file), else tiny, as a sweep takes it.
Without --preset, --study or --row, unset fields take DataConfig's defaults: the built-in corpus with its whole lexicon,
another synthetic language from the one the CPU presets train on."""


def build_parser(documented: bool = False):
    """`documented` (for --help): the data fields with their docstrings (slower to build)."""
    parser = command_parser("ablate data", DESCRIPTION, sections=["data"], documented=documented)
    parser.add_argument(
        "action",
        choices=["prepare", "export"],
        help="prepare: build or find the corpus, print its statistics; export: write it as plain files into DIR",
    )
    parser.add_argument("dir", nargs="?", default=None, help="export: the new directory to write the files into")
    parser.add_argument(
        "--preset", default=None, help="the corpus this preset trains on (default: DataConfig's defaults)"
    )
    parser.add_argument("--study", default=None, help="with --preset: the study whose row's corpus it is (table3)")
    parser.add_argument("--row", default=None, help="with --preset: the row whose corpus it is (the study's base)")
    parser.add_argument("--json", action="store_true", help="print the statistics as one JSON object on stdout")
    return parser


def resolve(args, data: dict) -> tuple[DataConfig, dict[str, str]]:
    """The data config the command acts on, and whose it is ({study, row, preset}; {} for DataConfig's defaults):
    with --preset, --study or --row, the row's data section at the preset, as a sweep's trial of it resolves it
    (`Study.run_config`), with the command line's --data.* fields on top."""
    if args.preset is None and args.study is None and args.row is None:
        return DataConfig(**data), {}

    study = load_study(args.study or STUDY)
    preset = args.preset or study.default_preset or PRESET
    row = args.row or study.base_name
    if row is None:
        names = ", ".join(r.name for r in study.rows)
        raise AblateError(f"{study.source}: the study has no base row: name the row with --row (one of {names})")
    cfg = study.run_config(row, preset, data=data).data
    return cfg, {"study": args.study or STUDY, "row": row, "preset": preset}


def main(argv: list[str]) -> int:
    """Run `ablate data ...`; bad input raises AblateError (the dispatcher prints it on one line and exits 2)."""
    args = parse(build_parser(documented=wants_help(argv)), argv)
    data = overrides(args, ["data"]).get("data", {})
    if args.print_config:
        return print_config({**own_options(args), "data": data})
    if (args.action == "export") != (args.dir is not None):
        raise AblateError("ablate data: export takes one DIR (ablate data export DIR --data.corpus ...); prepare none")
    cfg, of = resolve(args, data)
    if args.action == "export":
        return export(cfg, Path(args.dir), as_json=args.json, of=of)

    from ablate.data.prepare import prepare  # lazy: loads sentencepiece, which --help does not need

    started = time.perf_counter()
    corpus = prepare(cfg, progress=True)
    elapsed = time.perf_counter() - started
    stats = {
        "cache_key": corpus.cache_key,
        "fingerprint": corpus.fingerprint.to_json(),
        "cache_dir": str(cache_root(cfg.cache_dir)),
        **corpus.statistics(cfg.tokens_per_batch, cfg.seed, cfg.buckets),
        "prepare_seconds": round(elapsed, 3),
        "warm": corpus.cached,
        **({"of": of} if of else {}),
    }
    print(json.dumps(stats, indent=1) if args.json else format_text(stats))
    return 0


def export(cfg: DataConfig, directory: Path, *, as_json: bool, of: dict[str, str]) -> int:
    """`ablate data export DIR`: the files, then one summary (or JSON): pairs written, size, whose corpus it is (`of`:
    the study, row and preset; {} for DataConfig's defaults), the fingerprint, and the options that read it back."""
    from ablate.data.prepare import export_corpus  # lazy: loads sentencepiece, which --help does not need

    exported, fingerprint = export_corpus(cfg, directory, progress=True)
    size = sum((directory / name).stat().st_size for name in exported.files)
    reread = f"--data.corpus {directory} --data.src {exported.src} --data.tgt {exported.tgt}"
    if as_json:
        summary = {"dir": str(directory), "source": exported.source, "pairs": exported.pairs, "bytes": size,
                   "fingerprint": fingerprint.to_json(), "options": reread, **({"of": of} if of else {})}  # fmt: skip
        print(json.dumps(summary, indent=1))
        return 0
    written = ", ".join(f"{split} {exported.pairs[split]}" for split in ("train", "valid", "test"))
    whose = (
        f"the corpus {of['study']} row {of['row']} trains on at preset {of['preset']}"
        if of
        else "DataConfig's defaults, not a preset's corpus: --preset NAME exports the one a preset trains on"
    )
    print(
        f"exported {exported.source} ({whose}) to {directory}: {written} pairs ({exported.src}-{exported.tgt}), "
        f"{size / 1e6:.1f} MB\n"
        f"fingerprint {fingerprint.describe()} with these settings, the same read back from the copy\n"
        f"read it with: {reread}"
    )
    return 0
