"""The built-in corpus: a synthetic language pair generated from a seed, so the default study needs no download.

Why synthetic: the default study runs on a laptop with no data, yet Table 3's knobs (heads, d_k, depth, dropout,
positions) only matter on a task with real structure. This pair has, by design:

- reordering, short and long: the source is SVO with prepositions, post-nominal relative clauses and sentence-final
  time adverbs; the target is verb-final (SOV) with postpositions, pre-nominal relative clauses and sentence-initial
  time adverbs. The main verb crosses its whole object (relative clauses included), the time adverb crosses the
  whole sentence, and a clausal complement ("says that ...") lands before its verb;
- morphology: target nouns inflect for case and number in one of three lexical genders; articles and adjectives
  agree with their noun (the article across a pre-nominal relative clause); verbs agree with the subject in person
  and number and mark tense. Words are built from syllables, so a subword vocabulary has stems and suffixes to find;
- a Zipfian lexicon of about 3000 lemmas, sentences of 3 to 40 words;
- ambiguity a model cannot resolve (target synonyms, optional particles, dropped subject pronouns, free placement of
  manner adverbs), so that no model reaches BLEU 100, while the core translation stays deterministic and learnable.

The language itself (lexicon, genders, suffix tables) is fixed by ``GENERATOR_VERSION``; the seed draws the sentences,
so different seeds sample the same task. Test and valid are drawn before train and every source sentence is used
once, so the splits are disjoint and test does not change when the training size does.
"""

from __future__ import annotations

import bisect
import functools
import itertools
import random
from dataclasses import dataclass

GENERATOR_VERSION = 1
"""Bump whenever the output for a given seed changes: it is part of every cache key built on this corpus."""

MIN_WORDS, MAX_WORDS = 3, 40
"""Sentence length in words, both sides (issue 3: sentences of 3 to 40 words)."""

_SRC_SYLLABLES = (
    ("b", "d", "f", "g", "h", "k", "l", "m", "n", "p", "r", "s", "t", "v", "w", "br", "st", "tr", "pl", "gr", "sh"),
    ("a", "e", "i", "o", "u", "ea", "oo", "ai"),
    ("", "", "", "n", "r", "t", "l", "m", "nd", "st", "ck"),
)
_TGT_SYLLABLES = (
    ("k", "t", "p", "z", "v", "j", "ts", "kh", "ny", "r", "l", "m", "n", "s", "h", "d", "q", "x"),
    ("a", "e", "i", "o", "u", "ä", "ö", "ü", "aa", "ei"),
    ("", "", "", "k", "n", "r", "l", "ts", "m"),
)
_SOURCE_FUNCTION_WORDS = frozenset(
    "the a some this these that of and but will not does do did very I you he she it we they me him her us them".split()
)

# Target inflection tables: one row per gender, columns (case, number) in the order of _CELLS. Accusative is never
# empty, so case alone tells a subject from an object inside a verb-final relative clause.
_CELLS = [(case, number) for case in ("nom", "acc", "dat", "gen") for number in (0, 1)]


def _table(*rows: str) -> tuple[dict[tuple[str, int], str], ...]:
    return tuple(dict(zip(_CELLS, row.split(","), strict=True)) for row in rows)


_NOUN_SUFFIX = _table(",en,a,an,e,em,is,ir", "o,oj,on,ojn,ol,ojl,os,ojs", "u,ut,um,utem,ur,uter,us,utis")
_ADJ_SUFFIX = _table(
    "ek,eki,ekan,ekin,eke,ekem,ekis,ekir", "ol,oli,olan,olin,ole,olem,olis,olir", "ut,uti,utan,utin,ute,utem,utis,utir"
)
_CASE_ENDING = _table(",i,n,in,m,mi,s,si")[0]  # on articles and pronouns
_ARTICLE = ("ta", "to", "tu")  # definite article stems by gender, inflected with _CASE_ENDING
_TENSE = {"pres": "", "past": "ik", "fut": "um"}
_PERSON = {(1, 0): "o", (2, 0): "es", (3, 0): "et", (1, 1): "am", (2, 1): "ez", (3, 1): "ant"}

