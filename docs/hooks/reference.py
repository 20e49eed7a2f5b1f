"""The docs site's generated pages (mkdocs hooks): the Python API's import path for mkdocstrings, and the reference
pages written from the code itself, so they cannot drift from it."""

from __future__ import annotations

import functools
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
FOLDERS = ("ablations", "benchmarks", "data", "lightning_modules", "reports")


API_ROOT = REPO / ".cache" / "docs-api"
"""mkdocstrings reads the code statically (griffe), by its installed name `ablate.reports`; the repository's folders
are `ablate`'s subpackages only through setuptools' editable finder, which griffe does not follow for a namespace
package. So this folder (mkdocs.yml's `paths`) holds `ablate/` with a link to each folder."""


def _link_the_packages() -> None:
    package = API_ROOT / "ablate"
    package.mkdir(parents=True, exist_ok=True)
    for folder in FOLDERS:
        link = package / folder
        if link.is_symlink() and link.readlink() == REPO / folder:
            continue
        link.unlink(missing_ok=True)  # a link left by a clone at another path points at that clone's code
        link.symlink_to(REPO / folder, target_is_directory=True)


_link_the_packages()  # at import: the hooks load with the config, before mkdocstrings looks for a module

SECTIONS = {
    "model": "ablate.lightning_modules.config.ModelConfig",
    "train": "ablate.lightning_modules.config.TrainConfig",
    "data": "ablate.data.config.DataConfig",
    "hardware": "ablate.ablations.study.config.HardwareConfig",
    "tracking": "ablate.ablations.study.config.TrackingConfig",
    "sweep": "ablate.ablations.commands.sweep.SweepConfig",
    "slurm": "ablate.ablations.launchers.slurm.SlurmConfig",
}
"""The config sections a command line and a study file set (`--SECTION.FIELD`), in the order of the page.
`ablations.study.config.SECTIONS` holds the first five; `sweep` and `slurm` are `ablate sweep`'s own."""

STUDY_FILE = {
    "study": "ablate.ablations.study.definition.Study",
    "row": "ablate.ablations.study.definition.Row",
    "claim": "ablate.ablations.statistics.claims.Claim",
    "comparison": "ablate.ablations.statistics.claims.Comparison",
    "search dimension": "ablate.ablations.study.definition.SearchDim",
}
"""The study file's own fields: the study, each row, each claim and its comparisons, `ablate tune`'s space."""


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


@functools.cache
def _package():
    """The package read statically by griffe, once (a few seconds)."""
    import griffe

    return griffe.load("ablate", search_paths=[str(API_ROOT)])


def _module(path: str):
    return _package()[path.removeprefix("ablate.")]


def _fields(path: str) -> list[tuple[str, str, str, str]]:
    """A dataclass's fields as (name, type, default, what it is), read statically by griffe: its attribute docstring,
    else the comment at the end of its line."""
    module_path, name = path.rsplit(".", 1)
    module = _module(module_path)
    cls = module[name]
    lines = Path(module.filepath).read_text(encoding="utf-8").splitlines()  # type: ignore[arg-type]
    rows = []
    for attribute in cls.attributes.values():
        skip = attribute.name.startswith("_") or "property" in attribute.labels or attribute.annotation is None
        if skip or "ClassVar" in str(attribute.annotation):
            continue
        doc = attribute.docstring.value if attribute.docstring else ""
        if not doc and attribute.lineno and "#" in lines[attribute.lineno - 1]:
            doc = lines[attribute.lineno - 1].split("#", 1)[1]
        default = "required" if attribute.value is None else f"`{_cell(str(attribute.value))}`"
        if not doc.strip():
            raise ValueError(f"{path}.{attribute.name} has no docstring: the config reference would say nothing of it")
        rows.append((attribute.name, f"`{_cell(str(attribute.annotation))}`", default, _cell(doc)))
    return rows


def _table(title: str, path: str, prefix: str) -> str:
    module_path, name = path.rsplit(".", 1)
    cls = _module(module_path)[name]
    summary = cls.docstring.value.split("\n\n")[0] if cls.docstring else ""
    source = f"`{module_path.removeprefix('ablate.').replace('.', '/')}.py`, `{name}`"
    out = [f"## {title}", "", f"{_cell(summary)} ({source})", "", "| field | type | default | what it is |"]
    out.append("|---|---|---|---|")
    out += [f"| `{prefix}{field}` | {kind} | {default} | {doc} |" for field, kind, default, doc in _fields(path)]
    return "\n".join(out) + "\n"


def config_reference() -> str:
    sections = [_table(f"`{name}`", path, f"{name}.") for name, path in SECTIONS.items()]
    study = [_table(f"The study file: {name}", path, "") for name, path in STUDY_FILE.items()]
    return "\n".join(sections + study)


def cli_reference() -> str:
    """Every command's `--help`, as the command prints it (with its fields' docstrings), one section each."""
    import contextlib
    import io
    import os

    from ablate.ablations import cli

    os.environ["COLUMNS"] = "120"  # argparse wraps to the terminal's width; the page's code block is ~120 wide
    out = ["## `ablate`", "", "```text", cli.usage().rstrip(), "```", ""]
    for name, (_, summary) in cli.COMMANDS.items():
        text = io.StringIO()
        with contextlib.redirect_stdout(text), contextlib.suppress(SystemExit):
            cli.main([name, "--help"])
        out += [f"## `ablate {name}`", "", f"{summary[0].upper()}{summary[1:]}.", "", "```text"]
        out += [text.getvalue().rstrip().replace(str(REPO), "."), "```", ""]
    return "\n".join(out)


GENERATED = {"reference/config.md": ("{{ config_reference }}", config_reference),
             "reference/cli.md": ("{{ cli_reference }}", cli_reference)}  # fmt: skip


def on_page_markdown(markdown, page, config, files):
    """The reference pages' markers replaced by what the code says now."""
    marker, make = GENERATED.get(page.file.src_uri, (None, None))
    if marker is None or make is None:
        return markdown
    if marker not in markdown:
        raise ValueError(f"docs/{page.file.src_uri}: the marker {marker} is gone; the generated reference has no place")
    return markdown.replace(marker, make())
