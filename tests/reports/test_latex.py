"""The LaTeX table compiled by a real TeX (pdflatex, Debian's texlive) in a two-column article: it fits the page,
p-values are math, and the caption says what the numbers are.

`table3_tiny` (also used by the HTML and plot tests) is the widest realistic table: every Table 3 row at the tiny
preset's sizes, two seeds, the paper's columns, test-set BLEU and the claims."""

from __future__ import annotations

import copy
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from ablate.ablations.results.load import load_results
from ablate.reports.build import describe_corpus
from ablate.reports.claims import load_claims
from ablate.reports.latex import TEX_PACKAGES, to_latex
from ablate.reports.table import ReportTable, Stat, build_table
from reports_fixtures import BASE_MODEL, BASE_TRAIN, MODERN_MODEL, make_study

PDFLATEX = shutil.which("pdflatex")
needs_tex = pytest.mark.skipif(
    PDFLATEX is None,
    reason="pdflatex not installed (Debian: apt-get install texlive-latex-base texlive-latex-recommended)",
)
CLAIMS = Path(__file__).resolve().parents[2] / "ablations" / "study" / "builtin" / "table3.claims.yaml"


def table3_tiny(out: Path, study_name: str = "table3") -> tuple[ReportTable, str | None]:
    """Every row of the built-in Table 3 (or `study_name`: 'modern') with the tiny preset's resolved values, two seeds
    each, judged against the study's claims, with test BLEU and chrF on every row (as the test-set evaluation fills
    them). Returns the table and its corpus text."""
    from ablate.ablations.study.definition import load_study

    study = load_study(study_name)
    rows = []
    for i, row in enumerate(study.rows):
        config = study.run_config(row, "tiny", 0).to_dict()
        values = {k: v for k, v in config["model"].items() if k in BASE_MODEL or k in MODERN_MODEL}
        values |= {k: v for k, v in config["train"].items() if k in BASE_TRAIN and k != "seed"}
        rows.append((row.name, row.group, values, 0.25 + 0.02 * (i % 7)))  # hypotheses of varied quality
    make_study(out, rows=rows, storage=None, study=study_name)
    meta = json.loads((out / "study.json").read_text())
    for spec, row in zip(meta["rows"], study.rows, strict=True):  # the paper's numbers, as a sweep writes them
        spec["paper"] = row.paper
    (out / "study.json").write_text(json.dumps(meta))
    results = load_results(out)
    names = [r.name for r in results.rows]
    claims = CLAIMS.with_name(f"{study_name}.claims.yaml")
    table = build_table(results, n_samples=200, claims=load_claims(claims, names, "base"))
    for i, row in enumerate(table.rows):
        # What real CPU trials record, on two machines (one device everywhere moves it to the legend): the widest
        # cells of the HTML table; and the columns two budgets add (source use, the gain from T/2 to T).
        row.devices = [f"cpu ({1 + i % 2} threads)"]
        row.source_ratio = {0.5: 113.4, 1.0: 177.7}
        if row.bleu is not None and row.chrf is not None:
            row.budget_gain = Stat(values={s: 10.4 for s in row.bleu.values})
            row.test_bleu = Stat(values={s: v - 1.5 for s, v in row.bleu.values.items()})
            row.test_chrf = Stat(values={s: v - 1.0 for s, v in row.chrf.values.items()})
    return table, describe_corpus(results)


def compile_twocolumn(tex: str, workdir: Path, *, copies: int = 1, paper: str = "letterpaper") -> str:
    """Compile `tex` (pasted `copies` times) in a two-column article on `paper` (letterpaper, a4paper); returns the
    log. Also writes to the log the natural width of the table's tabular (set alone, with the table's own font size
    and column separation) and the page's text width, as 'ABLATE natural=...pt; textwidth=...pt'."""
    (workdir / "table.tex").write_text(tex, encoding="utf-8")
    body = tex[tex.index(r"\begin{tabular}") : tex.index(r"\end{tabular}") + len(r"\end{tabular}")]
    size = re.search(r"^\\(tiny|scriptsize|footnotesize|small|normalsize)$", tex, re.M)
    sep = re.search(r"\\setlength\{\\tabcolsep\}\{([^}]*)\}", tex)
    (workdir / "tabular.tex").write_text(body, encoding="utf-8")
    packages = "\n".join(rf"\usepackage{{{p}}}" for p in TEX_PACKAGES)
    document = "\n".join(
        [
            rf"\documentclass[twocolumn,{paper}]{{article}}",
            packages,
            r"\begin{document}",
            "Text of the paper.",
            *([r"\input{table.tex}"] * copies),
            r"\setbox0=\hbox{"
            + (rf"\{size[1]}" if size else "")
            + (rf"\setlength{{\tabcolsep}}{{{sep[1]}}}" if sep else "")
            + r"\input{tabular.tex}}",
            r"\typeout{ABLATE natural=\the\wd0; textwidth=\the\textwidth}",
            r"\end{document}",
        ]
    )
    (workdir / "paper.tex").write_text(document, encoding="utf-8")
    run = subprocess.run(
        [PDFLATEX, "-interaction=nonstopmode", "-halt-on-error", "paper.tex"],
        cwd=workdir,
        capture_output=True,
        text=True,
        timeout=120,
    )
    log = (workdir / "paper.log").read_text(encoding="utf-8", errors="replace")
    assert run.returncode == 0, log[-3000:]
    assert (workdir / "paper.pdf").stat().st_size > 0
    return log