# Pronouns: (person, number, gender of 3sg) -> source nominative, source oblique, target stem.
_PRONOUNS = (
    ((1, 0, 0), "I", "me", "mi"),
    ((2, 0, 0), "you", "you", "ti"),
    ((3, 0, 0), "he", "him", "lo"),
    ((3, 0, 1), "she", "her", "la"),
    ((3, 0, 2), "it", "it", "lu"),
    ((1, 1, 0), "we", "us", "nos"),
    ((2, 1, 0), "you", "you", "vos"),
    ((3, 1, 0), "they", "them", "lor"),
)
_PREPOSITIONS = ("with", "on", "under", "in", "from", "to", "behind", "near", "for", "without", "after", "before")


@dataclass(frozen=True)
class _Lemma:
    """One word of the lexicon: its source stem, its target stems (the first is usual, the rest synonyms)."""

    src: str
    tgt: tuple[str, ...]
    gender: int = 0


class _Zipf:
    """Draws lemmas of one category with probability proportional to 1 / rank (Zipf's law)."""

    def __init__(self, lemmas: list[_Lemma]) -> None:
        self.lemmas = lemmas
        self.cum = list(itertools.accumulate(1.0 / (rank + 1.5) for rank in range(len(lemmas))))

    def draw(self, rng: random.Random) -> _Lemma:
        return self.lemmas[bisect.bisect_right(self.cum, rng.random() * self.cum[-1])]


class _Lexicon:
    """The fixed vocabulary of the pair, built from syllables by its own generator (independent of the seed)."""

    SIZES = {
        "noun": 1500,
        "verb_tr": 450,
        "verb_intr": 160,
        "verb_say": 12,
        "adj": 420,
        "adv": 120,
        "time": 24,
        "name": 150,
    }

    def __init__(self, scale: float = 1.0) -> None:
        rng = random.Random(f"ablate-builtin-lexicon-v{GENERATOR_VERSION}")
        self._seen: set[str] = set(_SOURCE_FUNCTION_WORDS)
        self.cats: dict[str, _Zipf] = {}
        for cat, size in self.SIZES.items():
            lemmas = []
            for rank in range(max(4, round(size * scale))):
                src = self._word(rng, _SRC_SYLLABLES, rank)
                if cat == "name":  # names are copied, capitalised, and inflect like gender-0 nouns
                    lemmas.append(_Lemma(src.capitalize(), (src.capitalize(),), 0))
                    continue
                n_syn = 2 if rng.random() < 0.2 else 1
                tgt = tuple(self._word(rng, _TGT_SYLLABLES, rank) for _ in range(n_syn))
                lemmas.append(_Lemma(src, tgt, rng.randrange(3)))
            self.cats[cat] = _Zipf(lemmas)
        self.preps = {
            p: (self._word(rng, _TGT_SYLLABLES, 0),) + ((self._word(rng, _TGT_SYLLABLES, 9),) if i % 4 == 0 else ())
            for i, p in enumerate(_PREPOSITIONS)
        }

    def _word(self, rng: random.Random, syllables: tuple[tuple[str, ...], ...], rank: int) -> str:
        """A new word; frequent words are shorter (Zipf's law of abbreviation)."""
        onsets, vowels, codas = syllables
        n = 1 + (rank >= 40) + (rank >= 400) + (rng.random() < 0.3)
        while True:
            word = "".join(rng.choice(onsets) + rng.choice(vowels) for _ in range(n)) + rng.choice(codas)
            if word not in self._seen:
                self._seen.add(word)
                return word


@functools.cache
def _lexicon(scale: float = 1.0) -> _Lexicon:
    return _Lexicon(scale)


def _pick(rng: random.Random, forms: tuple[str, ...]) -> str:
    """The usual target form, or (30% of the time) a synonym: irreducible ambiguity for the model."""
    first, *synonyms = forms
    return synonyms[0] if synonyms and rng.random() < 0.3 else first


