"""The results store: what a sweep wrote, read back.

- `record`: a trial's one typed result (`Record`) and the map of a study folder (`Layout`);
- `ledger`: how records are written, read and packed into Optuna, and which trial speaks for a row x seed;
- `load`: a study folder read as one object (`StudyResults`, `load_results`);
- `scores`: each trial's dev scores at the sentence level, scored by sacreBLEU (and kept on disk);
- `evidence`: the claims judged on a study folder, and the sequential design's looks over it;
- `machines`: what the trials ran on (device, torch version, kernel set), and whether a machine differs from them;
- `storage`: the Optuna storages (opening, the trial queue, the journal file, the parameters each trial carries).

No torch, Lightning or W&B import here: the reports read it."""

from __future__ import annotations

from ablate.ablations.results import (
    evidence,  # noqa: F401
    ledger,  # noqa: F401
    load,  # noqa: F401
    record,  # noqa: F401
    scores,  # noqa: F401
    storage,  # noqa: F401
)
from ablate.ablations.results.evidence import (  # noqa: F401 - the public face
    Evidence,
    design_walk,
    replay_walk,
    source_ratios,
    study_claims,
    study_verdicts,
)
from ablate.ablations.results.ledger import (  # noqa: F401 - the public face
    record_path,
    record_paths,
    recorded_rows,
    resolve,
)
from ablate.ablations.results.load import (  # noqa: F401 - the public face
    RowSpec,
    StudyResults,
    TrialStatus,
    load_results,
    resolve_out_dir,
)
from ablate.ablations.results.machines import Machine, differs, machines_of  # noqa: F401 - the public face
from ablate.ablations.results.record import (  # noqa: F401 - the public face
    FULL,
    Layout,
    Record,
    read_study_json,
)
from ablate.ablations.results.scores import (  # noqa: F401 - the public face
    chrf_signature,
    read_lines,
    score_ahead,
    system_scores,
)
from ablate.ablations.results.storage.opening import (  # noqa: F401 - the public face
    open_existing,
)

__all__ = [
    "FULL",
    "Evidence",
    "design_walk",
    "replay_walk",
    "Layout",
    "Machine",
    "Record",
    "RowSpec",
    "StudyResults",
    "TrialStatus",
    "chrf_signature",
    "evidence",
    "ledger",
    "load_results",
    "machines_of",
    "differs",
    "open_existing",
    "read_lines",
    "read_study_json",
    "record_path",
    "record_paths",
    "recorded_rows",
    "resolve",
    "resolve_out_dir",
    "score_ahead",
    "scores",
    "source_ratios",
    "study_claims",
    "study_verdicts",
    "system_scores",
]