def widths(log: str) -> tuple[float, float]:
    found = re.search(r"ABLATE natural=([\d.]+)pt; textwidth=([\d.]+)pt", log)
    assert found, log[-2000:]
    return float(found[1]), float(found[2])


def outside_math(tex: str) -> str:
    """The text with every $...$ removed (line breaks \\\\ and escaped \\$ first out of the way)."""
    return re.sub(r"\$[^$]*\$", "", tex.replace("\\\\", " ").replace("\\$", " "))


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return table3_tiny(tmp_path_factory.mktemp("latex") / "table3-tiny")


@pytest.fixture(scope="module")
def modern(tmp_path_factory):
    return table3_tiny(tmp_path_factory.mktemp("latex") / "modern-tiny", "modern")


@needs_tex
@pytest.mark.parametrize("paper", ["letterpaper", "a4paper"])
@pytest.mark.parametrize("study", ["tiny", "modern"])
def test_the_tables_and_claims_fit_a_two_column_page(study, paper, request, tmp_path):
    """Table 3 and the modern study (29 rows, differences outside the paper's columns, 15 claims) on letter and A4:
    no table or claims float wider or taller than the page ('Float too large' left the modern claims' notes off the
    page), the table at 80% of its size or more."""
    table, corpus = request.getfixturevalue(study)
    tex = to_latex(table, corpus=corpus)
    header = next(line for line in tex.splitlines() if line.startswith(" & row"))
    for column in ("PPL", "BLEU", "chrF", r"paper\\BLEU", r"$\Delta$PPL", r"$\Delta$BLEU", r"BLEU\\(test)"):
        assert column in header, column
    assert "tok/s" not in header and "device" not in header  # the machine's columns: only when asked for
    assert " other " not in header  # every row's differences written across its blank configuration cells

    log = compile_twocolumn(tex, tmp_path, copies=2, paper=paper)  # pasted twice: a second reuses the first's box
    assert "Overfull \\hbox" not in log, re.findall(r"Overfull \\hbox.*", log)
    assert "Float too large" not in log, re.findall(r"Float too large.*", log)
    natural, textwidth = widths(log)
    # Scaled down to the page if wider, but not below 80%: \scriptsize stays above 5.6 pt, readable in print.
    assert natural <= textwidth / 0.8, (natural, textwidth)


def test_every_modern_row_says_what_it_changes(modern):
    """The one-component rows are read against the paper's base (row paper): each names its own component across its
    blank cells, M-qknorm too, which no claim names; the base, compared with E1 by a claim, lists nothing."""
    table, corpus = modern
    tex = to_latex(table, corpus=corpus)
    rows = {line.split(" & ")[1]: line for line in tex.split(r"\midrule", 1)[1].splitlines() if line.endswith(r"\\")}
    for name, change in [("M-rmsnorm", r"norm\_type=rmsnorm"), ("M-swiglu", "activation=swiglu"),
                         ("M-rope", "positions=rope"), ("M-gqa2", r"n\_kv\_heads=2"), ("M-qknorm", r"qk\_norm=true"),
                         ("M-nobias", "bias=false"), ("M-prenorm", "norm=pre")]:  # fmt: skip
        span = r"\\multicolumn\{\d\}\{(l|p\{[\d.]+em\})\}\{(\\raggedright )?vs paper: "  # wrapped if too long
        assert re.search(span + re.escape(change) + "}", rows[name]), rows[name]
        assert "layernorm" not in rows[name] and "relu" not in rows[name]
    assert " & 170 & " in rows["M-swiglu"] and " & 256 & " not in rows["M-rmsnorm"]  # blank: the paper row's d_ff
    assert "multicolumn" not in rows["base"] and "multicolumn" not in rows["A1"]
    assert re.search(r"\\multicolumn\{6\}\{p\{[\d.]+em\}\}\{\\raggedright activation=relu, bias=true", rows["paper"])
    assert r"\multicolumn{9}{l}{vs E1: positions=learned}" in rows["E2"]


