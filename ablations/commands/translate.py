"""`ablate translate MODEL`: decode text with a trained model, as fairseq-interactive does, and score it if asked.

MODEL is a model file (`model.pt`), the folder of an `ablate train --out` run, or a sweep's folder with --row and
--seed. One source sentence a line from --input (default: standard input); one translation a line on standard
output, in the input's order. The decoding is the one the model was scored with (beam, length penalty, length
limit), unless --beam or --length_penalty say otherwise. With --refs, sacreBLEU's BLEU and chrF of the translations
against those references (one a line) go to standard error, with their signatures.
"""

from __future__ import annotations

import json
import sys
from dataclasses import replace
from pathlib import Path

from ablate.ablations.commands.options import command_parser, own_options, parse, print_config
from ablate.ablations.results.record import Layout
from ablate.data.errors import AblateError, did_you_mean, foreign_encoding, not_utf8


def build_parser():
    parser = command_parser("ablate translate", __doc__)
    parser.add_argument("model", help="a model.pt, a run folder holding one, or a sweep folder (with --row, --seed)")
    parser.add_argument("--row", default=None, help="in a sweep folder: the row whose model to use")
    parser.add_argument("--seed", type=int, default=0, help="in a sweep folder: the seed (default 0)")
    parser.add_argument("--input", default="-", help="source sentences, one a line ('-': standard input)")
    parser.add_argument("--refs", default=None, help="reference translations, one a line: score with sacreBLEU")
    parser.add_argument("--beam", type=int, default=None, help="beam size (default: as trained; 1 is greedy)")
    parser.add_argument("--length_penalty", type=float, default=None, help="alpha (default: as trained)")
    parser.add_argument("--batch_size", type=int, default=64, help="sentences decoded together (default 64)")
    parser.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto", help="where to decode")
    return parser


def main(argv: list[str]) -> int:
    args = parse(build_parser(), argv)
    if args.print_config:
        return print_config(own_options(args))
    if args.batch_size < 1 or (args.beam is not None and args.beam < 1):
        raise AblateError(f"--batch_size and --beam must be at least 1, got {args.batch_size} and {args.beam}")
    path = model_file(Path(args.model), args.row, args.seed)
    sources = _read_lines(args.input, "--input")
    references = _read_lines(args.refs, "--refs") if args.refs else None
    if references is not None and len(references) != len(sources):
        raise AblateError(f"--refs {args.refs} has {len(references)} lines for {len(sources)} source lines")

    from ablate.ablations.training import weights  # lazy: loads torch and Lightning (seconds)

    trained = weights.load(path)
    hypotheses = translate(trained, sources, args.beam, args.length_penalty, args.batch_size, args.device)
    for line in hypotheses:
        print(line)
    if references is not None:
        from ablate.lightning_modules.module import corpus_scores  # lazy: loads torch and Lightning (seconds)

        scores = corpus_scores(dict(enumerate(hypotheses)), references)
        print(f"BLEU {scores['bleu']:.2f}  chrF {scores['chrf']:.2f}  ({len(hypotheses)} sentences)", file=sys.stderr)
        print(f"  {scores['bleu_signature']}\n  {scores['chrf_signature']}", file=sys.stderr)
    return 0


def model_file(path: Path, row: str | None, seed: int) -> Path:
    """The model.pt that MODEL names (see the module's docstring), or a one-line error saying what is there."""
    from ablate.ablations.training.weights import FILE  # lazy: loads torch and Lightning (seconds)

    if path.is_file():
        return path
    if not path.is_dir():
        raise AblateError(f"{path}: no such file or folder; give a model.pt, a run folder or a sweep folder")
    if (path / FILE).is_file() and row is None:
        return path / FILE
    layout = Layout(path)
    if not layout.study_file.is_file():
        raise AblateError(f"{path}: holds no {FILE} and no study.json; give a model.pt, a run folder or a sweep folder")
    trained = sorted(p.parent.name for p in layout.trials_dir.glob(f"*/{FILE}"))
    _check_row_and_weights(path, layout, row, seed, trained)
    if row is None:
        raise AblateError(f"{path} is a sweep: choose a model with --row and --seed (trained: {_listing(trained)})")
    found = layout.trial_dir(row, seed) / FILE
    if not found.is_file():
        raise AblateError(
            f"{path}: no trained model for row {row} seed {seed} (trained: {_listing(trained)}); a trial keeps "
            f"its {FILE} once it has finished"
        )
    return found


