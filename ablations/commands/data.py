"""`ablate data prepare`: build (or find) the cached corpus and print its statistics.

The options are `DataConfig`'s fields (`--data.corpus`, `--data.vocab_size`, ...), with each field's docstring as
help, from the parser every command shares, so the command line never drifts from the config. Only `data.*`
modules are imported here (no torch), which keeps the command fast.
"""

from __future__ import annotations

import json
import time

from ablate.ablations.commands.options import command_parser, options, overrides, parse, print_config
from ablate.data.config import DataConfig

DESCRIPTION = """Prepare parallel text for training: build (or find in the cache) the joint SentencePiece model and
the encoded splits, then print pairs per split, tokens, vocabulary, length percentiles, filtered pairs and padding
overhead. Unset fields take DataConfig's defaults (the built-in corpus)."""


def build_parser():
    parser = command_parser("ablate data", DESCRIPTION, sections=["data"])
    parser.add_argument("action", choices=["prepare"], help="prepare: build or find the corpus, print its statistics")
    parser.add_argument("--json", action="store_true", help="print the statistics as one JSON object on stdout")
    return parser


def main(argv: list[str]) -> int:
    """Run `ablate data ...`; bad input raises AblateError (the dispatcher prints it on one line and exits 2)."""
    args = parse(build_parser(), argv)
    data = overrides(args, ["data"]).get("data", {})
    if args.print_config:
        return print_config({**options(args), "data": data})
    as_json = args.json
    cfg = DataConfig(**data)

    from ablate.data.cache import cache_root
    from ablate.data.prepare import prepare
    from ablate.data.stats import format_text

    started = time.perf_counter()
    corpus = prepare(cfg, progress=True)
    elapsed = time.perf_counter() - started
    stats = {
        "cache_key": corpus.cache_key,
        "cache_dir": str(cache_root(cfg.cache_dir)),
        **corpus.statistics(cfg.tokens_per_batch, cfg.seed, cfg.buckets),
        "prepare_seconds": round(elapsed, 3),
        "warm": corpus.cached,
    }
    print(json.dumps(stats, indent=1) if as_json else format_text(stats))
    return 0
