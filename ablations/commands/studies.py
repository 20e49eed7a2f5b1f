"""`ablate studies [FILE.yaml]`: list the built-in studies and presets, or validate a study file at every preset."""

from __future__ import annotations

from argparse import SUPPRESS

from ablate.ablations.commands.options import command_parser, options, parse, print_config
from ablate.ablations.presets import PRESETS


def main(argv: list[str]) -> int:
    parser = command_parser("ablate studies", __doc__)
    parser.add_argument("files", nargs="*", default=SUPPRESS, help="study YAML files to validate")
    args = parse(parser, argv)
    if args.print_config:
        return print_config(options(args))
    from ablate.ablations.studies import builtin_studies, load_study

    if getattr(args, "files", None):
        for path in args.files:
            study = load_study(path)
            print(f"{path}: ok ({len(study.rows)} rows, {study.seeds} seed(s), scale {study.scale})")
        return 0
    print("built-in studies:")
    for name in builtin_studies():
        study = load_study(name)
        print(f"  {name:<10} {len(study.rows)} rows  {study.description}")
    print("presets:")
    for preset in PRESETS.values():
        print(f"  {preset.name:<10} {preset.description}")
    return 0
