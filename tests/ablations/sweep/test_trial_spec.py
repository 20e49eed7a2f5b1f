"""A rank that Lightning relaunches for plain DDP finds its trial through TRIAL_DIR/trial.json, not the environment."""

from __future__ import annotations

import subprocess
import sys

from ablate.ablations.study.config import build_run_config
from ablate.ablations.sweep.ranks import TrialSpec


def test_a_child_process_finds_the_trial_its_parent_is_training(tmp_path):
    out = tmp_path / "out"
    run = build_run_config({"train": {"max_steps": 7}})
    TrialSpec.for_trial(out / "trials" / "other__seed0", run, name="other", group="g")
    spec = TrialSpec.for_trial(out / "trials" / "A1__seed0", run, name="A1", group="table3")
    other = TrialSpec.read(out / "trials" / "other__seed0" / TrialSpec.FILE)
    (out / "trials" / "other__seed0" / TrialSpec.FILE).write_text(
        (out / "trials" / "other__seed0" / TrialSpec.FILE).read_text().replace(f'"pid": {other.pid}', '"pid": 1')
    )
    code = "import sys; from pathlib import Path; from ablate.ablations.sweep.ranks import TrialSpec; "
    code += "s = TrialSpec.find_for_parent(Path(sys.argv[1])); print(s.name, s.wandb_id, s.run['train']['max_steps'])"
    found = subprocess.run([sys.executable, "-c", code, str(out)], capture_output=True, text=True, check=True)
    assert found.stdout.split() == ["A1", spec.wandb_id, "7"]
    again = TrialSpec.for_trial(out / "trials" / "A1__seed0", run, name="A1", group="table3")
    assert again.wandb_id == spec.wandb_id  # a retried trial continues its W&B run
    assert TrialSpec.find_for_parent(out) is None  # this process's parent trains nothing
