"""Optuna storages and the trial queue on them, one module per job:

- `urls`: which storage a command connects to (--storage, $ABLATE_STORAGE, study.json's) and its password never
  shown (`redact`, `scrub`);
- `opening`: opening a storage for a sweep or read-only for status and reports, and the study on it;
- `journal`: cutting the torn last record a killed worker leaves in a journal file;
- `space`: the Optuna parameters each sweep trial carries (what optuna-dashboard plots);
- `queue`: queueing, claiming, retrying and finishing trials, and the liveness that re-runs a dead worker's trial.

No torch, Lightning or W&B import here (reports read storages too).
"""
