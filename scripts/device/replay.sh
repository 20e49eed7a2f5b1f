#!/usr/bin/env bash
# Issue 82's first card check, one short call (DEADLINE 200 s; timeout_s 230): a tiny trial's 400 steps and its
# whole-dev decode with the replayed step (train.replay_step: one CUDA graph per batch shape) beside the same run
# without it, both with data.buckets 8, each stage cut at its limit with its stacks (common.sh).
# Run from the repository root: bash scripts/device/replay.sh
source "$(dirname "$0")/common.sh"
SHORT_STEPS=${SHORT_STEPS:-400}
short() {  # short NAME LIMIT ARGS...
    local name=$1 limit=$2; shift 2
    step "$name"
    local rc; rc=$(run_stage "$name" "$limit" ablate train --preset tiny --train.max_steps "$SHORT_STEPS" \
        --train.val_every "$SHORT_STEPS" --train.budgets "[]" --train.test_eval false --data.buckets 8 "$@" \
        --out "/tmp/short-$name")
    python3 - "$name" "$rc" "/tmp/short-$name" <<'PY' | tee "$WORK/$name.json" >>"$WORK/short-runs.txt"
import json, sys
from pathlib import Path
name, rc, out = sys.argv[1], sys.argv[2], Path(sys.argv[3])
found = sorted(out.rglob("result.json"))
m = json.loads(found[0].read_text()).get("metrics", {}) if found else {}
keys = ("step_time_s", "train_time_s", "val_time_s", "wall_time_s", "bleu", "ppl", "path")
print(json.dumps({"arm": name, "rc": int(rc), **{k: m.get(k) for k in keys}}))
PY
    pack
}
short replayed 90 --train.replay_step true
short eager 60
step "done"
