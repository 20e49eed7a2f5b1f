"""gettext catalogues as a corpus: real .mo files compiled with msgfmt, the cleaning rules, a stable split, errors."""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

import pytest
from ablate.data import corpus, gettext_corpus
from ablate.data.errors import AblateError
from ablate.data.prepare import prepare
from ablate.data.sources import GettextSource

pytestmark = pytest.mark.skipif(shutil.which("msgfmt") is None, reason="needs msgfmt (the gettext package)")

APP = [
    ("Open file", "Datei öffnen"),
    ("Cannot open %s: %s", "%s kann nicht geöffnet werden: %s"),
    ("keyboard label", "Tab", "Tabulator"),  # context
    ("%d file", "%d files", ["%d Datei", "%d Dateien"]),  # plural
    ("Berlin", "Berlin"),  # untranslated name
    ("%s: %s", "%s: %s"),  # no letters
    ("_Save As", "Speichern _unter"),  # accelerators
    ("cannot split TAR_OPTIONS", "kann TAR_OPTIONS nicht zerteilen"),  # an identifier, not an accelerator
    ("Usage: %s [OPTION]\nList files.\n", "Aufruf: %s [OPTION]\nDateien auflisten.\n"),  # multi-line
    ("Done.\n", "  Fertig.\n"),  # trailing newline and spaces only
    ("|pinentry-label|_Cancel", "_Abbrechen"),  # GnuPG's inline context
    (" ".join(["word"] * 51), " ".join(["Wort"] * 51)),  # too long
    ("Quit", "Beenden"),
]


@pytest.fixture()
def locale(tmp_path: Path, write_mo) -> Path:
    root = tmp_path / "locale"
    write_mo(root / "de/LC_MESSAGES/app.mo", APP)
    write_mo(
        root / "de/LC_MESSAGES/old.mo", [("Quit", "Verlassen"), ("Größe", "Größe")], charset="ISO-8859-1", who="Bächle"
    )
    write_mo(root / "de/LC_MESSAGES/other.mo", [("Quit", "Beenden"), ("Apply", "Anwenden")])
    return root


def test_cleaning_rules(locale: Path):
    splits = gettext_corpus.corpus((locale / "de/LC_MESSAGES").glob("*.mo"))
    pairs = dict(pair for split in splits.values() for pair in split)
    assert pairs == {
        "Open file": "Datei öffnen",
        "Cannot open %s: %s": "%s kann nicht geöffnet werden: %s",  # placeholders kept as they are
        "Tab": "Tabulator",
        "Save As": "Speichern unter",
        "cannot split TAR_OPTIONS": "kann TAR_OPTIONS nicht zerteilen",
        "Done.": "Fertig.",
        "Cancel": "Abbrechen",
        "Quit": "Beenden",  # two catalogues against one
        "Apply": "Anwenden",
    }
    for split in splits.values():
        assert split == sorted(split)


def test_latin1_catalogue_is_decoded_by_its_header_charset(locale: Path):
    entries = dict(gettext_corpus.read_mo(locale / "de/LC_MESSAGES/old.mo"))
    assert entries["Größe"] == "Größe"
    assert "Bächle" in entries[""]


def test_tie_between_translations_keeps_the_lexicographically_first(tmp_path: Path, write_mo):
    paths = [
        write_mo(tmp_path / f"{name}.mo", [("Quit", word)]) for name, word in (("a", "Verlassen"), ("b", "Beenden"))
    ]
    splits = gettext_corpus.corpus(paths)
    assert [pair for rows in splits.values() for pair in rows] == [("Quit", "Beenden")]


def test_corrupt_catalogues_are_skipped_with_a_warning(locale: Path, caplog: pytest.LogCaptureFixture):
    good = locale / "de/LC_MESSAGES/app.mo"
    (locale / "de/LC_MESSAGES/garbage.mo").write_bytes(b"this is not a catalogue")
    (locale / "de/LC_MESSAGES/truncated.mo").write_bytes(good.read_bytes()[:40])
    with caplog.at_level(logging.WARNING):
        splits = gettext_corpus.corpus((locale / "de/LC_MESSAGES").glob("*.mo"))
    assert sum(map(len, splits.values())) == 9
    messages = [record.getMessage() for record in caplog.records]
    assert any("garbage.mo" in m and "bad magic" in m for m in messages), messages
    assert any("truncated.mo" in m for m in messages), messages
    assert all("\n" not in m for m in messages)


