"""`ablate train`: one run. Starts from a study row at a preset, then applies --config files and --section.field
overrides (jsonargparse, as LightningCLI does); --print_config shows the fully resolved config and exits."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from ablations.config import SECTIONS, RunConfig, build_run_config
from ablations.presets import PRESETS
from data.errors import AblateError

DESCRIPTION = """Train one configuration and print its dev BLEU and perplexity.

The starting point is a row of a study at a preset (default: table3 base at the tiny preset, on the built-in
corpus). On top of it: --config FILE.yaml (sections model, train, data, hardware, tracking) and individual
overrides such as --model.d_k 16 --train.max_steps 500 --data.corpus path/to/dir. --print_config prints the fully
resolved config as YAML and exits; save it and pass it back with --config to rerun exactly."""


def _selection(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("--study", default="table3")
    pre.add_argument("--row", default="base")
    pre.add_argument("--preset", default="tiny", choices=list(PRESETS))
    pre.add_argument("--seed", type=int, default=0)
    pre.add_argument("--out", default=None)
    return pre.parse_known_args(argv)


def build_parser(start: RunConfig | None = None):
    from jsonargparse import ActionConfigFile, ArgumentParser

    parser = ArgumentParser(prog="ablate train", description=DESCRIPTION, exit_on_error=False)
    parser.add_argument("--study", default="table3", help="built-in study name or a study YAML file")
    parser.add_argument("--row", default="base", help="row of the study to start from")
    parser.add_argument("--preset", default="tiny", help=f"size preset: {', '.join(PRESETS)}")
    parser.add_argument("--seed", type=int, default=0, help="training seed (weights and dropout)")
    parser.add_argument(
        "--out", default=None, help="output directory (default runs/train/<study>-<row>-<preset>-s<seed>)"
    )
    parser.add_argument("--json", action="store_true", help="print the final metrics as JSON")
    parser.add_argument("--resume", action="store_true", help="continue from <out>/checkpoints/last.ckpt if present")
    parser.add_argument("--config", action=ActionConfigFile, help="YAML file with any of the config sections")
    for section, cls in SECTIONS.items():
        parser.add_class_arguments(cls, section, help=(cls.__doc__ or "").strip().splitlines()[0])
    if start is not None:
        parser.set_defaults({f"{s}.{k}": v for s, values in start.to_dict().items() for k, v in values.items()})
        parser.set_defaults({"model.d_k": start.model.d_k, "model.d_v": start.model.d_v})
    return parser


def main(argv: list[str]) -> int:
    from ablations.studies import load_study

    if any(a in ("-h", "--help") for a in argv):
        build_parser().print_help()
        return 0
    selection, _ = _selection(argv)
    study = load_study(selection.study)
    start = study.run_config(selection.row, selection.preset, seed=selection.seed)
    parser = build_parser(start)
    try:
        ns = parser.parse_args(argv)
    except argparse.ArgumentError as err:
        raise AblateError(" ".join(str(err).split())) from None
    values = ns.as_dict()
    run = build_run_config({s: values[s] for s in SECTIONS})
    out = Path(ns.out or f"runs/train/{study.name}-{selection.row}-{selection.preset}-s{selection.seed}")
    name = f"{selection.row}-s{selection.seed}"
    return _train(run, out, name=name, group=study.name, as_json=ns.json, resume=ns.resume)


def _train(run: RunConfig, out: Path, *, name: str, group: str, as_json: bool, resume: bool) -> int:
    import yaml

    started = time.time()
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.yaml").write_text(yaml.safe_dump(run.to_dict(), sort_keys=False), encoding="utf-8")
    from ablations.train import train

    result = train(run, out, name=name, group=group, started_at=started, resume=resume)
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