@needs_tex
def test_a_long_claims_table_is_split_into_tables_that_fit_a_page(tiny, tmp_path):
    table, corpus = copy.deepcopy(tiny)
    table.claims = table.claims * 4
    tex = to_latex(table, corpus=corpus)
    parts = re.findall(r"claims' verdicts \((\d) of (\d)\)", tex)
    assert len(parts) >= 3 and parts[0] == ("1", parts[0][1]) and all(n == parts[0][1] for _, n in parts)
    log = compile_twocolumn(tex, tmp_path)
    assert "Float too large" not in log and "Overfull \\hbox" not in log


@needs_tex
def test_every_column_still_fits_scaled_down(tiny, tmp_path):
    table, corpus = tiny
    every = ["group", "row", "N", "d_model", "d_ff", "h", "d_k", "d_v", "P_drop", "eps_ls", "train_steps", "other"]
    every += ["ppl", "bleu", "chrf", "test_bleu", "test_chrf", "params", "paper_ppl", "paper_bleu", "delta_ppl"]
    every += ["delta_bleu", "plateau", "seeds", "wall", "tok_s", "device"]
    log = compile_twocolumn(to_latex(table, every, corpus=corpus), tmp_path)
    natural, textwidth = widths(log)
    assert natural > textwidth  # wider than the page at its natural size...
    assert "Overfull \\hbox" not in log  # ...and scaled to fit all the same


@needs_tex
def test_a_narrow_choice_keeps_its_size(tiny, tmp_path):
    table, corpus = tiny
    tex = to_latex(table, ["row", "N", "d_model", "ppl", "bleu", "delta_bleu"], corpus=corpus)
    assert tex.count(r"\midrule") == len(table.groups()) + tex.count("claim & verdict & evidence")  # + the claims
    log = compile_twocolumn(tex, tmp_path)
    natural, textwidth = widths(log)
    assert natural < textwidth / 2 and "Overfull \\hbox" not in log


def test_p_values_and_symbols_are_math_and_a_short_caption_and_notes_say_what_the_numbers_are(tiny):
    table, corpus = tiny
    tex = to_latex(table, corpus=corpus)
    caption = re.search(r"\\caption\{(.*)\}\n\\label\{tab:table3\}", tex)[1]  # type: ignore[index]
    notes = re.findall(r"^\\parbox\{\\textwidth\}\{\\scriptsize (.*)\}$", tex, re.M)
    assert len(notes) == 2  # under the table, and under the first claims table
    assert len(caption) < 300, caption  # a short caption; the notes say the rest, in the table's small type
    assert r"study \texttt{table3}" in caption and r"preset \texttt{smoke}" in caption  # the fixture's preset
    assert "dev set; BLEU (test) on the test set" in caption and "Blank cells: as the base row." in caption
    assert "$p<0.05$" in notes[0] and "$p<0.01$" in notes[0]
    text = "\n".join(line for line in tex.splitlines() if line.startswith((r"\caption", r"\parbox")) or "&" in line)
    assert "$<$0.001" in text  # the claims' p <0.001, as math
    assert "<" not in outside_math(text) and ">" not in outside_math(text)  # OT1 text mode prints them as ¡ and ¿
    assert not re.search(r"[^\x00-\x7f]", tex), "non-ASCII characters left for LaTeX"
    assert f"Corpus {corpus}" in notes[0] and corpus.startswith("builtin (SentencePiece")  # type: ignore[union-attr]
    assert "seeds 0, 1" in notes[0]
    assert "per subword token of our SentencePiece vocabulary" in notes[0] and "not comparable" in notes[0]
    assert "Vaswani" in notes[0] and "Not at plateau:" in notes[0]
    assert "the base has norm=post, positions=sinusoidal" in notes[0]  # what E1 and F1 change, from what
    assert "adjusted over every claimed comparison" in notes[1] and "truncated" in notes[1]  # the claims legend
    assert all(rf"\usepackage{{{p}}}" in tex.splitlines()[0] for p in ("booktabs", "graphicx"))
    # the difference of row E written across its blank configuration cells, as in the paper
    assert re.search(r"^\(E\) & E1 & \\multicolumn\{9\}\{l\}\{positions=learned\} & ", tex, re.M)


def test_test_columns_only_when_scored(tiny):
    table, corpus = copy.deepcopy(tiny)
    for row in table.rows:
        row.test_bleu = row.test_chrf = None
    tex = to_latex(table, corpus=corpus)
    assert "(test)" not in tex and "test set" not in tex and r"BLEU\\(dev)" in tex