def test_split_depends_on_the_sentence_alone(tmp_path: Path, write_mo):
    generated = corpus.generate(3, {"train": 2000, "valid": 0, "test": 0})["train"]
    pairs = list(zip(*generated, strict=True))
    first = write_mo(tmp_path / "a.mo", pairs[:1000])
    before = gettext_corpus.corpus([first])
    assert all(before.values())  # 2.5% of 1000 sources is about 25 each for valid and test
    after = gettext_corpus.corpus([write_mo(tmp_path / "b.mo", pairs[1000:]), first])
    where = {src: split for split, rows in after.items() for src, _ in rows}
    assert all(where[src] == split for split, rows in before.items() for src, _ in rows)
    assert sum(map(len, after.values())) > sum(map(len, before.values()))


def test_source_reads_both_directions_and_fingerprint_follows_the_files(locale: Path, write_mo):
    forward = GettextSource(f"gettext:de:{locale}", None, None)
    backward = GettextSource(f"gettext:de:{locale}", "de", "en")
    assert (forward.src_lang, forward.tgt_lang, backward.src_lang, backward.tgt_lang) == ("en", "de", "de", "en")
    assert forward.fingerprint() == GettextSource(f"gettext:de:{locale}", "en", "de").fingerprint()
    assert forward.fingerprint() != backward.fingerprint()
    before = forward.fingerprint()
    write_mo(locale / "de/LC_MESSAGES/new.mo", [("Help", "Hilfe")])
    assert forward.fingerprint() != before


def test_missing_language_lists_languages_that_exist(locale: Path, write_mo):
    write_mo(locale / "fr/LC_MESSAGES/app.mo", [("Quit", "Quitter")])
    with pytest.raises(AblateError, match=r"no catalogues in .*/xx/LC_MESSAGES.*gettext:de \(3 catalogues\)") as err:
        GettextSource(f"gettext:xx:{locale}", None, None).fingerprint()
    assert "gettext:fr" in str(err.value) and "\n" not in str(err.value)


def test_too_few_pairs_says_how_many_and_names_another_language(locale: Path, small_config, tmp_path: Path, write_mo):
    write_mo(locale / "fr/LC_MESSAGES/app.mo", [("Quit", "Quitter")])
    with pytest.raises(AblateError, match=r"only 9 pairs after cleaning \(at least 3000 needed\).*gettext:fr"):
        prepare(small_config(tmp_path / "cache", corpus=f"gettext:de:{locale}"))


def test_prepare_end_to_end_then_warm(tmp_path: Path, small_config, catalogue_root):
    cfg = small_config(tmp_path / "cache", corpus=f"gettext:xx:{catalogue_root(tmp_path / 'locale', seed=7)}")
    cold = prepare(cfg)
    assert not cold.cached and (cold.src_lang, cold.tgt_lang) == ("en", "xx")
    assert cold.manifest["stats"]["splits"]["valid"]["pairs"] > 0
    warm = prepare(cfg)
    assert warm.cached and warm.cache_key == cold.cache_key


MACHINE_DE = Path("/usr/share/locale/de/LC_MESSAGES")


@pytest.mark.skipif(not list(MACHINE_DE.glob("*.mo")), reason="no German catalogues on this machine")
def test_machine_german_catalogues():
    splits = GettextSource("gettext:de", None, None).read()
    assert len(splits["train"].src) > 10_000
    assert 300 < len(splits["valid"].src) < 3000 and 300 < len(splits["test"].src) < 3000
    held_out = set(splits["valid"].src) | set(splits["test"].src)
    assert not held_out & set(splits["train"].src)