def _check_row_and_weights(path: Path, layout, row: str | None, seed: int, trained: list[str]) -> None:
    """A row the study does not have, or a sweep folder whose finished trials kept no weights (an archive keeps
    records, hypotheses and references only), in one line saying what is there and how to get a model."""

    try:
        spec = json.loads(layout.study_file.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return  # read and reported as damaged by the commands that need it
    rows = [str(r["name"]) for r in spec.get("rows", []) if isinstance(r, dict) and "name" in r]
    if row is not None and rows and row not in rows:
        raise AblateError(f"{path}: the study has no row {row!r}{did_you_mean(row, rows)}; its rows: {', '.join(rows)}")
    finished = len(list(layout.records_dir.glob("*.json")))
    if finished and not trained:
        example = row or (rows[0] if rows else "ROW")
        raise AblateError(
            f"{path} holds {finished} finished trial(s) but no model weights (an archive keeps records only): "
            f"retrain one, e.g. ablate train --study {spec.get('study', 'STUDY')} --row {example} --seed {seed} "
            f"--preset {spec.get('preset', 'PRESET')} --out DIR, and translate with DIR"
        )


def _listing(keys: list[str]) -> str:
    return ", ".join(keys[:12]) + (f" and {len(keys) - 12} more" if len(keys) > 12 else "") if keys else "none yet"


def _read_lines(name: str, flag: str) -> list[str]:
    if name == "-":
        return [line.rstrip("\n") for line in sys.stdin]
    try:
        raw = Path(name).read_bytes()
    except OSError as err:
        raise AblateError(f"{flag} {name}: {err.strerror or err}") from None
    try:
        if foreign_encoding(raw) is not None:  # UTF-16 decodes as 'UTF-8' full of NULs: say what it is
            raise UnicodeDecodeError("utf-8", raw, 0, 1, "another encoding")
        return raw.decode("utf-8").splitlines()
    except UnicodeDecodeError as err:
        raise AblateError(f"{flag} {not_utf8(name, raw, err.start)}") from None


def _warn_long(encoded: list[list[int]], max_len: int, learned: bool) -> None:
    """One line on stderr when some sources are longer than the model's max_len (eos included): what happens to
    them, and the longest, so that a cut or empty translation is not a surprise."""
    long = [(i, len(seq)) for i, seq in enumerate(encoded, 1) if len(seq) + 1 > max_len]
    if not long:
        return
    line, size = max(long, key=lambda item: item[1])
    what = (f"learned positions: each is cut to its first {max_len - 1} subwords" if learned else
            "no training sentence was this long: expect a poor, short or empty translation")  # fmt: skip
    print(f"ablate translate: warning: {len(long)} line(s) longer than the model's max_len of {max_len} subwords "
          f"(the longest, line {line}: {size}); {what}; split such lines into sentences", file=sys.stderr)  # fmt: skip


WIDEST_BEAM = 64
"""A beam wider than this gets a warning: translation uses 4 to 10 (the paper 4), BLEU gains nothing past that, and
decoding keeps beam x vocabulary scores a step, so its time and memory grow with the beam."""


def _warn_beam(beam: int | None, vocabulary: int) -> None:
    """One line on stderr when --beam is wider than the model's vocabulary or than WIDEST_BEAM: it runs, slowly."""
    if beam is None or (beam <= vocabulary and beam <= WIDEST_BEAM):
        return
    why = f"wider than the model's vocabulary of {vocabulary} subwords" if beam > vocabulary else f"over {WIDEST_BEAM}"
    print(f"ablate translate: warning: --beam {beam} is {why}: it decodes far slower and in far more memory for no "
          "gain in BLEU (translation uses 4 to 10; the model was scored with its own)", file=sys.stderr)  # fmt: skip


def translate(trained, sources: list[str], beam: int | None, alpha: float | None, batch_size: int, device: str):
    """Translations of `sources` in their order: encoded as training encodes a source (subwords, eos, right
    padding), decoded in batches of similar length."""
    import torch  # lazy: torch costs ~1 s; --help must not pay it
    from ablate.data.tokenizer import EOS_ID, PAD_ID  # lazy: loads sentencepiece, which --help does not need

    module = trained.module
    _warn_beam(beam, module.model_config.vocab_size)
    settings = {"beam_size": beam, "length_penalty": alpha}
    module.train_config = replace(module.train_config, **{k: v for k, v in settings.items() if v is not None})
    on = torch.device("cuda" if device == "cuda" or (device == "auto" and torch.cuda.is_available()) else "cpu")
    module.to(on)
    encoded = trained.tokenizer.encode(sources)
    learned = module.model_config.positions == "learned"
    _warn_long(encoded, module.model_config.max_len, learned)
    limit = module.model_config.max_len - 1 if learned else None
    ids = [seq[:limit] if limit else seq for seq in encoded]
    order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
    out: dict[int, str] = {}
    for start in range(0, len(order), batch_size):
        chunk = order[start : start + batch_size]
        src = torch.full((len(chunk), max(len(ids[i]) for i in chunk) + 1), PAD_ID, dtype=torch.long)
        for row, i in enumerate(chunk):
            src[row, : len(ids[i])] = torch.tensor(ids[i], dtype=torch.long)
            src[row, len(ids[i])] = EOS_ID
        texts = trained.tokenizer.decode(module.translate(src.to(on)))
        out.update(zip(chunk, texts, strict=True))
    return [out[i] for i in range(len(sources))]
