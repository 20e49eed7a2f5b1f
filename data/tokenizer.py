"""The joint SentencePiece tokenizer (Section 5.1: a shared source-target vocabulary of byte-pair encodings).

Ids 0-3 are fixed (pad, unk, bos, eos) so that the model, the batches and the decoder agree on them without reading
the model file. SentencePiece rather than a hand-written BPE: it is the well-kept library the field uses, trains in
memory in seconds and encodes in C++ threads.
"""

from __future__ import annotations

import io
import os
import re
from collections.abc import Iterable

import sentencepiece as spm
from ablate.data.errors import ConfigError

PAD_ID, UNK_ID, BOS_ID, EOS_ID = 0, 1, 2, 3

_TOO_HIGH = re.compile(r"Vocabulary size too high \((\d+)\)\. Please set it to a value <= (\d+)")
_TOO_LOW = re.compile(r"Vocabulary size is smaller than required_chars\. (\d+) vs (\d+)")

TRAIN_CALLS = 0
"""How many tokenizers this process has trained: the tests use it to prove that a warm prepare never retrains."""


class Tokenizer:
    """A loaded SentencePiece model with the project's fixed special ids."""

    def __init__(self, processor: spm.SentencePieceProcessor, path: str) -> None:
        self._sp = processor
        self.path = path
        self.vocab_size: int = processor.get_piece_size()
        # The special ids the model and the decoders use come from here (trained in as PAD_ID, ..., EOS_ID below).
        self.pad_id, self.bos_id, self.eos_id = processor.pad_id(), processor.bos_id(), processor.eos_id()

    @classmethod
    def load(cls, path: str | os.PathLike) -> Tokenizer:
        processor = spm.SentencePieceProcessor()
        processor.load(os.fspath(path))
        return cls(processor, os.fspath(path))

    @classmethod
    def from_bytes(cls, model: bytes, path: str = "<embedded>") -> Tokenizer:
        """A tokenizer from its model file's bytes (`model_bytes`): a trained model's file carries its own."""
        processor = spm.SentencePieceProcessor()
        processor.load_from_serialized_proto(model)
        return cls(processor, path)

    def model_bytes(self) -> bytes:
        """The SentencePiece model file's bytes: `from_bytes` gives the same tokenizer back."""
        return self._sp.serialized_model_proto()

    def vocabulary(self) -> list[tuple[str, float, str]]:
        """Every piece with its score and kind (normal, control, unknown, unused, byte), by id: what the model
        encodes with, without the training settings its file also records (the thread count among them)."""
        sp = self._sp
        kinds = (("control", sp.is_control), ("unknown", sp.is_unknown), ("unused", sp.is_unused), ("byte", sp.is_byte))
        return [
            (sp.id_to_piece(i), sp.get_score(i), next((kind for kind, test in kinds if test(i)), "normal"))
            for i in range(self.vocab_size)
        ]

    def encode(self, texts: list[str]) -> list[list[int]]:
        """Subword ids of each text, without bos/eos (the batches add them)."""
        return self._sp.encode(list(texts), out_type=int, num_threads=os.cpu_count() or 1)

    def decode(self, ids: list[list[int]]) -> list[str]:
        """Text of each id sequence, up to its first eos; pad and bos are ignored wherever they are."""
        out = []
        for seq in ids:
            seq = [int(i) for i in seq]
            if self.eos_id in seq:
                seq = seq[: seq.index(self.eos_id)]
            out.append([i for i in seq if i not in (self.pad_id, self.bos_id)])
        return self._sp.decode(out)


def train_bytes(sentences: Iterable[str], *, vocab_size: int, model_type: str) -> bytes:
    """Train a joint model in memory and return the model file's bytes (the caller writes them atomically).

    A vocabulary too large for the corpus is rephrased as a one-line ConfigError that says which value would work.
    """
    global TRAIN_CALLS
    TRAIN_CALLS += 1
    model = io.BytesIO()
    try:
        spm.SentencePieceTrainer.train(
            sentence_iterator=iter(sentences),
            model_writer=model,
            vocab_size=vocab_size,
            model_type=model_type,
            character_coverage=1.0,
            pad_id=PAD_ID,
            unk_id=UNK_ID,
            bos_id=BOS_ID,
            eos_id=EOS_ID,
            input_sentence_size=2_000_000,  # WMT-sized inputs are sampled; the built-in corpus is used whole
            shuffle_input_sentence=True,
            num_threads=os.cpu_count() or 1,
            minloglevel=2,
        )
    except RuntimeError as err:
        too_low = _TOO_LOW.search(str(err))
        if too_low is not None:  # every character must get a piece, plus the 4 special ids
            need = int(too_low.group(2)) + 4
            raise ConfigError(
                f"data.vocab_size={vocab_size} is smaller than the corpus's {too_low.group(2)} distinct characters: "
                f"use --data.vocab_size {need} or more"
            ) from None
        match = _TOO_HIGH.search(str(err))
        if match is None:
            raise ConfigError(f"SentencePiece could not train on this corpus: {' '.join(str(err).split())}") from None
        limit = int(match.group(2))
        raise ConfigError(
            f"data.vocab_size={vocab_size} is too large for this training corpus (SentencePiece allows at most "
            f"{limit} here): use --data.vocab_size {limit} or less, or more training text"
        ) from None
    return model.getvalue()
