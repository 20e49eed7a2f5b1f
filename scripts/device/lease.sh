#!/usr/bin/env bash
# One lease in one call (DEADLINE 540 s, the install included), for a session lent 15 minutes of a card (one start,
# one call; run it with timeout_s 590). Each stage has a share of DEADLINE (SHARES: at most 80% in all, the rest is
# the install, the machine's facts and the packing), writes its JSON into the packed archive, and is cut to what is
# left of DEADLINE:
#  1. `before`: a tiny trial's 400 steps and its whole-dev decode on the card's defaults (what lightning_modules/card.py
#     lists as measured);
#  2. `after`: the same with every card value a lease has not yet measured (ABLATE_CARD=all: static decoding, the
#     loss watch on the device, the padding mask always passed), plus CUDA graphs in training;
#  3. `study`: the default study from an empty folder with 8 workers (MPS), on whichever arm prices a whole trial
#     cheaper, until its share is spent: trials finished, their walls, the ETA (its records come back as study.tgz);
#  4. `status`: `ablate status --json` of that study;
#  5. `paper`: the paper base's MFU eager beside MarianMT and nn.Transformer on the same batches.
# Run from the repository root: bash scripts/device/lease.sh. Rehearsed on a CPU at smoke sizes in the tests
# (tests/benchmarks/test_lease.py: PRESET=smoke BENCH_PRESET=smoke SHORT_STEPS=10 WORKERS=1 PEERS=torch GRAPHS=).
source "$(dirname "$0")/common.sh"

