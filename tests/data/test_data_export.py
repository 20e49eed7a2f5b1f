"""The corpus fingerprint and `ablate data export`: what a corpus is, whatever it is read from.

Real catalogues compiled with msgfmt under two locale roots stand for two machines' packages; real SentencePiece.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from ablate.ablations import cli
from ablate.data.cache import MANIFEST
from ablate.data.errors import AblateError
from ablate.data.prepare import export_corpus, prepare


@pytest.fixture(scope="module")
def machines(tmp_path_factory, catalogue_root) -> tuple[Path, Path]:
    """Two locale roots: the same language's catalogues as two machines with other packages hold them."""
    root = tmp_path_factory.mktemp("machines")
    return catalogue_root(root / "a", seed=7), catalogue_root(root / "b", seed=8)


def test_export_then_import_gives_the_same_fingerprint(machines, tmp_path, small_config):
    cfg = small_config(tmp_path / "cache", corpus=f"gettext:xx:{machines[0]}")
    exported, fingerprint = export_corpus(cfg, tmp_path / "copy")
    copy = prepare(exported.config_for(cfg))
    assert copy.fingerprint == fingerprint == prepare(cfg).fingerprint
    assert copy.fingerprint.source == f"gettext:xx:{machines[0]}"  # a copy is named by its origin
    assert copy.cache_key != prepare(cfg).cache_key  # ... although it is read from elsewhere
    split_sizes = (fingerprint.train, fingerprint.valid, fingerprint.test)
    assert split_sizes == tuple(copy.manifest["stats"]["splits"][s]["pairs"] for s in ("train", "valid", "test"))
    assert sorted(path.name for path in (tmp_path / "copy").iterdir()) == [
        MANIFEST, "test.en", "test.xx", "train.en", "train.xx", "valid.en", "valid.xx",
    ]  # fmt: skip
    # Another directory holding the same text is the same corpus; the other direction is another one.
    shutil.copytree(tmp_path / "copy", tmp_path / "moved")
    assert (
        prepare(small_config(tmp_path / "cache", corpus=str(tmp_path / "moved"), src="en", tgt="xx")).fingerprint
        == fingerprint
    )
    assert (
        prepare(small_config(tmp_path / "cache", corpus=str(tmp_path / "moved"), src="xx", tgt="en")).fingerprint
        != fingerprint
    )


def test_two_machines_catalogues_are_two_corpora_and_the_fingerprint_says_so(machines, tmp_path, small_config):
    a, b = (prepare(small_config(tmp_path / "cache", corpus=f"gettext:xx:{root}")) for root in machines)
    assert a.fingerprint != b.fingerprint
    # What makes two corpora differ is in the fingerprint: other settings (a vocabulary) give another one too.
    assert (
        prepare(small_config(tmp_path / "cache", corpus=f"gettext:xx:{machines[0]}", vocab_size=390)).fingerprint
        != a.fingerprint
    )


def test_a_cache_entry_from_before_fingerprints_computes_the_same_one(machines, tmp_path, small_config):
    cfg = small_config(tmp_path / "cache", corpus=f"gettext:xx:{machines[0]}")
    built = prepare(cfg).fingerprint
    manifest_path = prepare(cfg).directory / MANIFEST
    manifest = json.loads(manifest_path.read_text())
    del manifest["fingerprint"]
    manifest_path.write_text(json.dumps(manifest))
    assert prepare(cfg).fingerprint == built


def test_a_missing_or_changed_exported_file_is_one_line(machines, tmp_path, small_config):
    cfg = small_config(tmp_path / "cache", corpus=f"gettext:xx:{machines[0]}")
    exported, _ = export_corpus(cfg, tmp_path / "copy")
    train = tmp_path / "copy" / "train.xx"
    original = train.read_bytes()
    train.write_bytes(original.replace(b"\n", b" \n", 1))  # one sentence edited: the same size would do too
    with pytest.raises(AblateError, match=r"train\.xx has changed since it was exported from gettext:xx:") as err:
        prepare(exported.config_for(cfg))
    assert "\n" not in str(err.value) and "restore it as exported" in str(err.value)
    train.unlink()
    with pytest.raises(AblateError, match=r"missing file .*train\.xx: .* is the corpus exported from") as err:
        prepare(exported.config_for(cfg))
    assert "\n" not in str(err.value)
    train.write_bytes(original)
    assert prepare(exported.config_for(cfg)).fingerprint == prepare(cfg).fingerprint


def test_the_export_command_writes_a_directory_that_reads_back_and_never_overwrites(machines, tmp_path, capsys):
    corpus = f"gettext:xx:{machines[1]}"
    args = ["--data.corpus", corpus, "--data.vocab_size", "400", "--data.cache_dir", str(tmp_path / "cache")]
    assert cli.main(["data", "export", str(tmp_path / "copy"), *args, "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["source"] == corpus and summary["options"].endswith("--data.src en --data.tgt xx")
    assert cli.main(["data", "prepare", "--json", *args]) == 0
    assert json.loads(capsys.readouterr().out)["fingerprint"] == summary["fingerprint"]
    before = sorted((tmp_path / "copy").iterdir())
    assert cli.main(["data", "export", str(tmp_path / "copy"), *args]) == 2
    err = capsys.readouterr().err.strip()
    assert err.endswith("already exists: export into a new directory (an export never overwrites)") and "\n" not in err
    assert sorted((tmp_path / "copy").iterdir()) == before


def test_an_export_reads_back_as_it_is_with_no_languages_named(machines, tmp_path, capsys):
    """`--data.corpus DIR` alone reads an export in the direction it was written (its manifest says which side is
    which), and a directory of train/valid/test.{src,tgt} (the built-in corpus's export) by the sides' names."""
    common = ["--data.vocab_size", "400", "--data.cache_dir", str(tmp_path / "cache"), "--json"]
    for corpus, copy in ((f"gettext:xx:{machines[0]}", "gettext-copy"), ("builtin", "builtin-copy")):
        extra = ["--data.builtin_train", "2000"] if corpus == "builtin" else []
        assert cli.main(["data", "export", str(tmp_path / copy), "--data.corpus", corpus, *extra, *common]) == 0
        exported = json.loads(capsys.readouterr().out)["fingerprint"]
        assert cli.main(["data", "prepare", "--data.corpus", str(tmp_path / copy), *extra, *common]) == 0, corpus
        assert json.loads(capsys.readouterr().out)["fingerprint"] == exported
    (tmp_path / "builtin-copy" / MANIFEST).unlink()  # plain files named by their sides: still src -> tgt
    assert cli.main(["data", "prepare", "--data.corpus", str(tmp_path / "builtin-copy"), *common]) == 0
