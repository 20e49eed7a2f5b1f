"""`ablate studies [FILE.yaml] [--rows A,B]`: list the built-in studies and presets, or validate a study file at every
preset; with --rows, which of its claims those rows leave untested."""

from __future__ import annotations

from argparse import SUPPRESS

from ablate.ablations.commands.options import command_parser, options, parse, print_config
from ablate.ablations.presets import PRESETS
from ablate.data.errors import AblateError


def main(argv: list[str]) -> int:
    parser = command_parser("ablate studies", __doc__)
    parser.add_argument("files", nargs="*", default=SUPPRESS, help="study YAML files (or built-in names) to validate")
    parser.add_argument(
        "--rows",
        default=None,
        help="a --rows subset as `ablate sweep` takes it: say which of each study's claims it tests, and which rows "
        "the others need",
    )
    args = parse(parser, argv)
    if args.print_config:
        return print_config(options(args))
    from ablate.ablations.studies import builtin_studies, coverage_summary, load_study, parse_rows

    if getattr(args, "files", None):
        for path in args.files:
            study = load_study(path)
            rows = parse_rows(args.rows, study)
            check_corpora(study, path)
            print(f"{path}: ok ({len(study.rows)} rows, {study.seeds} seed(s), scale {study.scale})")
            if rows is not None:
                summary = coverage_summary(study, rows) or f"test every claim ({len(study.claims)})"
                print(f"  --rows {','.join(rows)} {summary}")
        return 0
    if args.rows is not None:
        raise AblateError("--rows: name the study it selects from, e.g. ablate studies modern --rows base,E1")
    print("built-in studies:")
    for name in builtin_studies():
        study = load_study(name)
        print(f"  {name:<10} {len(study.rows)} rows  {study.description}")
    print("presets:")
    for preset in PRESETS.values():
        print(f"  {preset.name:<10} {preset.description}")
    return 0


def check_corpora(study, path: str) -> None:
    """Every corpus the study's rows read is there (a folder, a TSV file, a gettext language), at the study's own
    preset (else tiny): one line naming the row and the corpus otherwise. Nothing is read or prepared."""
    from ablate.data.sources import resolve

    preset = study.default_preset or "tiny"
    seen: dict[tuple, str] = {}
    for row in study.rows:
        data = study.run_config(row, preset).data
        key = (data.corpus, data.src, data.tgt)
        if key in seen:
            continue
        seen[key] = row.name
        try:
            resolve(data)
        except AblateError as err:
            raise AblateError(f"{path}: row {row.name!r}: {err}") from None
