"""One command line for every command: a jsonargparse parser built from the config sections.

Every command takes `--config FILE.yaml` (any of its options, and the sections) and `--print_config` (print the
command's effective configuration as YAML, in the form `--config` reads back, and exit). Commands that build
models also take `--SECTION.FIELD VALUE` for every field of every section (model, train, data, hardware,
tracking), with the field's docstring as help; a field left unset keeps the study row's value at the preset.
`--set SECTION.FIELD=VALUE` is the same override in one word, kept for scripts.

jsonargparse checks each value against its field's type annotation, on the command line and in study files alike
(`ablations.study.config.check_sections`), so there is no hand-written type coercion.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml
from ablate.ablations.runtime.urls import redact
from ablate.ablations.study.config import SECTIONS, add_sections, check_sections, describe_error
from ablate.data.errors import AblateError, did_you_mean

# ActionConfigFile is jsonargparse's documented name; its __init__ imports it without listing it in __all__, which
# pyright reads as private.
from jsonargparse import (
    ActionConfigFile,  # pyright: ignore[reportPrivateImportUsage]
    ArgumentParser,
    DefaultHelpFormatter,
    set_parsing_settings,
)

_PLUMBING = ("config", "print_config", "set", "__path__")


def wants_help(argv: list[str]) -> bool:
    """Whether the command line asks for --help: build the parser for the help (`command_parser(documented=True)`)."""
    return any(arg in ("-h", "--help") for arg in argv)


def command_parser(
    prog: str,
    description: str | None,
    *,
    sections: Iterable[str] = (),
    documented: bool = False,
    aliases: Mapping[str, str] | None = None,
):
    """A parser with --config and --print_config, plus the overrides of the named config sections.

    `documented`: the sections' options carry their fields' docstrings as help, read from the source, which is slow
    (docs/reference/code-figures.md, "ablations/commands/options.py"): only for a parser
    that prints its help. `aliases`: other spellings of options, read as the ones they name before parsing
    ('--workers' -> '--sweep.workers', '--retry_failed' -> '--sweep.retry_failed=true'; `respell`)."""

    class Formatter(DefaultHelpFormatter, argparse.RawDescriptionHelpFormatter):
        """jsonargparse's help, with the description's paragraphs kept as written."""

    class Parser(ArgumentParser):
        """jsonargparse's parser, reading `aliases` as the options they name."""

        spellings = dict(aliases or {})

        def parse_args(self, args=None, *rest, **kwargs):
            return super().parse_args(respell(sys.argv[1:] if args is None else args, aliases or {}), *rest, **kwargs)

    # allow_abbrev=False: argparse reads a prefix as the option it begins ('--model.n_layer 2' set n_layers).
    kwargs = {"exit_on_error": False, "print_config": None, "formatter_class": Formatter, "allow_abbrev": False}
    parser = Parser(prog=prog, description=description, **kwargs)
    parser.add_argument("--config", action=ActionConfigFile, help="a YAML file with any of the options below")
    parser.add_argument(
        "--print_config", action="store_true", help="print the effective configuration as YAML (for --config) and exit"
    )
    sections = list(sections)
    if sections:
        set_parsing_settings(docstring_parse_attribute_docstrings=documented)
        try:
            add_sections(parser, sections)
        finally:
            set_parsing_settings(docstring_parse_attribute_docstrings=False)
        parser.add_argument(
            "--set",
            action="append",
            default=[],
            metavar="SECTION.FIELD=VALUE",
            help="the same as --SECTION.FIELD VALUE, in one word (repeatable; VALUE is read as YAML)",
        )
    return parser


def respell(argv: Sequence[str], aliases: Mapping[str, str]) -> list[str]:
    """argv with each alias (`--old`, or `--old=VALUE` for an alias of an option that takes one) as what it names."""
    out = []
    for arg in argv:
        name, eq, value = arg.partition("=")
        new = aliases.get(name)
        if new is None or (eq and "=" in new):
            out.append(arg)
        else:
            out.append(f"{new}={value}" if eq else new)
    return out


