"""The metrics' one home (`lightning_modules.metrics`): importable without torch, Lightning or sacreBLEU (reports
read it), and the metric training scores with is the one the reports recompute."""

from __future__ import annotations

import math
import subprocess
import sys

import pytest
from ablate.lightning_modules.metrics import METRICS, bleu_metric, chrf_metric, corpus_score, perplexity


def test_the_metrics_module_imports_no_torch_lightning_or_sacrebleu():
    code = (
        "import sys, ablate.lightning_modules.metrics, ablate.ablations.study.claims\n"
        "print(sorted(m for m in ('torch', 'pytorch_lightning', 'lightning', 'sacrebleu') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_claims_name_the_same_metrics():
    from ablate.lightning_modules.metrics import METRICS as claimed

    assert claimed is METRICS
    assert {m: (s.label, s.digits, s.higher_is_better) for m, s in METRICS.items()} == {
        "bleu": ("BLEU", 2, True),
        "chrf": ("chrF", 1, True),  # the table's chrF column had 1 decimal and the claims 2: one fact now, the table's
        "ppl": ("PPL", 2, False),
    }


def test_the_table_and_the_latex_read_their_decimals_from_the_metric_facts():
    from ablate.reports.cells import STAT_COLUMNS
    from ablate.reports.latex import TEX_DIGITS

    assert STAT_COLUMNS["chrf"][0] == STAT_COLUMNS["test_chrf"][0] == METRICS["chrf"].digits
    assert STAT_COLUMNS["delta_bleu"] == (METRICS["bleu"].digits, "+")
    assert TEX_DIGITS["bleu"] == TEX_DIGITS["delta_bleu"] == METRICS["bleu"].paper_digits == 1


def test_perplexity_is_exp_nll_capped_at_50():
    assert perplexity(0.0) == 1.0
    assert perplexity(2.0) == pytest.approx(math.exp(2.0))
    assert perplexity(1e9) == math.exp(50.0)


def test_the_default_bleu_is_sacrebleus_and_a_signature_rebuilds_it():
    from sacrebleu.metrics import BLEU

    hyps, refs = ["the cat sat on the mat", "hello there"], ["the cat sat on a mat", "hello here"]
    score, signature = corpus_score(bleu_metric(), hyps, refs)
    reference = BLEU()
    assert score == reference.corpus_score(hyps, [refs]).score
    assert signature == str(reference.get_signature())
    assert corpus_score(bleu_metric(signature), hyps, refs) == (score, signature)
    assert "case:lc|eff:no|tok:intl" in corpus_score(bleu_metric("nrefs:1|case:lc|tok:intl"), hyps, refs)[1]


def test_chrf_is_sacrebleus_default():
    from sacrebleu.metrics import CHRF

    hyps, refs = ["the cat sat on the mat"], ["the cat sat on a mat"]
    assert corpus_score(chrf_metric(), hyps, refs)[0] == CHRF().corpus_score(hyps, [refs]).score