PRESET=${PRESET:-tiny}              # the short runs' and the study's preset
BENCH_PRESET=${BENCH_PRESET:-paper}  # the MFU bench's
SHORT_STEPS=${SHORT_STEPS:-400}
WORKERS=${WORKERS:-8}
PEERS=${PEERS:-hf,torch}           # the paper bench's peers (MarianMT needs the bench extra)
RUNS=${RUNS:-/tmp}                 # where the short runs and the study train (not packed: checkpoints)
read -r -a GRAPHS <<<"${GRAPHS---data.buckets 8 --train.compile true --train.compile_scope model --train.cuda_graphs true}"
declare -A SHARES=([before]=11 [after]=15 [study]=30 [study_wind_down]=5 [status]=3 [paper]=16)  # percent of DEADLINE
limit_of() { echo $(( DEADLINE * SHARES[$1] / 100 )); }
python3 - "$DEADLINE" "$(declare -p SHARES)" >"$WORK/plan.json" <<'EOF'
import json, re, sys
deadline, shares = int(sys.argv[1]), dict(re.findall(r"\[(\w+)\]=\"?(\d+)", sys.argv[2]))
limits = {k: deadline * int(v) // 100 for k, v in shares.items()}
print(json.dumps({"deadline_s": deadline, "limits_s": limits, "sum_s": sum(limits.values())}))
EOF

short_run() {  # short_run NAME ARGS...: SHORT_STEPS steps, then the whole dev set decoded once; NAME.json
    local name=$1; shift
    step "$SHORT_STEPS $PRESET steps and the whole dev decode: $name"
    local start; start=$(date +%s); rm -rf "$RUNS/short-$name"
    timeout "$(left "$(limit_of "$name")")" ablate train --preset "$PRESET" --train.max_steps "$SHORT_STEPS" \
        --train.val_every "$SHORT_STEPS" --train.budgets "[]" --train.test_eval false "$@" --out "$RUNS/short-$name" \
        >"$WORK/short-$name.log" 2>&1
    local rc=$?
    python3 - "$name" "$rc" "$(( $(date +%s) - start ))" "$RUNS/short-$name" <<'EOF' | tee "$WORK/$name.json" >>"$WORK/short-runs.txt"
import json, sys
from pathlib import Path
name, rc, wall, out = sys.argv[1], sys.argv[2], sys.argv[3], Path(sys.argv[4])
found = sorted(out.rglob("result.json"))
m = json.loads(found[0].read_text()).get("metrics", {}) if found else {}
keys = ("step_time_s", "train_time_s", "val_time_s", "wall_time_s", "bleu", "ppl", "bleu_sentences", "path")
print(json.dumps({"arm": name, "rc": int(rc), "call_s": int(wall), **{k: m.get(k) for k in keys}}))
EOF
    pack
}
short_run before --train.decoding auto
ABLATE_CARD=all short_run after "${GRAPHS[@]}"

# The study's settings: the arm whose whole trial prices lower (the short run's wall, plus the other steps of a
# trial, plus two more whole-dev decodes: T/2's and the test's, about the dev set's size).
CHOICE=$(python3 - "$WORK/short-runs.txt" "$PRESET" <<'EOF'
import json, sys
from ablate.ablations.study.definition import load_study
arms = {a["arm"]: a for a in map(json.loads, open(sys.argv[1]))}
study = load_study("table3")
steps = study.run_config(study.rows[0], sys.argv[2], 0).train.max_steps
def trial(a):
    if a.get("rc") != 0 or a.get("step_time_s") is None:
        return float("inf")
    return a["call_s"] + steps * a["step_time_s"] + 2 * a["val_time_s"]
priced = {name: trial(a) for name, a in arms.items()}
print({k: v if v == float("inf") else round(v) for k, v in priced.items()}, file=sys.stderr)
print("after" if priced.get("after", float("inf")) < priced.get("before", float("inf")) else "before")
EOF
)
STUDY_ARGS=(--workers "$WORKERS")
STUDY_ENV=()
[ "$CHOICE" = after ] && STUDY_ARGS+=("${GRAPHS[@]}") && STUDY_ENV=(ABLATE_CARD=all)
echo "study with the '$CHOICE' arm: ${STUDY_ENV[*]} ${STUDY_ARGS[*]}" | tee -a "$WORK/short-runs.txt"

STUDY=$RUNS/study-$PRESET
rm -rf "$STUDY"
save() {  # written aside, then moved: a save the loop is making never leaves a half-written study.tgz behind
    tar czf "$WORK/study.$1.tgz" -C "$STUDY" --exclude checkpoints --exclude '*.ckpt' --exclude wandb . 2>/dev/null \
        && mv "$WORK/study.$1.tgz" "$OUT/study.tgz"
}
( while [ ! -e "$WORK/stop-saving" ]; do sleep 20; [ -d "$STUDY" ] && save loop; done ) & SAVER=$!
sample card.txt & SAMPLER=$!
step "ablate sweep table3 --preset $PRESET ${STUDY_ARGS[*]}"
start=$(date +%s)
# SIGTERM: the coordinator stops its workers at their next step and says what was saved (a second SIGINT, which
# timeout also sends to the process group, would stop it at once and leave the workers on the card).
env "${STUDY_ENV[@]}" timeout --signal TERM --kill-after "$(limit_of study_wind_down)" "$(left "$(limit_of study)")" \
    ablate sweep table3 --preset "$PRESET" "${STUDY_ARGS[@]}" --out "$STUDY" --no_report >"$WORK/sweep.log" 2>&1
rc=$? wall=$(( $(date +%s) - start ))
echo "{\"arm\": \"$CHOICE\", \"rc\": $rc, \"call_s\": $wall}" | tee "$WORK/study.json" >"$WORK/study-wall.txt"
while pgrep -f "$STUDY" >/dev/null && [ "$(left 2)" -gt 1 ]; do sleep 1; done; pkill -9 -f "$STUDY"  # the bench gets the card alone
touch "$WORK/stop-saving"; wait $SAVER; kill $SAMPLER 2>/dev/null
step "ablate status"
timeout "$(left "$(limit_of status)")" ablate status "$STUDY" --json >"$WORK/status.json" 2>"$WORK/status.err"
timeout 10 ablate status "$STUDY" 2>&1 | tail -12 >>"$WORK/study-wall.txt"; tail -8 "$WORK/study-wall.txt"
save last; pack

bench paper "$(limit_of paper)" --preset "$BENCH_PRESET" --overhead false --lightning false --decode_repeats 1 \
    --warmup 3 --repeats 10 --vs "$PEERS"
step "done"
