"""`ablate train`: one run. Starts from a study row at a preset and seed, then applies --config files and
--section.field overrides (jsonargparse, as LightningCLI does); --print_config shows the fully resolved run (starting
point, every section field, output directory) in the form --config reads back, and exits."""

from __future__ import annotations

import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml
from ablate.ablations.commands.options import (
    after_configs,
    changed,
    command_parser,
    config_files,
    overrides,
    own_options,
    parse,
    print_config,
    wants_help,
)
from ablate.ablations.study.config import SECTIONS, RunConfig
from ablate.ablations.study.definition import BUILTIN_DIR, load_study, parse_study
from ablate.ablations.study.presets import PRESETS
from ablate.ablations.tracking import RunIdentity
from ablate.data.errors import AblateError

if TYPE_CHECKING:
    from ablate.ablations.study.definition import Row, Study

STUDY, ROW, PRESET, SEED = "table3", "base", "tiny", 0
"""The default starting point: the base row of Table 3 at the tiny preset, seed 0."""

DESCRIPTION = f"""Train one configuration and print its dev BLEU and perplexity.

The starting point is a row of a study at a preset and seed: --study, --row, --preset, --seed (default: {STUDY}
{ROW} at the {PRESET} preset, seed {SEED}, on the built-in corpus). The section defaults shown below are the values
of that default starting point ({STUDY} {ROW} at {PRESET}); --row and --preset change the starting point, and so the
values the run starts from. On top of it: --config FILE.yaml and overrides such as --model.d_k 16
--train.max_steps 500 --data.corpus path/to/dir, later ones winning.

--print_config prints the fully resolved run (its study, row, preset, seed, output directory and every section field)
as YAML and exits; pass it back with --config to rerun exactly that run. After such a file, --seed 3 (or --row,
--preset) starts from that seed (row, preset) instead and keeps the fields the file changes from its own starting
point."""


def build_parser(*, documented: bool = False):
    """The parser of `ablate train`. `documented` (for --help): the sections' options show the default starting
    point's resolved values and their fields' docstrings."""
    parser = command_parser("ablate train", DESCRIPTION, sections=SECTIONS, documented=documented)
    parser.add_argument("--study", default=STUDY, help="built-in study name or a study YAML file")
    parser.add_argument("--row", default=ROW, help="row of the study to start from")
    parser.add_argument("--preset", default=PRESET, help=f"size preset: {', '.join(PRESETS)}")
    # None (not 0) so that a --seed after a --config file can be told apart from the file's train.seed.
    parser.add_argument("--seed", type=int | None, default=None, help="training seed (weights and dropout)")
    parser.add_argument(
        "--out", default=None, help="output directory (default runs/train/<study>-<row>-<preset>-s<seed>)"
    )
    parser.add_argument("--json", action="store_true", help="print the final metrics as JSON")
    parser.add_argument("--resume", action="store_true", help="continue from <out>/checkpoints/last.ckpt if present")
    parser.add_argument(
        "--replace", action="store_true", help="train over a finished run in --out (its model.pt and result.json)"
    )
    if documented:
        parser.set_defaults(_starting_values())
        assert parser.groups is not None  # jsonargparse fills it as sections are added
        for section, cls in SECTIONS.items():
            what = (cls.__doc__ or "").strip().splitlines()[0].split(". ")[0].rstrip(".")  # the dataclass defaults
            parser.groups[section].title = (  # are the paper's, not what a run starts from: leave them unsaid here
                f"{what}. Defaults shown: {STUDY} {ROW} at the {PRESET} preset (--row and --preset change them); an "
                "option left unset keeps the starting point's value"
            )
    return parser


def _starting_values() -> dict[str, Any]:
    """The default starting point's resolved section values and seed, as {"model.d_model": 64, ...}: what --help
    shows as defaults. Only its base and row are read from the built-in study: checking every row (load_study, or
    parse_study on the whole file) takes seconds, and the help should not."""
    path = BUILTIN_DIR / f"{STUDY}.yaml"
    raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    rows = [row for row in raw["rows"] if row["name"] == ROW]
    study = parse_study({**raw, "rows": rows, "claims": None}, source=str(path))
    resolved = study.run_config(ROW, PRESET, seed=SEED).to_dict()
    return {"seed": SEED, **{f"{s}.{k}": v for s, fields in resolved.items() for k, v in fields.items()}}


@dataclass(frozen=True)
class Resolved:
    """What one `ablate train` command line runs."""

    study: Study
    study_arg: str
    """--study as given (a built-in name or a file), for --print_config."""
    row: Row
    preset: str
    run: RunConfig
    """The full config; its train.seed is the run's seed."""
    out: Path


def main(argv: list[str]) -> int:
    parser = build_parser(documented=wants_help(argv))
    ns = parse(parser, argv)
    plan = resolve(parser, argv, ns)
    if ns.print_config:  # every field resolved: passed back with --config, it reruns exactly this
        start = {"study": plan.study_arg, "row": plan.row.name, "preset": plan.preset, "seed": plan.run.train.seed}
        return print_config({**own_options(ns), **start, "out": str(plan.out), **plan.run.to_dict()})
    if not (ns.replace or ns.resume):
        _check_not_finished(plan.out)
    return _train(plan, as_json=ns.json, resume=ns.resume)


