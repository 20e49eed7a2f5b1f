"""`ablate data prepare`: build (or find) the cached corpus and print its statistics.

The flags are generated from `DataConfig`'s fields, with each field's docstring as help, so the command line never
drifts from the config. Only `data.*` modules are imported here (no torch), which keeps `ablate --help` fast.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import inspect
import json
import time
import types
import typing

from data.config import DataConfig

_ALIASES = {"corpus": ["--data"]}
"""Flags whose names differ from the field: `--data builtin|DIR|FILE.tsv|hub:NAME` sets `corpus`."""


def _field_docs(cls: type) -> dict[str, str]:
    """The docstring written under each field of a dataclass (what jsonargparse reads for its help)."""
    body = ast.parse(inspect.getsource(cls)).body[0].body
    docs = {}
    for node, after in zip(body, body[1:], strict=False):
        if isinstance(node, ast.AnnAssign) and isinstance(after, ast.Expr) and isinstance(after.value, ast.Constant):
            docs[node.target.id] = " ".join(str(after.value.value).split())
    return docs


def _add_config_flags(parser: argparse.ArgumentParser) -> None:
    docs = _field_docs(DataConfig)
    hints = typing.get_type_hints(DataConfig)
    for field in dataclasses.fields(DataConfig):
        flags = _ALIASES.get(field.name, []) + [f"--{field.name.replace('_', '-')}"]
        help_text = f"{docs.get(field.name, '')} (default: {field.default})".replace("%", "%%")
        hint = hints[field.name]
        if hint is bool:
            parser.add_argument(*flags, dest=field.name, action="store_true", default=field.default, help=help_text)
            continue
        choices = typing.get_args(hint) if typing.get_origin(hint) is typing.Literal else None
        args = [a for a in typing.get_args(hint) if a is not type(None)] if isinstance(hint, types.UnionType) else []
        kind = int if hint is int or int in args else float if hint is float or float in args else str
        parser.add_argument(*flags, dest=field.name, type=kind, choices=choices, default=field.default, help=help_text)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="ablate data", description="Prepare parallel text for training.")
    commands = parser.add_subparsers(dest="command", required=True)
    prep = commands.add_parser(
        "prepare",
        help="build or find the cached tokenizer and encoded splits, and print corpus statistics",
        description="Build (or find in the cache) the joint SentencePiece model and the encoded splits, then print "
        "pairs per split, tokens, vocabulary, length percentiles, filtered pairs and padding overhead.",
    )
    _add_config_flags(prep)
    prep.add_argument("--json", action="store_true", help="print the statistics as one JSON object on stdout")
    return parser


def main(argv: list[str]) -> int:
    """Run `ablate data ...`; bad input raises AblateError (the dispatcher prints it on one line and exits 2)."""
    args = vars(build_parser().parse_args(argv))
    args.pop("command")
    as_json = args.pop("json")
    cfg = DataConfig(**args)

    from data.cache import cache_root
    from data.prepare import prepare
    from data.stats import format_text

    started = time.perf_counter()
    corpus = prepare(cfg, progress=True)
    elapsed = time.perf_counter() - started
    stats = {
        "cache_key": corpus.cache_key,
        "cache_dir": str(cache_root(cfg.cache_dir)),
        **corpus.statistics(cfg.tokens_per_batch, cfg.seed),
        "prepare_seconds": round(elapsed, 3),
        "warm": corpus.cached,
    }
    print(json.dumps(stats, indent=1) if as_json else format_text(stats))
    return 0
