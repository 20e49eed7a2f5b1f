"""The study's statistics, as functions of numbers: numpy and scipy, nothing else.

They take per-system scores (`SystemScores`), trials' curves (`convergence`), claims (`Claim`) and the evidence a look
judges (`walk`'s `Judged`), and return tests (`compare_rows`), verdicts (`judge`), the sequential design's looks
(`walk`, `policy`), trends over sizes (`classify`) and simulations (`simulate`). No file is read and no state is kept
here: the results store gathers the evidence from a study folder (`ablations.results.evidence`), and the reports turn
the numbers into words and marks. tests/ablations/statistics/test_purity.py holds it to that.

- `claims`: a claim and its comparisons, the types the verdicts read;
- `significance`: a row against a reference, counting seed and sentence noise (bootstrap, Welch t, Holm), and the
  power advice;
- `variance`: each row's seed variance, moderated toward the study's (empirical Bayes);
- `verdicts`: a verdict for each claim at every budget;
- `family`: one error guarantee over every claimed comparison (TOST and non-inferiority p-values, the
  intersection-union test over budgets, truncated Holm as a graph);
- `boundaries`: group-sequential boundaries with the looks' correlation (Lan-DeMets, O'Brien-Fleming);
- `sequential`: the sequential design (its policy, its looks, the error each spends, futility by conditional power);
- `convergence`: whether a trial reached its plateau, diverged, or learnt to translate at all;
- `trend`: whether an effect approaches the paper's as the model grows;
- `simulation`: the sequential design against the fixed one, on synthetic scores."""

from __future__ import annotations

from ablate.ablations.statistics.budgets import budget_label  # noqa: F401 - the public face
from ablate.ablations.statistics.claims import (  # noqa: F401 - the public face
    Claim,
    Comparison,
)
from ablate.ablations.statistics.convergence import (  # noqa: F401 - the public face
    PLATEAU_BLEU,
    PLATEAU_PPL,
    SOURCE_RATIO_MIN,
    Convergence,
    row_convergence,
)
from ablate.ablations.statistics.family import Sides, sides  # noqa: F401 - the public face
from ablate.ablations.statistics.family import decide as decide_family  # noqa: F401 - the public face
from ablate.ablations.statistics.sequential import (  # noqa: F401 - the public face
    DECIDING_SEEDS,
    FUTILITY,
    STATES,
    ErrorControl,
    Look,
    RowLook,
    Sequential,
    Walk,
    comparison_key,
    rows_of,
)
from ablate.ablations.statistics.significance import (  # noqa: F401 - the public face
    ALPHA,
    DEV_FACTORS,
    MAX_SEEDS,
    N_SAMPLES,
    POWER,
    RowTest,
    SeedCorrelation,
    SystemScores,
    compare,
    compare_rows,
    design_needed,
    half_width_with_one_more_seed,
    holm,
    resample_weights,
    seed_correlation,
)
from ablate.ablations.statistics.trend import (  # noqa: F401 - the public face
    Trend,
    classify,
    ratio_text,
)
from ablate.ablations.statistics.variance import (  # noqa: F401 - the public face
    SCREEN_ALPHA,
)
from ablate.ablations.statistics.verdicts import (  # noqa: F401 - the public face
    BudgetVerdict,
    Cause,
    ClaimVerdict,
    ComparisonVerdict,
    Tests,
    Verdict,
    claim_verdict,
    comparison_verdict,
    judge,
)

__all__ = [
    "ALPHA",
    "DEV_FACTORS",
    "DECIDING_SEEDS",
    "FUTILITY",
    "MAX_SEEDS",
    "N_SAMPLES",
    "SCREEN_ALPHA",
    "half_width_with_one_more_seed",
    "PLATEAU_BLEU",
    "PLATEAU_PPL",
    "POWER",
    "SOURCE_RATIO_MIN",
    "STATES",
    "BudgetVerdict",
    "Claim",
    "Cause",
    "ClaimVerdict",
    "Comparison",
    "ComparisonVerdict",
    "Convergence",
    "ErrorControl",
    "Look",
    "RowLook",
    "RowTest",
    "SeedCorrelation",
    "Sequential",
    "SystemScores",
    "Tests",
    "Trend",
    "Verdict",
    "Walk",
    "budget_label",
    "claim_verdict",
    "classify",
    "compare",
    "compare_rows",
    "comparison_key",
    "comparison_verdict",
    "design_needed",
    "holm",
    "judge",
    "ratio_text",
    "resample_weights",
    "row_convergence",
    "rows_of",
    "seed_correlation",
]
