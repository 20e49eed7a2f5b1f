"""`ablate train`: one run. Starts from a study row at a preset, then applies --config files and --section.field
overrides (jsonargparse, as LightningCLI does); --print_config shows the fully resolved config and exits."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from ablations.commands.options import command_parser, options, overrides, parse, print_config
from ablations.config import SECTIONS, RunConfig
from ablations.presets import PRESETS

DESCRIPTION = """Train one configuration and print its dev BLEU and perplexity.

The starting point is a row of a study at a preset (default: table3 base at the tiny preset, on the built-in
corpus). On top of it: --config FILE.yaml (sections model, train, data, hardware, tracking) and individual
overrides such as --model.d_k 16 --train.max_steps 500 --data.corpus path/to/dir. --print_config prints the fully
resolved config as YAML and exits; save it and pass it back with --config to rerun exactly."""


def build_parser():
    parser = command_parser("ablate train", DESCRIPTION, sections=SECTIONS)
    parser.add_argument("--study", default="table3", help="built-in study name or a study YAML file")
    parser.add_argument("--row", default="base", help="row of the study to start from")
    parser.add_argument("--preset", default="tiny", help=f"size preset: {', '.join(PRESETS)}")
    parser.add_argument("--seed", type=int, default=0, help="training seed (weights and dropout)")
    parser.add_argument(
        "--out", default=None, help="output directory (default runs/train/<study>-<row>-<preset>-s<seed>)"
    )
    parser.add_argument("--json", action="store_true", help="print the final metrics as JSON")
    parser.add_argument("--resume", action="store_true", help="continue from <out>/checkpoints/last.ckpt if present")
    return parser


def main(argv: list[str]) -> int:
    from ablations.studies import load_study

    ns = parse(build_parser(), argv)
    study = load_study(ns.study)
    run = study.run_config(ns.row, ns.preset, seed=ns.seed, **overrides(ns))
    if ns.print_config:  # every field resolved: passed back with --config, it reruns exactly this
        return print_config({**options(ns), **run.to_dict()})
    out = Path(ns.out or f"runs/train/{study.name}-{ns.row}-{ns.preset}-s{ns.seed}")
    return _train(run, out, name=f"{ns.row}-s{ns.seed}", group=study.name, as_json=ns.json, resume=ns.resume)


def _train(run: RunConfig, out: Path, *, name: str, group: str, as_json: bool, resume: bool) -> int:
    import yaml

    started = time.time()
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.yaml").write_text(yaml.safe_dump(run.to_dict(), sort_keys=False), encoding="utf-8")
    from ablations.train import train
    from lightning_modules.module import TrainingDiverged

    try:
        result = train(run, out, name=name, group=group, started_at=started, resume=resume)
    except TrainingDiverged as err:
        print(f"{name}: diverged: {err}", file=sys.stderr)
        return 1
    if result is None:
        return 0
    m = result.metrics
    if as_json:
        print(json.dumps(m, indent=2))
    else:
        bleu = f"{m['bleu']:.2f}" if m.get("bleu") is not None else "n/a"
        print(
            f"{name}: dev BLEU {bleu}  dev PPL {m['ppl']:.2f}  params {m['params'] / 1e6:.2f}M  "
            f"{m['steps']} steps in {m['train_time_s']:.0f}s ({m['step_time_s'] * 1000:.0f} ms/step, "
            f"{m['tokens_per_sec']:,.0f} tok/s on {m['device']})\n"
            f"sacrebleu: {m.get('bleu_signature')}\nresults: {out / 'result.json'}",
            file=sys.stdout,
        )
    return 0
