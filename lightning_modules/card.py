"""What `auto` picks on a CUDA card: every setting that resolves differently there, in one place, each with the lease
that measured it on a card, or none.

A card turns on by default only what has run on a card. A setting whose `measured` is None is opt-in until a lease
measures it: on a card `auto` keeps the value it has elsewhere, and a user turns the card's value on by name (its
field, or `ABLATE_CARD=all` for a path that has no field). The leases and their figures are in docs/speed.md.

`ABLATE_CARD` resolves these settings as a card would on any device, so that the card's configuration runs on a CPU
too, in the tests (bf16 autocast, the reference kernels and static decoding all run on a CPU):
- unset: a card's values only on a CUDA device, and there only the measured ones;
- `measured`: every measured card value, on any device (the card's defaults as they are today);
- `all`: every card value, measured or not, on any device (what the next lease measures; on a card too).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from ablate.data.errors import ConfigError

SWITCH = "ABLATE_CARD"
MODES = ("", "measured", "all")


@dataclass(frozen=True)
class Lease:
    """Where a card value ran and what it gave: the date, the card, the card's torch, a figure and its section."""

    date: str
    card: str
    torch: str
    figure: str
    section: str
    """The heading of docs/speed.md that holds the lease's command and figures."""


@dataclass(frozen=True)
class CardSetting:
    """One setting `auto` resolves differently on a card."""

    name: str
    """The config field (`train.precision`), or what the path is where no field selects it."""
    elsewhere: str
    """What `auto` is off a card (and on a card while the card value is unmeasured)."""
    card: str
    """What a card takes."""
    measured: Lease | None
    """The lease that ran the card value; None: opt-in until a lease measures it."""
    opt_in: str
    """How a user turns the card value on by hand."""


H200 = "H200 lease: the paper base compiled by layers, and cuDNN's attention off"
H200_STUDY = "H200 lease: the default study's first 4.5 minutes, and every card value"
CARD_ALL = Lease(
    "2026-12-04",
    "H200",
    "2.11.0+cu130",
    "tiny base, 400 steps and the whole-dev decode under ABLATE_CARD=all with data.buckets 8: 20.4 ms a step "
    "(28.7 on the defaults), the 8,000-sentence decode 5.8 s (17.8), dev PPL 23.58 (25.82)",
    H200_STUDY,
)

SETTINGS: dict[str, CardSetting] = {
    s.name: s
    for s in (
        CardSetting(
            "train.precision",
            elsewhere="32-true",
            card="bf16-mixed",
            measured=Lease(
                "2026-11-26",
                "H200",
                "2.11.0+cu130",
                "tiny base, 400 steps and one validation through Lightning: 28 ms a step, dev PPL 25.82",
                H200,
            ),
            opt_in="--train.precision bf16-mixed",
        ),
        CardSetting(
            "model.kernels",
            elsewhere="cpu",
            card="reference",
            measured=Lease(
                "2026-11-26",
                "H200",
                "2.11.0+cu130",
                "paper base eager, SDPA's fused kernels (never the math fallback): 85.5 ms a step, 9.7% MFU",
                H200,
            ),
            opt_in="--model.kernels reference",
        ),
        CardSetting(
            "train.decoding",
            elsewhere="dynamic",
            card="static",
            measured=CARD_ALL,
            opt_in="--train.decoding static",
        ),
        CardSetting(
            "loss watch",
            elsewhere="the training loss read on the host every step",
            card="the worst loss kept on the device, read every 25 steps (no host sync a step)",
            measured=CARD_ALL,
            opt_in=f"{SWITCH}=all",
        ),
        CardSetting(
            "padding mask",
            elsewhere="dropped when no source is padded (one host read a batch)",
            card="always passed to attention (no host read; SDPA takes a kernel that accepts a mask)",
            measured=CARD_ALL,
            opt_in=f"{SWITCH}=all",
        ),
    )
}


def mode() -> str:
    """The switch's value: '', 'measured' or 'all'; anything else is one line naming it."""
    value = os.environ.get(SWITCH, "").strip().lower()
    if value not in MODES:
        raise ConfigError(f"{SWITCH}={value!r}: must be unset, 'measured' or 'all'")
    return value


def on_card(cuda: bool) -> bool:
    """Whether this process resolves `auto` as a card does: on a CUDA device (`cuda`), or anywhere under the switch."""
    return cuda or bool(mode())


def takes(name: str, cuda: bool) -> bool:
    """Whether setting `name` takes its card value here: on a card (or under the switch), where it was measured on
    one or the switch asks for every card value."""
    setting = SETTINGS[name]
    return on_card(cuda) and (setting.measured is not None or mode() == "all")


def resolve(name: str, choice: str, cuda: bool) -> str:
    """A field's value with 'auto' resolved: the card value where `takes`, else the value it has elsewhere."""
    if choice != "auto":
        return choice
    setting = SETTINGS[name]
    return setting.card if takes(name, cuda) else setting.elsewhere


def table() -> str:
    """The settings as a Markdown table: what `auto` is elsewhere, on a card, and the lease that measured it."""
    rows = ["| setting | elsewhere | on a card | measured |", "|---|---|---|---|"]
    for s in SETTINGS.values():
        lease = s.measured
        said = f"{lease.date}, {lease.card}, torch {lease.torch}: {lease.figure}" if lease else f"opt-in: {s.opt_in}"
        rows.append(f"| {s.name} | {s.elsewhere} | {s.card} | {said} |")
    return "\n".join(rows)


__all__ = ["MODES", "SETTINGS", "SWITCH", "CardSetting", "Lease", "mode", "on_card", "resolve", "table", "takes"]
