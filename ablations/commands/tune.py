"""`ablate tune STUDY --row R --trials N`: search the study's search_space for one row (TPE, pruned per validation).

In a `scale: paper` study (table3) the ranges are in the paper's units and the preset maps them to its own, as it
does the rows. --objective (default: the study's tune_objective) is bleu, ppl, or both: with both, the best trial is
the best dev BLEU among those within 10% of the best dev PPL. Diverged trials fail and are never picked.
The best values land in OUT/best.yaml; apply them to a whole study with `ablate sweep STUDY --config OUT/best.yaml`.
Running the same command again continues the search up to --trials.
"""

from __future__ import annotations

import sys
from pathlib import Path

from ablate.ablations.commands.options import (
    command_parser,
    overrides,
    own_options,
    parse,
    print_config,
    wants_help,
)
from ablate.ablations.runtime.urls import storage_url
from ablate.ablations.study.config import SECTIONS
from ablate.ablations.study.definition import load_study
from ablate.ablations.study.presets import PRESETS
from ablate.data.errors import AblateError


def build_parser(documented: bool = False):
    p = command_parser("ablate tune", __doc__, sections=SECTIONS, documented=documented)
    p.add_argument("study", help="built-in study (table3) or a study YAML file with a search_space")
    p.add_argument("--row", default="base", help="row to tune (default base)")
    p.add_argument("--trials", type=int, default=20, help="trials in total (default 20)")
    p.add_argument("--preset", choices=list(PRESETS), default=None, help="size preset (default: the study's, or tiny)")
    p.add_argument(
        "--storage",
        default=None,
        help="Optuna storage URL (default: $ABLATE_STORAGE, else a journal file in --out); "
        "a password is best given through ABLATE_STORAGE",
    )
    p.add_argument("--out", default=None, help="output directory (default runs/<study>-<preset>-tune-<row>)")
    p.add_argument("--seed", type=int, default=0, help="seed of the sampler and of the training runs")
    p.add_argument(
        "--objective",
        choices=["bleu", "ppl", "both"],
        default=None,
        help="what to optimise: dev BLEU, dev PPL or both (default: the study's tune_objective, else bleu)",
    )
    return p


def main(argv: list[str]) -> int:
    args = parse(build_parser(documented=wants_help(argv)), argv)
    extra = overrides(args)
    if args.print_config:
        return print_config({**own_options(args), **extra})
    from ablate.ablations.sweep.tune import TuneJob, describe_space, run_tune, search_space  # lazy: loads torch

    study = load_study(args.study)
    if not study.search_space:
        raise AblateError(
            f"{study.source}: no search_space to tune; add e.g. search_space: {{train.lr_factor: "
            "{low: 0.25, high: 4.0, log: true}}"
        )
    if args.trials < 1:
        raise AblateError(f"--trials must be >= 1, got {args.trials}")
    study.row(args.row)
    preset = args.preset or study.default_preset or "tiny"
    name = f"{study.name}-{preset}-tune-{args.row}"
    out = Path(args.out or f"runs/{name}")
    out.mkdir(parents=True, exist_ok=True)
    job = TuneJob(
        study=study,
        row=args.row,
        preset=preset,
        trials=args.trials,
        out=out,
        storage=storage_url(args.storage, out),
        name=name,
        extra=extra,
        seed=args.seed,
        objective=args.objective or study.tune_objective,
    )
    print(
        f"ablate tune: {study.name} row {args.row} at preset {preset}, objective {job.objective}; searching "
        f"{describe_space(search_space(study, preset))}",
        file=sys.stderr,
    )
    summary = run_tune(job)
    if summary["best"] is None:
        print(f"no trial finished ({summary['trials']} trials): see {out}/trials/*/", file=sys.stderr)
        return 1
    params = ", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in summary["params"].items())
    scores = ", ".join(f"dev {m.upper()} {summary[m]:.2f}" for m in ("bleu", "ppl") if m in summary)
    print(
        f"best of {summary['trials']} trials ({summary['failed']} failed; objective {summary['objective']}): "
        f"trial {summary['best']}, {scores}: {params}"
    )
    print(f"apply to a sweep: ablate sweep {args.study} --preset {preset} --config {out / 'best.yaml'}")
    return 0