def _check_not_finished(out: Path) -> None:
    """A finished run in OUT is not trained over by accident (another row's run would replace its weights and
    results): AblateError saying what is there and the ways on."""
    from ablate.ablations.training.result import TrainResult  # lazy: loads torch and Lightning (seconds)

    done = TrainResult.path(out)
    if not done.is_file():
        return
    try:
        metrics = json.loads(done.read_text(encoding="utf-8")).get("metrics") or {}
    except (OSError, ValueError, AttributeError):
        metrics = {}
    bleu = f", dev BLEU {metrics['bleu']:.2f}" if isinstance(metrics.get("bleu"), int | float) else ""
    steps = f" after {metrics['steps']} steps" if metrics.get("steps") else ""
    raise AblateError(
        f"{out} holds a finished run ({done.name}{steps}{bleu}); pass another --out, or --replace to train over it "
        "(its model.pt and result.json are replaced)"
    )


def resolve(parser, argv: list[str], ns) -> Resolved:
    """The run a command line asks for. The last --study, --row, --preset and --seed choose the starting config (a
    study row at a preset and seed); section values apply on top, later ones winning.

    A value that comes from a --config file (or before one) counts where it differs from the value its own starting
    point gives: a file from --print_config holds every field resolved, so on its own it reruns exactly, a field
    edited in it (d_k 64 in a row B1 file) is kept, and a --seed, --row or --preset after it still changes what
    they decide (train.seed, the row's d_k, the preset's widths) instead of being overwritten by the file's copies.
    The output directory follows the same rule."""
    studies: dict[str, Study] = {}

    def study(name: str) -> Study:
        if name not in studies:
            studies[name] = load_study(name)
        return studies[name]

    cut = after_configs(argv)
    tail = parse(parser, argv[cut:]) if cut else ns
    layer: dict[str, dict[str, Any]] = {}
    out = tail.out
    if cut:
        head = parse(parser, argv[:cut])
        try:
            own = study(head.study).run_config(head.row, head.preset, seed=_seed(head))
        except AblateError as err:
            raise AblateError(f"--config {' '.join(path for path, _ in config_files(argv))}: {err}") from None
        layer = changed(overrides(head), own.to_dict())
        if tail.seed is not None:  # the file's train.seed is its seed written out: a later --seed replaces it
            layer.get("train", {}).pop("seed", None)
        own_out = _default_out(study(head.study), head.row, head.preset, own.train.seed)
        if out is None and head.out is not None and Path(head.out) != own_out:
            out = head.out
    for section, values in overrides(tail).items():
        layer.setdefault(section, {}).update(values)
    chosen = study(ns.study)
    run = chosen.run_config(ns.row, ns.preset, seed=_seed(ns), **layer)
    out_dir = Path(out) if out else _default_out(chosen, ns.row, ns.preset, run.train.seed)
    return Resolved(study=chosen, study_arg=ns.study, row=chosen.row(ns.row), preset=ns.preset, run=run, out=out_dir)


def _seed(ns) -> int:
    return SEED if ns.seed is None else ns.seed


def _default_out(study: Study, row: str, preset: str, seed: int) -> Path:
    return Path(f"runs/train/{study.name}-{row}-{preset}-s{seed}")


def _train(plan: Resolved, *, as_json: bool, resume: bool) -> int:
    started = time.time()
    run, out, seed = plan.run, plan.out, plan.run.train.seed
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.yaml").write_text(yaml.safe_dump(run.to_dict(), sort_keys=False), encoding="utf-8")
    from ablate.ablations.training.train import train  # lazy: loads torch and Lightning (seconds)
    from ablate.lightning_modules.module import TrainingDiverged  # lazy: loads torch and Lightning (seconds)

    who = RunIdentity(plan.study.name, plan.preset, plan.row.name, plan.row.group, seed, run.tracking.label)
    name = who.name
    try:
        result = train(
            run,
            out,
            name=name,
            group=who.group,
            tags=who.tags,
            started_at=started,
            resume=resume,
            extra_config=who.config(),  # the keys a sweep trial's run has
        )
    except TrainingDiverged as err:
        print(f"{name}: diverged: {err}", file=sys.stderr)
        return 1
    if result is None:
        return 0
    from ablate.ablations.training.result import TrainResult  # lazy: loads torch and Lightning (seconds)

    m = result.metrics
    if as_json:
        print(json.dumps(m, indent=2))
    else:
        bleu = f"{m['bleu']:.2f}" if m.get("bleu") is not None else "n/a"
        test = f"  test BLEU {m['test_bleu']:.2f}" if m.get("test_bleu") is not None else ""
        print(
            f"{name}: dev BLEU {bleu}  dev PPL {m['ppl']:.2f}{test}  params {m['params'] / 1e6:.2f}M  "
            f"{m['steps']} steps in {m['train_time_s']:.0f}s ({m['step_time_s'] * 1000:.0f} ms/step, "
            f"{m['tokens_per_sec']:,.0f} tok/s on {m['device']})\n"
            f"sacrebleu: {m.get('bleu_signature')}\nresults: {TrainResult.path(out)}",
            file=sys.stdout,
        )
        for budget in result.budgets:  # the shorter budgets' annealed branches (train.budgets)
            b = budget["metrics"]
            test = f"  test BLEU {b['test_bleu']:.2f}" if b.get("test_bleu") is not None else ""
            print(f"  at {budget['steps']} steps: dev BLEU {b['bleu']:.2f}  dev PPL {b['ppl']:.2f}{test}")
    return 0
