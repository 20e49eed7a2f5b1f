"""The `ablate` commands, one module each (`ablations.cli` finds them by name), and the parser they share
(`options`: every command built from the config sections, `--section.field` and `--config` the same way)."""

from __future__ import annotations

from ablate.ablations.commands.options import (  # noqa: F401 - the public face
    command_parser,
    own_options,
    parse,
    print_config,
)

__all__ = [
    "command_parser",
    "own_options",
    "parse",
    "print_config",
]
