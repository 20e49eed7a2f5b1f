"""The card's settings (`lightning_modules/card.py`): one list of what `auto` resolves differently on a CUDA card, a
card turning on by default only what a lease measured there, and the card's decoding run on a CPU under bf16."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import get_args, get_type_hints

import pytest
import torch
from ablate.data.errors import ConfigError
from ablate.lightning_modules import card
from ablate.lightning_modules.config import ModelConfig, TrainConfig, resolve_precision
from ablate.lightning_modules.decoding import beam_search
from ablate.lightning_modules.kernels import kernels_for
from ablate.lightning_modules.static_decoding import static_beam_search
from torch.nn.attention import SDPBackend, sdpa_kernel

from tests.lightning_modules.test_modern_knobs import KNOBS, knob_id
from tests.lightning_modules.test_static_decoding import BOS, EOS, PAPER_KNOBS, eos_prone, sources

RESULTS = Path(__file__).resolve().parents[2] / "docs" / "speed.md"


def test_every_auto_field_is_listed_with_what_a_card_takes():
    """A new 'auto' choice in the configs is a decision about cards: it must be listed (and measured, or opt-in)."""
    autos = {
        f"{section}.{name}"
        for section, cls in (("model", ModelConfig), ("train", TrainConfig))
        for name, hint in get_type_hints(cls).items()
        if "auto" in get_args(hint)
    }
    assert autos == {"model.kernels", "train.precision", "train.decoding"}
    assert autos <= set(card.SETTINGS)


def unmeasured(monkeypatch, name: str) -> None:
    """`name` as it was before a lease ran it on a card: opt-in (every setting has a lease today)."""
    monkeypatch.setitem(card.SETTINGS, name, dataclasses.replace(card.SETTINGS[name], measured=None))


def test_a_card_takes_by_default_only_what_a_lease_measured(monkeypatch):
    monkeypatch.delenv(card.SWITCH, raising=False)
    assert card.resolve("train.decoding", "auto", cuda=True) == "static"  # measured on the 2026-12-04 lease
    unmeasured(monkeypatch, "train.decoding")
    for name, setting in card.SETTINGS.items():
        assert card.takes(name, cuda=True) == (setting.measured is not None), name
        assert not card.takes(name, cuda=False), name
    assert card.resolve("train.decoding", "auto", cuda=True) == "dynamic"  # unmeasured: the value it has elsewhere
    assert card.resolve("train.decoding", "static", cuda=False) == "static"  # opt-in by name, anywhere
    assert resolve_precision("auto", cuda_bf16=True) == "bf16-mixed"
    assert resolve_precision("auto", cuda_bf16=False) == "32-true"


def test_every_lease_names_a_section_of_the_results_and_every_unmeasured_setting_says_how_to_opt_in(monkeypatch):
    unmeasured(monkeypatch, "train.decoding")
    headings = {line[3:].strip() for line in RESULTS.read_text().splitlines() if line.startswith("## ")}
    for setting in card.SETTINGS.values():
        if setting.measured is not None:
            assert setting.measured.section in headings, setting.name
            assert re.fullmatch(r"\d{4}-\d\d-\d\d", setting.measured.date) and setting.measured.torch
        assert setting.opt_in
    table = card.table()
    assert all(name in table for name in card.SETTINGS) and "opt-in: --train.decoding static" in table


@pytest.mark.parametrize(("mode", "expected"), [("measured", "dynamic"), ("all", "static")])
def test_the_switch_resolves_auto_as_a_card_would_on_the_cpu(monkeypatch, mode, expected):
    unmeasured(monkeypatch, "train.decoding")
    unmeasured(monkeypatch, "loss watch")
    monkeypatch.setenv(card.SWITCH, mode)
    assert resolve_precision("auto", cuda_bf16=False) == "bf16-mixed"
    assert kernels_for("auto").name == "reference"
    assert card.resolve("train.decoding", "auto", cuda=False) == expected
    assert card.takes("loss watch", cuda=False) == (mode == "all")


def test_a_misspelled_switch_is_one_line(monkeypatch):
    monkeypatch.setenv(card.SWITCH, "yes")
    with pytest.raises(ConfigError, match="ABLATE_CARD='yes': must be unset, 'measured' or 'all'"):
        card.mode()


DECODING_KNOBS = PAPER_KNOBS + KNOBS


def _both(model, src, beam: int):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        dynamic = beam_search(model, src, BOS, EOS, beam_size=beam, alpha=0.6, max_len_b=10)
        static = static_beam_search(model, src, BOS, EOS, beam_size=beam, alpha=0.6, max_len_b=10)
    return static, dynamic


@pytest.mark.parametrize("beam", [1, 4])
@pytest.mark.parametrize("overrides", DECODING_KNOBS, ids=knob_id)
def test_static_decoding_gives_the_dynamic_hypotheses_under_bf16_autocast(overrides, beam):
    """The card's decoding under the card's precision, on the CPU kernels: the same hypotheses to the token. (Before
    the cache took the keys' dtype, every case here failed in index_copy_: a float32 cache, bf16 keys.)"""
    static, dynamic = _both(eos_prone(overrides, "cpu", torch.float32), sources(), beam)
    assert static == dynamic
    assert len({len(h) for h in dynamic}) >= 2, "hypotheses should finish at several lengths"


@pytest.mark.parametrize("beam", [1, 4])
@pytest.mark.parametrize(
    "overrides",
    [{}, {"positions": "rope"}, {"n_kv_heads": 2}, {"norm": "pre"}, {"positions": "learned"}],
    ids=knob_id,
)
def test_static_decoding_on_the_reference_kernels_under_bf16(overrides, beam):
    """The card's kernels (SDPA) under bf16, with SDPA's math backend: the same hypotheses. CPU SDPA's default
    (flash) backend rounds attention over the static cache's longer, masked key axis differently in bf16, so that a
    near-tie can go the other way in a few sentences of 40; which way is rounding, not the search, and the search is
    what this pins."""
    with sdpa_kernel(SDPBackend.MATH):
        static, dynamic = _both(eos_prone(overrides, "reference", torch.float32), sources(), beam)
    assert static == dynamic
