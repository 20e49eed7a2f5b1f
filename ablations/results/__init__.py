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
    Decide,
    Evidence,
    decide,
    failed_rows,
    finished_seeds,
    looks,
    source_ratios,
    study_claims,
    study_verdicts,
)
from ablate.ablations.results.ledger import (  # noqa: F401 - the public face
    CLOSED_AS,
    CLOSED_UNRUN,
    ClosedAs,
    State,
    closed_as,
    closed_unrun,
    pack,
    pack_shared,
    parse_key,
    read_record,
    read_records,
    record_path,
    record_paths,
    recorded_rows,
    resolve,
    stored_copy,
    stored_record,
    superseded,
    trial_key,
    trial_state,
    unpack,
    unpack_shared,
    write_record,
)
from ablate.ablations.results.load import (  # noqa: F401 - the public face
    NOT_DESIGN,
    RowSpec,
    StudyResults,
    TrialStatus,
    check_one_corpus,
    check_one_study,
    check_records,
    declared_rows,
    design_changes,
    load_results,
    no_record,
    read_finished,
    read_trial_states,
    resolve_out_dir,
)
from ablate.ablations.results.machines import Machine, differs, machines_of  # noqa: F401 - the public face
from ablate.ablations.results.record import (  # noqa: F401 - the public face
    FULL,
    SEPARATOR,
    Budget,
    Layout,
    Record,
    declared_seeds,
    key_of,
    now,
    read_json,
    read_study_json,
)
from ablate.ablations.results.scores import (  # noqa: F401 - the public face
    bleu_metric,
    chrf_of,
    chrf_signature,
    read_lines,
    score_ahead,
    system_scores,
)
from ablate.ablations.results.storage.opening import (  # noqa: F401 - the public face
    load_trials,
    named_study,
    open_existing,
    open_storage,
)

__all__ = [
    "FULL",
    "NOT_DESIGN",
    "SEPARATOR",
    "Budget",
    "Decide",
    "Evidence",
    "Layout",
    "Machine",
    "Record",
    "RowSpec",
    "State",
    "StudyResults",
    "TrialStatus",
    "bleu_metric",
    "check_one_corpus",
    "check_one_study",
    "check_records",
    "chrf_of",
    "chrf_signature",
    "CLOSED_AS",
    "CLOSED_UNRUN",
    "ClosedAs",
    "closed_as",
    "closed_unrun",
    "decide",
    "declared_rows",
    "declared_seeds",
    "design_changes",
    "evidence",
    "failed_rows",
    "finished_seeds",
    "key_of",
    "ledger",
    "load",
    "load_results",
    "load_trials",
    "looks",
    "machines_of",
    "differs",
    "named_study",
    "no_record",
    "now",
    "open_existing",
    "open_storage",
    "pack",
    "pack_shared",
    "parse_key",
    "read_finished",
    "read_json",
    "read_lines",
    "read_record",
    "read_records",
    "read_study_json",
    "read_trial_states",
    "record",
    "record_path",
    "record_paths",
    "recorded_rows",
    "resolve",
    "resolve_out_dir",
    "score_ahead",
    "scores",
    "source_ratios",
    "storage",
    "stored_copy",
    "stored_record",
    "study_claims",
    "study_verdicts",
    "superseded",
    "system_scores",
    "trial_key",
    "trial_state",
    "unpack",
    "unpack_shared",
    "write_record",
]