def parse(parser, argv: list[str]):
    """Parse, turning jsonargparse's errors into one-line AblateErrors (exit code 2, no traceback)."""

    for path, _ in config_files(argv):  # name the file in a config error (jsonargparse says "<unicode string>")
        _check_config_file(path)
    try:
        return parser.parse_args(argv)
    except argparse.ArgumentError as err:
        hint = _closest_option(parser, argv) if "unrecognized arguments" in str(err) else ""
        raise AblateError(describe_error(err) + hint) from None


def _closest_option(parser, argv: list[str]) -> str:
    """' (did you mean '--model.n_layers'?)' for the first option of argv the parser does not know, or ''."""
    # argparse lists unknown options without a suggestion; its table of option strings is the only list of them.
    spellings = getattr(parser, "spellings", {})
    shown = [name for name, action in parser._option_string_actions.items() if action.help != argparse.SUPPRESS]
    for arg in argv:
        name = arg.partition("=")[0]
        if name.startswith("--") and name not in parser._option_string_actions and name not in spellings:
            return did_you_mean(name, [*shown, *spellings])
    return ""


def after_configs(argv: list[str]) -> int:
    """The index in argv just past its last `--config FILE` (0 without one): what comes after it overrides the files."""
    return max((end for _, end in config_files(argv)), default=0)


def config_files(argv: list[str]) -> list[tuple[str, int]]:
    """Each `--config FILE` (or `--config=FILE`) of a command line: the file and the index just past it."""
    found = []
    for i, arg in enumerate(argv):
        if arg == "--config":
            found.append((argv[i + 1] if i + 1 < len(argv) else "", i + 2))
        elif arg.startswith("--config="):
            found.append((arg.partition("=")[2], i + 1))
    return found


def _check_config_file(path: str) -> None:
    if not path or not Path(path).is_file():
        raise AblateError(f"--config {path}: no such file")
    try:
        with open(path, encoding="utf-8") as stream:  # a stream, so that PyYAML's message names the file
            loaded = yaml.safe_load(stream)
    except yaml.YAMLError as err:
        raise AblateError(f"--config {path}: not valid YAML: {' '.join(str(err).split())}") from None
    if loaded is not None and not isinstance(loaded, dict):
        raise AblateError(f"{path}: expected a mapping of options and sections, got {type(loaded).__name__}")


def overrides(ns, sections: Iterable[str] | None = None) -> dict[str, dict[str, Any]]:
    """The section fields the user set ({section: {field: value}}): --SECTION.FIELD, --config and --set."""
    sections = list(SECTIONS if sections is None else sections)
    values = ns.as_dict()
    layer = {s: {k: v for k, v in (values.get(s) or {}).items() if v is not None} for s in sections}
    for item in values.get("set") or []:
        name, eq, value = item.partition("=")
        section, dot, key = name.partition(".")
        if not eq or not dot or section not in sections:
            raise AblateError(f"--set {item!r}: write SECTION.FIELD=VALUE with SECTION one of {', '.join(sections)}")
        layer[section][key] = yaml.safe_load(value)
    layer = {s: v for s, v in layer.items() if v}
    try:
        return check_sections(layer)
    except AblateError as err:
        raise AblateError(f"{err} (in the command-line settings)") from None


def changed(layer: dict[str, dict[str, Any]], reference: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The values of a {section: {field: value}} layer that differ from a resolved config's (`RunConfig.to_dict()`);
    a list and a tuple of the same values are the same."""
    diff = {s: {k: v for k, v in fields.items() if _plain(v) != _plain(reference[s][k])} for s, fields in layer.items()}
    return {s: fields for s, fields in diff.items() if fields}


def own_options(ns) -> dict[str, Any]:
    """The command's own options (not the sections), for --print_config and for passing on."""
    return {k: v for k, v in ns.as_dict().items() if k not in _PLUMBING and k not in SECTIONS}


def print_config(config: dict[str, Any]) -> int:
    """Print a configuration as YAML that `--config` reads back, leaving out what is unset."""
    config = {k: v for k, v in config.items() if v is not None and v != {}}
    if isinstance(config.get("storage"), str):  # a printed config is saved to files: never with a password
        config["storage"] = redact(config["storage"])
    sys.stdout.write(yaml.safe_dump(_plain(config), sort_keys=False))
    return 0


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value
