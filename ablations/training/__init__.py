"""One trial on Lightning: build the model and the Trainer from a run's config, fit it, branch the shorter budgets
off the same run, test, and leave its result.

- `train`: the whole of one run, read as build, fit, branch, test, close (`train.train`);
- `trainer`: the Trainer and the module, and the hardware check before step 1;
- `recorder`: the progress a run logs and what it measured of itself;
- `budget_branches`: the shorter budgets (T/2, ...) as branches of the same run, each annealed;
- `checkpoints`: checkpoints written whole, pruned, averaged and resumed;
- `callbacks`: the sweep's callbacks (progress into the Optuna storage, pruning);
- `result`: a run's result.json (`TrainResult`) and the record it is scored into (`scored`);
- `weights`: a trained model as one file, for `ablate translate`.

Importing it imports torch and Lightning: the reports never do."""

from __future__ import annotations

from ablate.ablations.training import weights  # noqa: F401 - the public face: `ablate translate` reads a model file

__all__ = ["weights"]