class _Grammar:
    """Generates one (source words, target words) pair per call; each method returns parallel word lists."""

    def __init__(self, rng: random.Random, lexicon: _Lexicon) -> None:
        self.rng, self.lex = rng, lexicon

    def noun_phrase(self, case: str, depth: int, pronoun_ok: bool = True) -> tuple[list[str], list[str], tuple]:
        """An NP in the given target case; returns its agreement (person, number) for the verb."""
        rng, lex = self.rng, self.lex
        roll = rng.random()
        if pronoun_ok and roll < 0.18:
            (person, number, _), nom, obl, stem = rng.choice(_PRONOUNS)
            return [nom if case == "nom" else obl], [stem + _CASE_ENDING[(case, 0)]], (person, number)
        if roll < 0.24:
            name = lex.cats["name"].draw(rng)
            return [name.src], [name.tgt[0] + _NOUN_SUFFIX[0][(case, 0)]], (3, 0)
        noun = lex.cats["noun"].draw(rng)
        number = int(rng.random() < 0.3)
        key = (case, number)
        src: list[str] = []
        tgt: list[str] = []
        det = rng.random()
        if det < 0.55:
            src.append("the")
            tgt.append(_ARTICLE[noun.gender] + _CASE_ENDING[key])
        elif det < 0.85:
            src.append("some" if number else "a")
        else:
            src.append("these" if number else "this")
            tgt.append("vo" + _ADJ_SUFFIX[noun.gender][key])
        adjs_src: list[str] = []
        adjs_tgt: list[str] = []
        while rng.random() < (0.35 if not adjs_src else 0.2) and len(adjs_src) < 3:
            adj = lex.cats["adj"].draw(rng)
            if rng.random() < 0.12:
                adjs_src.append("very")
                adjs_tgt.append(_pick(rng, ("mek", "sol")))
            adjs_src.append(adj.src)
            adjs_tgt.append(_pick(rng, adj.tgt) + _ADJ_SUFFIX[noun.gender][key])
        src += adjs_src
        src.append(noun.src + ("s" if number else ""))
        head_tgt = [_pick(rng, noun.tgt) + _NOUN_SUFFIX[noun.gender][key]] + adjs_tgt
        # Post-nominal modifiers in the source become pre-nominal in the target (head-final).
        pre: list[str] = []
        if depth < 2 and rng.random() < 0.12:
            poss_src, poss_tgt, _ = self.noun_phrase("gen", depth + 1, pronoun_ok=False)
            src += ["of"] + poss_src
            pre = poss_tgt + pre
        if depth < 2 and rng.random() < 0.1:
            pp_src, pp_tgt = self.prep_phrase(depth + 1)
            src += pp_src
            pre = pp_tgt + pre
        if depth < 2 and rng.random() < 0.14:
            rel_src, rel_tgt = self.relative_clause((3, number), depth + 1)
            src += rel_src
            pre = rel_tgt + pre
        return src, tgt + pre + head_tgt, (3, number)

    def prep_phrase(self, depth: int) -> tuple[list[str], list[str]]:
        prep = self.rng.choice(_PREPOSITIONS)
        np_src, np_tgt, _ = self.noun_phrase("dat", depth)
        return [prep] + np_src, np_tgt + [_pick(self.rng, self.lex.preps[prep])]

    def relative_clause(self, head: tuple[int, int], depth: int) -> tuple[list[str], list[str]]:
        """'that sees the cat' / 'that the cat sees' -> '[the cat-ACC / the cat-NOM] see-TENSE-ri' before the noun."""
        rng = self.rng
        verb = self.lex.cats["verb_tr"].draw(rng)
        tense = rng.choice(("pres", "past", "fut"))
        rel_verb = _pick(rng, verb.tgt) + _TENSE[tense] + "ri" + ("s" if head[1] else "")
        if rng.random() < 0.6:  # subject relative: the head noun is the subject
            obj_src, obj_tgt, _ = self.noun_phrase("acc", depth)
            return ["that"] + self.source_verb(verb.src, tense, head, negated=False) + obj_src, obj_tgt + [rel_verb]
        subj_src, subj_tgt, agr = self.noun_phrase("nom", depth)
        that = ["that"] if rng.random() < 0.7 else []  # 'the dog the cat sees': optional in the source only
        return that + subj_src + self.source_verb(verb.src, tense, agr, negated=False), subj_tgt + [rel_verb]

    @staticmethod
    def source_verb(stem: str, tense: str, agr: tuple[int, int], negated: bool) -> list[str]:
        third_sg = agr == (3, 0)
        if tense == "fut":
            return ["will", "not", stem] if negated else ["will", stem]
        if tense == "past":
            return ["did", "not", stem] if negated else [stem + ("d" if stem.endswith("e") else "ed")]
        if negated:
            return ["does" if third_sg else "do", "not", stem]
        return [stem + ("s" if third_sg else "")]

    def clause(self, depth: int) -> tuple[list[str], list[str]]:
        """[time] S V O PP* [adv] [time]  ->  time S [ja] PP* O [adv] [ne] V  (the verb goes last)."""
        rng, lex = self.rng, self.lex
        subj_src, subj_tgt, agr = self.noun_phrase("nom", depth)
        if subj_tgt and agr != (3, 0) and len(subj_src) == 1 and rng.random() < 0.35:
            subj_tgt = []  # pro-drop: the verb's agreement already says who; the pronoun may go
        tense = rng.choice(("pres", "past", "fut"))
        negated = rng.random() < 0.15
        kind = rng.random()
        comp_src: list[str] = []
        comp_tgt: list[str] = []
        obj_src: list[str] = []
        obj_tgt: list[str] = []
        if depth == 0 and kind < 0.08:
            verb = lex.cats["verb_say"].draw(rng)
            comp_src, comp_tgt = self.clause(depth + 1)
            comp_src, comp_tgt = ["that"] + comp_src, comp_tgt + ["ko"]
        elif kind < 0.7:
            verb = lex.cats["verb_tr"].draw(rng)
            obj_src, obj_tgt, _ = self.noun_phrase("acc", depth + 1)
        else:
            verb = lex.cats["verb_intr"].draw(rng)
        pps_src: list[str] = []
        pps_tgt: list[str] = []
        for p in (0.3, 0.1):
            if depth < 2 and rng.random() < p:
                pp_src, pp_tgt = self.prep_phrase(depth + 1)
                pps_src += pp_src
                pps_tgt += pp_tgt
        adv_src = adv_tgt = []
        if rng.random() < 0.18:
            adv = lex.cats["adv"].draw(rng)
            adv_src, adv_tgt = [adv.src], [_pick(rng, adv.tgt)]
        time_src = time_tgt = []
        if depth == 0 and rng.random() < 0.22:
            time = lex.cats["time"].draw(rng)
            time_src, time_tgt = [time.src], [_pick(rng, time.tgt)]
        verb_tgt = ["ne"] * negated + [_pick(rng, verb.tgt) + _TENSE[tense] + _PERSON[agr]]
        src_core = subj_src + self.source_verb(verb.src, tense, agr, negated) + obj_src + comp_src + pps_src + adv_src
        src = time_src + src_core if rng.random() < 0.25 else src_core + time_src
        particle = ["ja"] if depth == 0 and rng.random() < 0.08 else []
        if rng.random() < 0.5:  # free manner-adverb position in the target: a second irreducible ambiguity
            tgt = time_tgt + subj_tgt + particle + adv_tgt + pps_tgt + obj_tgt + comp_tgt + verb_tgt
        else:
            tgt = time_tgt + subj_tgt + particle + pps_tgt + obj_tgt + comp_tgt + adv_tgt + verb_tgt
        return src, tgt

    def sentence(self) -> tuple[str, str]:
        src, tgt = self.clause(0)
        if self.rng.random() < 0.12:
            src2, tgt2 = self.clause(0)
            conj = self.rng.random() < 0.6
            src = src + [",", "and" if conj else "but"] + src2
            tgt = tgt + [",", _pick(self.rng, ("ui", "aj")) if conj else "bes"] + tgt2
        return _detokenize(src), _detokenize(tgt)


