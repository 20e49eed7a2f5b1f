"""`ablate simulate STUDY`: the study's claims at its design, simulated with the code a sweep runs.

    ablate simulate table3 --replicates 10000
    ablate simulate table3 --effect C1=-2 --fixed          # power at a planted 2-BLEU effect, the fixed design
    ablate simulate table3 --unstable C4                   # one claimed row with ten times the seed variance
    ablate simulate table3 --unstable A1,C4 --ratio 10 --least_favourable   # two noisy nulls, every other claim
                                                                            # far off and decided: Holm's worst case
    ablate simulate table3 --grid --replicates 4000 --workers 2              # the guarantee's whole grid

Each replicate draws every row's seeds at T/2 and T and a dev set (seed SDs, their correlation and the sentence noise
of the default archive, or --noise), and runs the study's design as the sweep would: the same looks, tests,
verdicts, family, boundaries and futility rule (`ablations.statistics.simulation`). Prints the family-wise error
with its 95% Monte Carlo interval, how often each comparison was reproduced or wrong, and the trials it cost against
every row at max_seeds. No training.
"""

from __future__ import annotations

import contextlib
import sys
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict
from pathlib import Path

from ablate.ablations.commands.options import command_parser, own_options, parse, print_config
from ablate.ablations.statistics.simulation import (
    Design,
    Noise,
    Spread,
    grid_cells,
    noisy_rows,
    scenario,
    simulate,
    simulate_cell,
)
from ablate.ablations.study import load_study
from ablate.data.atomic import write_json_atomic
from ablate.data.errors import AblateError
from ablate.lightning_modules.metrics import METRICS


def build_parser():
    parser = command_parser("ablate simulate", __doc__)
    parser.add_argument("study", nargs="?", default="table3", help="built-in study name or study YAML file")
    parser.add_argument("--replicates", type=int, default=1000, help="simulated studies (default: 1000)")
    parser.add_argument("--min_seeds", type=int, default=None, help="default: the study's")
    parser.add_argument("--max_seeds", type=int, default=None, help="default: the study's")
    parser.add_argument("--fixed", action="store_true", help="every claimed row at max_seeds, one look")
    parser.add_argument(
        "--effect", action="append", default=[], metavar="ROW=DELTA",
        help="a planted true difference against the base in BLEU (ROW=DELTA or ROW:METRIC=DELTA); repeatable",
    )  # fmt: skip
    parser.add_argument(
        "--unstable", action="append", default=[], metavar="ROWS",
        help="rows whose seeds vary --ratio times the others' (comma-separated or repeated; 'all': every claimed row)",
    )  # fmt: skip
    parser.add_argument(
        "--ratio", type=float, default=10.0, help="the unstable rows' seed variance ratio (default: 10)"
    )
    parser.add_argument("--tails", choices=["normal", "t3"], default="normal",
                        help="seeds drawn normal or from Student's t on 3 df (same SD)")  # fmt: skip
    scenario = parser.add_mutually_exclusive_group()
    scenario.add_argument(
        "--least_favourable", action="store_true",
        help="the unstable rows (or the first claimed row) at their null, every other comparison far off and decided",
    )  # fmt: skip
    scenario.add_argument(
        "--mixed", action="store_true",
        help="every second comparison of the rows not unstable far off, every other at its null",
    )  # fmt: skip
    parser.add_argument("--grid", action="store_true", help="run the guarantee's grid (docs/method/verdicts.md)")
    parser.add_argument("--workers", type=int, default=1, help="processes the grid's cells run on (default: 1)")
    parser.add_argument("--json", default=None, metavar="FILE", help="also write the results as JSON")
    parser.add_argument(
        "--noise", default=None, metavar="SD_HALF,SD_FULL,CORR,SENTENCE_SE",
        help="seed SD at T/2 and T, their correlation, the sentence SE of a difference (default: 1.13,0.85,0.76,0.35)",
    )  # fmt: skip
    parser.add_argument("--seed", type=int, default=0, help="the simulation's random seed")
    return parser


def main(argv: list[str]) -> int:
    args = parse(build_parser(), argv)
    if args.print_config:
        return print_config(own_options(args))
    study = load_study(args.study)
    rows = [r.name for r in study.rows]
    _base(study, args.study)
    if args.replicates < 1:
        raise AblateError(f"--replicates must be at least 1, got {args.replicates}")
    if args.workers < 1:
        raise AblateError(f"--workers must be at least 1, got {args.workers}")
    if args.ratio <= 0:
        raise AblateError(f"--ratio must be a positive variance ratio, got {args.ratio}")
    if args.grid:
        results = run_grid(args.study, replicates=args.replicates, workers=args.workers, seed=args.seed)
        _print_grid(results)
        _write_json(args.json, results)
        return 0
    result, header = _one(args, study, rows)
    print(header)
    print(f"family-wise error {result.fwer:.4f} (95% interval up to {result.fwer_upper:.4f})")
    print(f"trials {result.trials:.1f} on average, {result.most_trials} with every row at max_seeds")
    for key, share in result.reproduced.items():
        print(f"  {key:<32} reproduced {share:.3f}  wrong {result.wrong[key]:.3f}")
    _write_json(args.json, [{"fwer": result.fwer, "fwer_upper": result.fwer_upper, "trials": result.trials,
                             "reproduced": result.reproduced, "wrong": result.wrong}])  # fmt: skip
    return 0


