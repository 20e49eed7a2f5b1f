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

from ablate.ablations.statistics.boundaries import (  # noqa: F401 - the public face
    nominal_level,
    obrien_fleming_bounds,
    spending_bounds,
)
from ablate.ablations.statistics.budgets import budget_label  # noqa: F401 - the public face
from ablate.ablations.statistics.claims import (  # noqa: F401 - the public face
    EXPECTS,
    MARGINED,
    Claim,
    Comparison,
    Expect,
    Metric,
)
from ablate.ablations.statistics.convergence import (  # noqa: F401 - the public face
    PLATEAU_BLEU,
    PLATEAU_PPL,
    SOURCE_RATIO_MIN,
    Convergence,
    convergence,
    row_convergence,
    source_ratio,
    trainable_threshold,
)
from ablate.ablations.statistics.family import Sides, sides  # noqa: F401 - the public face
from ablate.ablations.statistics.family import decide as decide_family  # noqa: F401 - the public face
from ablate.ablations.statistics.sequential import (  # noqa: F401 - the public face
    DECIDING_SEEDS,
    FAILED,
    FUTILITY,
    STATES,
    UNSETTLED_ALPHA,
    Decision,
    ErrorControl,
    Judged,
    Look,
    RowLook,
    Sequential,
    Walk,
    boundary_level,
    comparison_key,
    conditional_power,
    confseq_level,
    controls_of,
    dunnett,
    first_look,
    policy,
    rows_of,
    seed_range,
    walk,
    without_failed,
)
from ablate.ablations.statistics.significance import (  # noqa: F401 - the public face
    ALPHA,
    BOOTSTRAP_SEED,
    DEV_FACTORS,
    MAX_SEEDS,
    N_SAMPLES,
    POWER,
    RowTest,
    SeedCorrelation,
    SeedNoise,
    SystemScores,
    bootstrap_all,
    bootstrap_scores,
    compare,
    compare_rows,
    design_needed,
    half_width_with_one_more_seed,
    holm,
    pooled_seed_variance,
    resample_weights,
    seed_correlation,
    seeds_needed,
)
from ablate.ablations.statistics.simulation import (  # noqa: F401 - the public face
    Design,
    Noise,
    SimulationResult,
    scenario,
    simulate,
)
from ablate.ablations.statistics.trend import (  # noqa: F401 - the public face
    PAPER_FLOOR,
    Trend,
    classify,
    ratio_text,
)
from ablate.ablations.statistics.variance import (  # noqa: F401 - the public face
    HETEROGENEITY_ALPHA,
    OUTLIER_ALPHA,
    SCREEN_ALPHA,
    Moderated,
    Prior,
    fit_prior,
    moderate,
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
    "BOOTSTRAP_SEED",
    "DEV_FACTORS",
    "EXPECTS",
    "DECIDING_SEEDS",
    "FAILED",
    "FUTILITY",
    "HETEROGENEITY_ALPHA",
    "MARGINED",
    "MAX_SEEDS",
    "N_SAMPLES",
    "OUTLIER_ALPHA",
    "SCREEN_ALPHA",
    "UNSETTLED_ALPHA",
    "half_width_with_one_more_seed",
    "PAPER_FLOOR",
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
    "Decision",
    "Design",
    "ErrorControl",
    "Expect",
    "Judged",
    "Look",
    "Metric",
    "Moderated",
    "Noise",
    "Prior",
    "RowLook",
    "RowTest",
    "SeedCorrelation",
    "SeedNoise",
    "Sequential",
    "Sides",
    "SimulationResult",
    "SystemScores",
    "Tests",
    "Trend",
    "Verdict",
    "Walk",
    "boundary_level",
    "conditional_power",
    "decide_family",
    "nominal_level",
    "obrien_fleming_bounds",
    "sides",
    "spending_bounds",
    "bootstrap_all",
    "bootstrap_scores",
    "budget_label",
    "claim_verdict",
    "classify",
    "compare",
    "compare_rows",
    "comparison_key",
    "comparison_verdict",
    "confseq_level",
    "controls_of",
    "convergence",
    "design_needed",
    "dunnett",
    "first_look",
    "fit_prior",
    "holm",
    "judge",
    "moderate",
    "policy",
    "pooled_seed_variance",
    "ratio_text",
    "resample_weights",
    "row_convergence",
    "rows_of",
    "seed_correlation",
    "seed_range",
    "seeds_needed",
    "scenario",
    "simulate",
    "source_ratio",
    "trainable_threshold",
    "walk",
    "without_failed",
]
