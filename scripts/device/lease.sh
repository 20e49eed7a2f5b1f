#!/usr/bin/env bash
# Issues 53 and 54 in one call of at most 9 minutes (DEADLINE 540 s, the install included), for a session lent 15
# minutes of a card (one start, one call; run it with timeout_s 590):
#  1. a tiny trial's step and decoding before and after (400 steps and the whole 8000-sentence dev decode, alone):
#     eager with dynamic beam search (before), then CUDA graphs in training with static beam search (after);
#  2. the default study from an empty folder with 8 workers (MPS), with whichever of the two the short runs price
#     cheaper for a whole trial, until its share of the call is spent: trials finished, their walls, the ETA;
#  3. the paper base's MFU eager beside MarianMT and nn.Transformer on the same batches, then compiled by layers,
#     then the attention kernels for padded sources side by side (benchmarks/attention.py).
# Each step's limit is cut to what is left of DEADLINE; what each step measured is packed back as it ends.
# Run from the repository root: bash scripts/device/lease.sh   (measure.sh and study.sh are the long versions)
source "$(dirname "$0")/common.sh"

GRAPHS=(--data.buckets 8 --train.compile true --train.compile_scope model --train.cuda_graphs true)
short_run() {  # short_run NAME LIMIT ARGS...: 400 tiny steps, then the whole dev set decoded once
    local name=$1 limit=$2; shift 2
    step "400 tiny steps and the whole dev decode: $name"
    local start; start=$(date +%s); rm -rf "/tmp/short-$name"
    timeout "$(left "$limit")" ablate train --preset tiny --train.max_steps 400 --train.val_every 400 \
        --train.budgets "[]" --train.test_eval false "$@" --out "/tmp/short-$name" >"$WORK/short-$name.log" 2>&1
    local rc=$?
    python3 - "$name" "$rc" "$(( $(date +%s) - start ))" "/tmp/short-$name" <<'EOF' | tee -a "$WORK/short-runs.txt"
import json, sys
from pathlib import Path
name, rc, wall, out = sys.argv[1], sys.argv[2], sys.argv[3], Path(sys.argv[4])
found = sorted(out.rglob("result.json"))
m = json.loads(found[0].read_text()).get("metrics", {}) if found else {}
keys = ("step_time_s", "train_time_s", "val_time_s", "wall_time_s", "bleu", "ppl", "bleu_sentences")
print(json.dumps({"arm": name, "rc": int(rc), "call_s": int(wall), **{k: m.get(k) for k in keys}}))
EOF
    pack
}
short_run before 65 --train.decoding dynamic
short_run after 90 --train.decoding static "${GRAPHS[@]}"

# The study's settings: the arm whose whole trial prices lower (the short run's wall, plus the other 2400 steps,
# plus two more whole-dev decodes: T/2's and the test's, about the dev set's size).
CHOICE=$(python3 - "$WORK/short-runs.txt" <<'EOF'
import json, sys
arms = {a["arm"]: a for a in map(json.loads, open(sys.argv[1]))}
def trial(a):
    if a.get("rc") != 0 or a.get("step_time_s") is None:
        return float("inf")
    return a["call_s"] + 2400 * a["step_time_s"] + 2 * a["val_time_s"]
priced = {name: trial(a) for name, a in arms.items()}
print(min(priced, key=priced.get) if priced else "before", {k: v if v == float("inf") else round(v) for k, v in priced.items()}, file=sys.stderr)
print("after" if priced.get("after", float("inf")) < priced.get("before", float("inf")) else "before")
EOF
)
STUDY_ARGS=(--workers 8)
[ "$CHOICE" = after ] && STUDY_ARGS+=("${GRAPHS[@]}")
echo "study with the '$CHOICE' arm: ${STUDY_ARGS[*]}" | tee -a "$WORK/short-runs.txt"

STUDY=/tmp/study
save() {  # written aside, then moved: a save the loop is making never leaves a half-written study.tgz behind
    tar czf "$WORK/study.$1.tgz" -C "$STUDY" --exclude checkpoints --exclude '*.ckpt' --exclude wandb . 2>/dev/null \
        && mv "$WORK/study.$1.tgz" "$OUT/study.tgz"
}
( while [ ! -e "$WORK/stop-saving" ]; do sleep 20; save loop; done ) & SAVER=$!
sample card.txt & SAMPLER=$!
step "ablate sweep table3 --preset tiny ${STUDY_ARGS[*]}"
start=$(date +%s)
# SIGTERM: the coordinator stops its workers at their next step and says what was saved (a second SIGINT, which
# timeout also sends to the process group, would stop it at once and leave the workers on the card).
timeout --signal TERM --kill-after 40 "$(left 140)" ablate sweep table3 --preset tiny "${STUDY_ARGS[@]}" \
    --out "$STUDY" --no_report >"$WORK/sweep.log" 2>&1
echo "rc=$? after $(( $(date +%s) - start )) s" | tee "$WORK/study-wall.txt"
while pgrep -f "$STUDY" >/dev/null && [ "$(left 30)" -gt 1 ]; do sleep 1; done; pkill -9 -f "$STUDY"  # the benches get the card alone
touch "$WORK/stop-saving"; wait $SAVER; kill $SAMPLER 2>/dev/null
timeout 30 ablate status "$STUDY" 2>&1 | tail -50 >>"$WORK/study-wall.txt"; tail -8 "$WORK/study-wall.txt"
save last; pack

PAPER=(--preset paper --overhead false --lightning false --decode_repeats 1 --warmup 3 --repeats 10)
bench paper-eager 100 "${PAPER[@]}" --vs hf,torch
bench paper-compiled 75 "${PAPER[@]}" --vs none --compile true --compile_scope layers
bench paper-attention 60 "${PAPER[@]}" --vs none --attention true --repeats 4 --decode_sentences 2
step "done"
