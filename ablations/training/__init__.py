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

from ablate.ablations.training import (
    checkpoints,  # noqa: F401
    weights,  # noqa: F401
)
from ablate.ablations.training.result import (  # noqa: F401 - the public face
    RESULT_FILE,
    TrainResult,
    scored,
    write_outputs,
)
from ablate.ablations.training.train import (  # noqa: F401 - the public face
    accumulation,
)
from ablate.ablations.training.trainer import (  # noqa: F401 - the public face
    build_module,
    check_hardware,
)

__all__ = [
    "RESULT_FILE",
    "TrainResult",
    "accumulation",
    "build_module",
    "check_hardware",
    "checkpoints",
    "scored",
    "weights",
    "write_outputs",
]
