"""`ablate params`: each row's shape and parameter count, with models built on the meta device (no memory)."""

from __future__ import annotations

import json
from typing import Any

from ablate.ablations.commands.options import (
    command_parser,
    overrides,
    own_options,
    parse,
    print_config,
    wants_help,
)
from ablate.ablations.study.config import SECTIONS
from ablate.ablations.study.definition import load_study
from ablate.ablations.study.presets import PRESETS


def parameter_table(
    study_name: str, preset: str, vocab_size: int | None = None, extra: dict[str, dict[str, Any]] | None = None
) -> list[dict]:
    """One dict per row: row, group, N, d_model, d_ff, h, d_k, d_v, params, paper_params_m. `extra`: section
    overrides applied to every row (the command line's)."""
    from ablate.lightning_modules.transformer import Transformer  # lazy: loads torch and Lightning (seconds)

    study = load_study(study_name)
    extra = {section: dict(values) for section, values in (extra or {}).items()}
    if vocab_size is not None:
        extra.setdefault("data", {})["vocab_size"] = vocab_size
    rows = []
    for row in study.rows:
        cfg = study.run_config(row, preset, 0, **extra).model
        params = Transformer.count(cfg)
        rows.append(
            {
                "row": row.name,
                "group": row.group,
                "N": cfg.n_layers,
                "d_model": cfg.d_model,
                "d_ff": cfg.d_ff,
                "h": cfg.n_heads,
                "d_k": cfg.head_dim_k,
                "d_v": cfg.head_dim_v,
                "vocab_size": cfg.vocab_size,
                "params": params,
                "paper_params_m": row.paper.get("params_m"),
            }
        )
    return rows


def main(argv: list[str]) -> int:
    parser = command_parser("ablate params", __doc__, sections=SECTIONS, documented=wants_help(argv))
    parser.add_argument("study", nargs="?", default="table3", help="built-in study name or study YAML file")
    parser.add_argument("--preset", default="paper", choices=list(PRESETS))
    parser.add_argument("--json", action="store_true", help="print a JSON list of {row, params, ...}")
    args = parse(parser, argv)
    extra = overrides(args)  # e.g. --data.vocab_size 37000 (the shared vocabulary; default: the preset's)
    if args.print_config:
        return print_config({**own_options(args), **extra})
    rows = parameter_table(args.study, args.preset, extra=extra)
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    w = max(6, *(len(r["row"]) for r in rows))  # the modern study's rows are named like M-prenorm
    header = (
        f"{'row':<{w}} {'N':>2} {'d_model':>7} {'d_ff':>5} {'h':>3} {'d_k':>4} {'d_v':>4} {'params':>10} {'paper':>6}"
    )
    print(f"{args.study} at preset {args.preset}, vocabulary {rows[0]['vocab_size']}")
    print(header)
    print("-" * len(header))
    for r in rows:
        paper = f"{r['paper_params_m']}M" if r["paper_params_m"] else ""
        print(
            f"{r['row']:<{w}} {r['N']:>2} {r['d_model']:>7} {r['d_ff']:>5} {r['h']:>3} {r['d_k']:>4} {r['d_v']:>4} "
            f"{r['params'] / 1e6:>9.1f}M {paper:>6}"
        )
    return 0
