"""The built-in corpus: deterministic, disjoint splits, 3-40 words, real structure (reordering, morphology)."""

from __future__ import annotations

from ablate.data import corpus

SIZES = {"test": 200, "valid": 200, "train": 2000}


def test_same_seed_same_corpus_and_other_seed_differs():
    assert corpus.generate(3, SIZES) == corpus.generate(3, SIZES)
    assert corpus.generate(3, SIZES)["train"] != corpus.generate(4, SIZES)["train"]


def test_splits_are_disjoint_and_sized():
    out = corpus.generate(0, SIZES)
    seen: set[str] = set()
    for split, size in SIZES.items():
        src, tgt = out[split]
        assert len(src) == len(tgt) == size
        assert not seen & set(src), f"{split} shares sentences with an earlier split"
        seen |= set(src)


def test_test_split_does_not_depend_on_training_size():
    assert corpus.generate(0, SIZES)["test"] == corpus.generate(0, {**SIZES, "train": 500})["test"]


def test_sentence_lengths_are_within_3_and_40_words():
    out = corpus.generate(1, SIZES)
    for src, tgt in out.values():
        for line in src + tgt:
            assert corpus.MIN_WORDS <= len(line.split()) <= corpus.MAX_WORDS


def test_target_is_verb_final_with_agreement_and_ambiguity():
    src, tgt = corpus.generate(2, {"train": 3000})["train"]
    # Past tense: the source verb carries -ed, the target's last word carries the past marker 'ik' + a person suffix.
    past = [t for s, t in zip(src, tgt, strict=True) if s.endswith("ed.") and "," not in s and " that " not in s]
    assert past and sum("ik" in t.split()[-1] for t in past) / len(past) > 0.9
    # A Zipfian lexicon of a few thousand words, and many more inflected target forms than source forms.
    src_types = {w for line in src for w in line.split()}
    tgt_types = {w for line in tgt for w in line.split()}
    assert len(src_types) > 2000 and len(tgt_types) > 1.5 * len(src_types)
    # Synonyms make translation ambiguous: a frequent noun with two target stems shows up under both.
    noun = next(lemma for lemma in corpus._lexicon().cats["noun"].lemmas if len(lemma.tgt) == 2)
    for stem in noun.tgt:
        assert any(w.startswith(stem) for w in tgt_types), stem
