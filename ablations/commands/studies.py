"""`ablate studies [FILE.yaml] [--rows A,B]`: list the built-in studies and presets, or validate a study file at every
preset; with --rows, which of its claims those rows leave untested."""

from __future__ import annotations

from argparse import SUPPRESS

from ablate.ablations.commands.options import command_parser, own_options, parse, print_config
from ablate.ablations.study.definition import builtin_studies, coverage_summary, load_study, parse_rows
from ablate.ablations.study.presets import PRESETS
from ablate.data.errors import AblateError
from ablate.data.sources import resolve


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
        return print_config(own_options(args))

    if getattr(args, "files", None):
        for path in args.files:
            study = load_study(path)
            rows = parse_rows(args.rows, [row.name for row in study.rows])
            check_corpora(study, path)
            print(f"{path}: ok ({len(study.rows)} rows, {study.seeds} seed(s), scale {study.scale})")
            for warning in head_warnings(study):
                print(f"  warning: {warning}")
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


def head_warnings(study) -> list[str]:
    """Rows that change the number of heads but not d_k: h x d_k no longer equals d_model (Table 3's rows A keep
    it by setting d_k and d_v with h; rows B change d_k alone on purpose), each with what the row then is, at the
    study's own preset (else tiny)."""
    from ablate.lightning_modules.transformer import Transformer  # lazy: loads torch and Lightning (seconds)

    preset = study.default_preset or "tiny"
    out = []
    for row in study.rows:
        model = row.overrides.get("model") or {}
        if "n_heads" not in model or "d_k" in model:
            continue
        cfg = study.run_config(row, preset).model
        if cfg.n_heads * cfg.head_dim_k != cfg.d_model:
            params = Transformer.count(cfg)
            out.append(
                f"row {row.name!r} sets n_heads without d_k: h {cfg.n_heads} x d_k {cfg.head_dim_k} = "
                f"{cfg.n_heads * cfg.head_dim_k}, not d_model {cfg.d_model} ({params / 1e6:.2f}M parameters at "
                f"{preset}); set d_k and d_v with it, as Table 3's rows A do, unless that is the point of the row"
            )
    return out