def _detokenize(words: list[str]) -> str:
    text = " ".join(words).replace(" ,", ",") + "."
    return text[0].upper() + text[1:]


def generate(
    seed: int, sizes: dict[str, int], lexicon_scale: float = 1.0, max_words: int = MAX_WORDS
) -> dict[str, tuple[list[str], list[str]]]:
    """Generate the splits, in the order given by ``sizes`` (test and valid first by convention), from ``seed``.

    Returns split -> (source sentences, target sentences). A source sentence is never used twice, within or across
    splits, so the splits are disjoint. Sentences with fewer than 3 or more than `max_words` words on either side
    are redrawn.
    """
    rng = random.Random(f"ablate-builtin-sentences-v{GENERATOR_VERSION}:{seed}")
    grammar = _Grammar(rng, _lexicon(lexicon_scale))
    seen: set[str] = set()
    out: dict[str, tuple[list[str], list[str]]] = {}
    for split, size in sizes.items():
        src_out: list[str] = []
        tgt_out: list[str] = []
        while len(src_out) < size:
            src, tgt = grammar.sentence()
            if src in seen or not (MIN_WORDS <= src.count(" ") + 1 <= max_words >= tgt.count(" ") + 1 >= MIN_WORDS):
                continue
            seen.add(src)
            src_out.append(src)
            tgt_out.append(tgt)
        out[split] = (src_out, tgt_out)
    return out
