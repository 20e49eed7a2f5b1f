"""The one registry of report writers: a format registered in one function is a choice of `ablate report` (and
`ablate compare` for a comparison writer), with its help, and is written beside the others; bad formats stay one
line and exit 2."""

from __future__ import annotations

import pytest
from ablate.ablations.cli import main as ablate
from ablate.reports import writers
from ablate.reports.commands import compare, report
from ablate.reports.writers import Context, writer
from reports_fixtures import TABLE3_ROWS, make_study


@pytest.fixture
def registry(monkeypatch):
    """The registry as it is now; a format a test registers goes away with the test."""
    monkeypatch.setattr(writers, "REGISTRY", dict(writers.registry()))


@pytest.fixture
def out(tmp_path):
    return make_study(tmp_path / "table3-smoke", rows=TABLE3_ROWS[:3], seeds=(0,), storage=None)


def test_a_format_registered_in_one_function_is_accepted_and_written(registry, out, tmp_path, capsys):
    @writer("rows", "one row name per line", suffix=".rows.txt")
    def to_rows(table, ctx: Context) -> str:
        return "".join(f"{row.name} ({ctx.corpus})\n" for row in table.rows)

    assert "rows (one row name per line)" in " ".join(report.build_parser().format_help().split())
    assert ablate(["report", str(out), "--format", "rows,md", "--out", str(tmp_path / "rep"), "--quiet"]) == 0
    assert "table3-smoke.rows.txt" in capsys.readouterr().out
    assert (tmp_path / "rep" / "table3-smoke.rows.txt").read_text() == "".join(
        f"{name} (builtin (SentencePiece vocabulary of 1000))\n" for name, *_ in TABLE3_ROWS[:3]
    )
    assert (tmp_path / "rep" / "table3-smoke.md").is_file()
    assert not (tmp_path / "rep" / "table3-smoke.tex").exists()  # only the formats asked for


def test_unknown_format_is_one_line_and_exit_2(registry, out, capsys):
    assert ablate(["report", str(out), "--format", "md,pdf"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "unknown format 'pdf'" in err and "choose from md,tex,csv,json,html" in err
    assert ablate(["compare", str(out), str(out), "--format", "html"]) == 2  # a report format, not a comparison's
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "html" in err


def test_both_commands_take_choices_and_help_from_the_registry(registry):
    assert writers.format_names() == ["md", "tex", "csv", "json", "html", "text"]  # claims.csv goes along with csv
    assert writers.format_names("comparison") == ["text", "md", "csv", "json"]
    assert writers.parse_formats("Markdown, .tex,latex") == ["md", "tex"]
    report_help = report.build_parser().format_help()
    assert all(f"{w.name} ({w.help})" in " ".join(report_help.split()) for w in writers.writers())

    @writer("yaml", "the comparison as YAML", suffix=".yaml", subject="comparison")
    def to_yaml(cmp, ctx: Context) -> str:
        return "a: b\n"

    compare_help = " ".join(compare.build_parser().format_help().split())
    assert "yaml (the comparison as YAML)" in compare_help and "text (the terminal table)" in compare_help
    assert "yaml" not in writers.format_names()  # a comparison's format is not a report's


def test_a_name_is_registered_once(registry):
    with pytest.raises(ValueError, match="already registered"):
        writer("md", "another Markdown", suffix=".md")(lambda table, ctx: "")


def test_a_format_module_reloaded_in_a_notebook_registers_its_writers_again(registry):
    import importlib

    from ablate.reports import markdown

    before = {name: w.help for name, w in zip(writers.format_names(), writers.writers(), strict=True)}
    importlib.reload(markdown)  # %autoreload does this: the same functions, registered a second time
    assert {name: w.help for name, w in zip(writers.format_names(), writers.writers(), strict=True)} == before
