"""`ablate archive OUT`: pack a study into one file (`OUT.tar.xz` beside it, or --to FILE) that opens anywhere as the
live folder did: study.json, records, hypotheses, references, pinned corpus and the Optuna storage as a journal file
(rebuilt from the records where OUT has none). No checkpoints, W&B files or logs. Extract it with
`tar -xJf FILE -C DIR`; then `ablate status DIR/NAME`, `ablate report DIR/NAME`, `optuna-dashboard
DIR/NAME/optuna.journal`, or `ablate sweep ... --out DIR/NAME` to go on training it."""

from __future__ import annotations

import sys
from pathlib import Path

from ablate.ablations.commands.options import command_parser, own_options, parse, print_config
from ablate.ablations.sweep.archive import JOURNAL, main_layout_check, pack, rebuild_storage


def main(argv: list[str]) -> int:
    parser = command_parser("ablate archive", __doc__)
    parser.add_argument("out", help="the study's folder (a sweep's --out)")
    parser.add_argument("--to", default=None, help="the archive to write (default: OUT.tar.xz beside OUT)")
    parser.add_argument(
        "--study", default=None, help="the study's YAML file, where study.json names a study that is not built in"
    )
    args = parse(parser, argv)
    if args.print_config:
        return print_config(own_options(args))

    out = Path(args.out)
    main_layout_check(out)
    if not (out / JOURNAL).is_file():
        print(f"ablate archive: rebuilding {out / JOURNAL} from the records", file=sys.stderr)
        rebuild_storage(out, args.study)
    to = Path(args.to) if args.to else out.resolve().with_name(f"{out.resolve().name}.tar.xz")
    written = pack(out, to)
    print(f"{to}: {', '.join(written)} ({to.stat().st_size / 1e6:.1f} MB)")
    return 0