def _one(args, study, rows: list[str]):
    """The single case the options describe: its result and a header line."""
    base = _base(study, args.study)
    unstable = [r for spec in args.unstable for r in spec.split(",") if r]
    if unstable == ["all"]:
        unstable = noisy_rows(study.claims, base, "all")
    for row in unstable:
        if row not in rows:
            raise AblateError(f"--unstable: unknown row '{row}' (rows: {', '.join(rows)}, or all)")
    kind = "least_favourable" if args.least_favourable else "mixed" if args.mixed else None
    effects = {}
    if kind is not None:
        nulls = unstable or noisy_rows(study.claims, base, 1)
        effects = scenario(kind, study.claims, base, nulls=nulls, metrics=METRICS)
    effects |= dict(_row(spec, rows, "--effect") for spec in args.effect)
    most = args.max_seeds or study.max_seeds
    least = most if args.fixed else (args.min_seeds or study.min_seeds)
    if not 1 <= least <= most:
        raise AblateError(f"--min_seeds ({least}) must be between 1 and --max_seeds ({most})")
    noise = Noise() if args.noise is None else _noise(args.noise)
    design = Design(min_seeds=least, max_seeds=most)

    def progress(done: int, total: int) -> None:
        if done == total or done % max(total // 20, 1) == 0:
            print(f"\rsimulated {done}/{total}", end="\n" if done == total else "", file=sys.stderr, flush=True)

    result = simulate(list(study.claims), rows, base, metrics=METRICS, effects=effects,
                      spread=Spread(unstable, args.ratio, args.tails), design=design, noise=noise,
                      replicates=args.replicates, seed=args.seed, progress=progress)  # fmt: skip
    name = "fixed" if least == most else "sequential"
    header = f"{study.name}: {name} design, {least} to {most} seeds a row, {result.replicates} replicates"
    if unstable:
        header += f"; {', '.join(unstable)} at {args.ratio:g}x the seed variance"
    if kind is not None:
        header += f"; {kind.replace('_', ' ')}"
    return result, header + ("; t(3) seeds" if args.tails == "t3" else "")


def run_grid(study: str, *, replicates: int, workers: int = 1, seed: int = 0) -> list[dict]:
    """Every cell of the guarantee's grid (`ablations.statistics.simulation.grid_cells`) for `study`, each at
    `replicates` and its own seed (`seed` + its index), on `workers` processes: a list of dicts, one a cell."""
    cells = grid_cells([study])
    jobs = [(cell, replicates, seed + i) for i, cell in enumerate(cells)]
    out = []
    with ProcessPoolExecutor(workers) if workers > 1 else contextlib.nullcontext() as pool:
        for result in pool.map(_cell, jobs) if pool is not None else map(_cell, jobs):
            out.append(result)  # the cells in order: a cell's line once it and every one before it are done
            print(f"\rsimulated {len(out)}/{len(jobs)} cells", end="", file=sys.stderr, flush=True)
    print(file=sys.stderr)
    return out


def _cell(job) -> dict:
    """One grid cell, simulated (a process pool's task: a module-level function)."""
    cell, replicates, seed = job
    study = load_study(cell.study)
    design = Design(min_seeds=study.min_seeds, max_seeds=study.max_seeds)
    result, noisy = simulate_cell(cell, list(study.claims), [r.name for r in study.rows], _base(study, cell.study),
                                  metrics=METRICS, design=design, replicates=replicates, seed=seed)  # fmt: skip
    return {**asdict(cell), "name": cell.name, "rows": noisy, "seed": seed, "replicates": replicates,
            "fwer": result.fwer, "fwer_upper": result.fwer_upper, "trials": result.trials}  # fmt: skip


def _base(study, name: str) -> str:
    """The study's base row; a study without one, or without claims, cannot be simulated."""
    if not study.claims or study.base_name is None:
        raise AblateError(f"{name}: a simulation needs claims and a base row; add `claims:` to the study")
    return study.base_name


def _print_grid(results: list[dict]) -> None:
    worst = max(results, key=lambda r: r["fwer_upper"])
    for r in results:
        mark = "" if r["fwer_upper"] <= 0.05 else "  ABOVE 5%"
        print(f"  {r['name']:<52} FWER {r['fwer']:.4f} (95% upper {r['fwer_upper']:.4f}), "
              f"{r['trials']:.1f} trials{mark}")  # fmt: skip
    held = sum(r["fwer_upper"] <= 0.05 for r in results)
    print(f"{held} of {len(results)} cells hold the 5% at their 95% upper bound; the worst: {worst['name']}, "
          f"{worst['fwer']:.4f} (upper {worst['fwer_upper']:.4f})")  # fmt: skip


def _write_json(path: str | None, results: list[dict]) -> None:
    if path is None:
        return
    write_json_atomic(Path(path), results)


def _row(spec: str, rows: list[str], option: str) -> tuple[tuple[str, str], float]:
    """'C1=-2' or 'D3:ppl=-1.5' -> ((row, metric), delta)."""
    name, _, value = spec.partition("=")
    row, _, metric = name.partition(":")
    if row not in rows:
        raise AblateError(f"{option} {spec}: unknown row '{row}' (rows: {', '.join(rows)})")
    try:
        return (row, metric or "bleu"), float(value)
    except ValueError:
        raise AblateError(f"{option} {spec}: write ROW=DELTA, e.g. C1=-2") from None


def _noise(text: str):
    try:
        half, full, corr, sentence = (float(x) for x in text.split(","))
    except ValueError:
        raise AblateError(f"--noise {text}: write four numbers, SD_HALF,SD_FULL,CORR,SENTENCE_SE") from None
    return Noise(seed_sd=(half, full), correlation=corr, sentence_se=sentence)
