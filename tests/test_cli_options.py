"""The options of every `ablate` command, frozen (torchtitan's test_no_new_cli_options): a new flag is a decision made
here, not a drive-by. A command's own options are listed by name; its config sections (`--model.d_k`, `--sweep.workers`,
`--slurm.partition`) by section, and every option of a section is a field of its dataclass, so the help, the YAML of
--print_config and the code cannot drift apart.

A new option: add it to the command's dataclass section if it is a setting (the sweep's go into
`commands.sweep.SweepConfig`), else to OWN below, and say why in the commit."""

from __future__ import annotations

import contextlib
import dataclasses
import io
import re

import pytest
from ablate.ablations.cli import COMMANDS, main

COMMON = {"--help", "--config", "--print_config"}
SECTIONED = {"--set"}  # commands with config sections also take --set SECTION.FIELD=VALUE
RUN = ("model", "train", "data", "hardware", "tracking")  # ablations.study.config.SECTIONS

OWN: dict[str, set[str]] = {
    "sweep": SECTIONED,
    "train": SECTIONED | {"--study", "--row", "--preset", "--seed", "--out", "--json", "--resume",
                           "--replace"},  # issue 72: a finished run is not trained over unless told
    "tune": SECTIONED | {"--row", "--trials", "--preset", "--storage", "--out", "--seed", "--objective"},
    "report": {"--preset", "--runs_dir", "--out", "--format", "--columns", "--rows", "--wandb", "--storage",
               "--no_plots", "--samples", "--quiet", "--claims"},  # fmt: skip
    "compare": {"--out", "--study", "--format", "--json", "--runs_dir", "--plot", "--samples", "--claims"},
    "replay": {"--runs_dir", "--min_seeds", "--max_seeds", "--design", "--samples"},
    "simulate": {"--replicates", "--min_seeds", "--max_seeds", "--fixed", "--effect", "--unstable", "--noise",
                 "--seed", "--ratio", "--tails", "--least_favourable", "--mixed", "--grid", "--workers",
                 "--json"},  # issue 74: the shipped rule simulated; issue 84: the guarantee's grid
    "translate": {"--row", "--seed", "--input", "--refs", "--beam", "--length_penalty", "--batch_size", "--device"},
    "archive": {"--to", "--study"},
    "status": {"--storage", "--watch", "--json"},
    "params": SECTIONED | {"--preset", "--json"},
    "studies": {"--rows"},
    "data": SECTIONED | {"--json", "--preset", "--study", "--row"},  # issue 85: the corpus a preset trains on
    "bench": SECTIONED | {"--study", "--row", "--preset", "--warmup", "--repeats", "--decode_sentences",
              "--decode_repeats", "--beam_size", "--full_length", "--device", "--precision", "--threads", "--compile",
              "--compile_scope", "--lightning", "--overhead", "--trial_preset", "--corpus", "--seed", "--vs", "--json",
              "--attention", "--host"},  # issue 82: a step's operators and host syncs
}  # fmt: skip
"""Each command's own options, besides --help, --config and --print_config."""
SECTIONS: dict[str, set[str]] = {
    "sweep": {*RUN, "sweep", "slurm"},
    "train": set(RUN),
    "tune": set(RUN),
    "params": set(RUN),
    "data": {"data"},
    "bench": {"model", "train", "data"},
}
"""Each command's config sections (`--SECTION.FIELD` for every field, and `--SECTION FILE`)."""


def section_classes() -> dict[str, type]:
    """Section name -> its dataclass: the run's config, the sweep's settings, each launcher's."""
    from ablate.ablations import launchers
    from ablate.ablations.commands.sweep import SweepConfig
    from ablate.ablations.study.config import SECTIONS as RUN_SECTIONS

    found = {name: launcher.settings for name, launcher in launchers.available().items() if launcher.settings}
    return {**RUN_SECTIONS, "sweep": SweepConfig, **found}


def options_of(command: str) -> list[str]:
    """The options `ablate COMMAND --help` lists."""
    text = io.StringIO()
    with contextlib.redirect_stdout(text), contextlib.suppress(SystemExit):
        main([command, "--help"])
    return re.findall(r"(?m)^  (?:-\w, )?(--[\w.-]+)", text.getvalue())


@pytest.mark.parametrize("command", list(COMMANDS))
def test_no_new_cli_options(command):
    assert command in OWN, f"`ablate {command}` is new: freeze its options in OWN (and SECTIONS) here"
    options = options_of(command)
    sections = {o[2:].partition(".")[0] for o in options if "." in o}
    own = set(options) - {o for o in options if "." in o} - {f"--{s}" for s in sections}
    assert own - COMMON == OWN[command], f"`ablate {command}`'s own options changed"
    assert sections == SECTIONS.get(command, set()), f"`ablate {command}`'s config sections changed"
    classes = section_classes()
    for section in sections:
        fields = {f"--{section}.{f.name}" for f in dataclasses.fields(classes[section])}
        assert {o for o in options if o.startswith(f"--{section}.")} == fields, f"--{section}.* is not its dataclass"


def test_the_old_spellings_of_the_sweep_options_read_as_its_section():
    """`ablate sweep --workers 2 --retry_failed` (before the `sweep` section) is `--sweep.workers 2
    --sweep.retry_failed true`: the same namespace, option for option; what is not an old spelling is left alone."""
    from ablate.ablations.commands.options import respell
    from ablate.ablations.commands.sweep import OLD_SPELLINGS, SweepConfig, build_parser

    assert set(OLD_SPELLINGS) == {f"--{f.name}" for f in dataclasses.fields(SweepConfig)}
    old = ["table3", "--preset", "smoke", "--workers", "2", "--out=runs/x", "--retry_failed", "--rows", "base,B1",
           "--allocation", "sequential", "--max_seeds", "4", "--dry_run", "--train.max_steps", "5"]  # fmt: skip
    new = ["table3", "--sweep.preset", "smoke", "--sweep.workers", "2", "--sweep.out=runs/x",
           "--sweep.retry_failed=true", "--sweep.rows", "base,B1", "--sweep.allocation", "sequential",
           "--sweep.max_seeds", "4", "--sweep.dry_run=true", "--train.max_steps", "5"]  # fmt: skip
    assert respell(old, OLD_SPELLINGS) == new
    assert build_parser().parse_args(old) == build_parser().parse_args(new)
    parsed = build_parser().parse_args(old).sweep
    assert (parsed.workers, parsed.out, parsed.retry_failed, parsed.no_report) == (2, "runs/x", True, False)
    untouched = ["--retry_failed=yes", "--workersx", "3"]  # a flag given a value, a name that is none of them
    assert respell(untouched, OLD_SPELLINGS) == untouched
