#!/usr/bin/env bash
# One lease in one call (DEADLINE 560 s, the install included), for a session lent 15 minutes of a card (one start,
# one call; run it with timeout_s 600). Stages in the order of what a lease is for, each in its own process group and
# cut at its limit (common.sh: run_stage; a hung stage is killed with its stacks in its log and the next one runs):
#  1. `replayed`: a tiny trial's SHORT_STEPS steps and its whole-dev decode with the replayed step (REPLAY:
#     train.replay_step, one CUDA graph per batch shape): does the fast arm run at all, and at what step time;
#  2. `before`: the same on the card's defaults (what lightning_modules/card.py lists as measured);
#  3. `study`: the default study from an empty folder with WORKERS workers (MPS) on the faster arm that ran, for
#     about 40% of the deadline: trials finished, their walls, the ETA (its records come back as study.tgz every 20 s);
#  4. `status`: `ablate status --json` of that study;
#  5. `paper`: the paper base's MFU eager beside nn.Transformer (and MarianMT where PEERS names hf) on the same batches;
#  6. `after`: the short run with every card value (ABLATE_CARD=all) and the buckets, no compile;
#  7. `compiled`: the same compiled with CUDA graphs (GRAPHS), with what is left.
# Every stage writes NAME.json at its end, whatever its exit. Run from the repository root: bash scripts/device/lease.sh.
# Rehearsed on a CPU at smoke sizes in the tests, with a planted hang (tests/benchmarks/test_lease.py: PRESET=smoke
# BENCH_PRESET=smoke SHORT_STEPS=10 WORKERS=1 PEERS=torch GRAPHS=... HANG=after).
source "$(dirname "$0")/common.sh"

PRESET=${PRESET:-tiny}              # the short runs' and the study's preset
BENCH_PRESET=${BENCH_PRESET:-paper}  # the MFU bench's
SHORT_STEPS=${SHORT_STEPS:-400}
WORKERS=${WORKERS:-8}
PEERS=${PEERS:-hf,torch}           # the paper bench's peers (MarianMT needs the bench extra)
RUNS=${RUNS:-/tmp}                 # where the short runs and the study train (not packed: checkpoints)
HANG=${HANG:-}                     # a rehearsal's planted hang: the stage named here sleeps and ignores SIGTERM
read -r -a ALL <<<"${ALL---data.buckets 8}"
read -r -a REPLAY <<<"${REPLAY---data.buckets 8 --train.replay_step true}"
read -r -a GRAPHS <<<"${GRAPHS---data.buckets 8 --train.compile true --train.compile_scope model --train.cuda_graphs true}"
declare -A SHARES=([replayed]=10 [before]=11 [study]=40 [status]=3 [paper]=12 [after]=9 [compiled]=10)  # % of DEADLINE
limit_of() { echo $(( DEADLINE * SHARES[$1] / 100 )); }
python3 - "$DEADLINE" "$(declare -p SHARES)" >"$WORK/plan.json" <<'EOF'
import json, re, sys
deadline, shares = int(sys.argv[1]), dict(re.findall(r"\[(\w+)\]=\"?(\d+)", sys.argv[2]))
limits = {k: deadline * int(v) // 100 for k, v in shares.items()}
print(json.dumps({"deadline_s": deadline, "limits_s": limits, "sum_s": sum(limits.values())}))
EOF

HUNG=(python3 -c "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(10**6)")
planted() { [ "$HANG" = "$1" ]; }  # a stage that never returns: sleeps in Python with SIGTERM ignored
short_run() {  # short_run NAME ARGS...: SHORT_STEPS steps, then the whole dev set decoded once; NAME.json
    local name=$1; shift
    step "$SHORT_STEPS $PRESET steps and the whole dev decode: $name"
    rm -rf "$RUNS/short-$name"
    local cmd=("${HUNG[@]}")
    planted "$name" || cmd=(ablate train --preset "$PRESET" --train.max_steps "$SHORT_STEPS"
        --train.val_every "$SHORT_STEPS" --train.budgets "[]" --train.test_eval false "$@" --out "$RUNS/short-$name")
    local start rc; start=$(date +%s)
    rc=$(run_stage "$name" "$(limit_of "$name")" env "${ENVS[@]}" "${cmd[@]}")
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
ENVS=(ABLATE_CARD=)
short_run replayed "${REPLAY[@]}"
short_run before --train.decoding auto
# The study's arm: the replayed step where it ran and stepped faster than the defaults.
ARM=$(python3 - "$WORK/replayed.json" "$WORK/before.json" <<'EOF'
import json, sys
fast, plain = (json.load(open(p)) for p in sys.argv[1:3])
ok = fast.get("rc") == 0 and fast.get("step_time_s") and plain.get("step_time_s")
print("replayed" if ok and fast["step_time_s"] < plain["step_time_s"] else "before")
EOF
)
STUDY_ARGS=()
[ "$ARM" = replayed ] && STUDY_ARGS=("${REPLAY[@]}")
stages "study arm: $ARM ${STUDY_ARGS[*]}"

STUDY=$RUNS/study-$PRESET
rm -rf "$STUDY"
save() {  # written aside, then moved: a save the loop is making never leaves a half-written study.tgz behind
    tar czf "$WORK/study.$1.tgz" -C "$STUDY" --exclude checkpoints --exclude '*.ckpt' --exclude '*.pt' --exclude wandb . 2>/dev/null \
        && mv "$WORK/study.$1.tgz" "$OUT/study.tgz"
}
( while [ ! -e "$WORK/stop-saving" ]; do sleep 20; [ -d "$STUDY" ] && save loop; done ) >/dev/null 2>&1 & SAVER=$!
sample card.txt >/dev/null 2>&1 & SAMPLER=$!
step "ablate sweep table3 --preset $PRESET --workers $WORKERS"
start=$(date +%s)
cmd=("${HUNG[@]}")
planted study || cmd=(ablate sweep table3 --preset "$PRESET" --workers "$WORKERS" --out "$STUDY" --no_report \
    "${STUDY_ARGS[@]}")
# SIGTERM at the limit: the coordinator stops its workers at their next step and says what was saved; GRACE later
# the group is killed whatever it does
rc=$(GRACE=20 run_stage study "$(limit_of study)" "${cmd[@]}")
echo "{\"arm\": \"$ARM\", \"workers\": $WORKERS, \"rc\": $rc, \"call_s\": $(( $(date +%s) - start ))}" \
    | tee "$WORK/study.json" >"$WORK/study-wall.txt"
touch "$WORK/stop-saving"; wait $SAVER; kill $SAMPLER 2>/dev/null
step "ablate status"
cmd=("${HUNG[@]}")
planted status || cmd=(sh -c 'ablate status "$0" --json >"$1"' "$STUDY" "$WORK/status.out")
rc=$(run_stage status "$(limit_of status)" "${cmd[@]}")
if [ -s "$WORK/status.out" ]; then mv "$WORK/status.out" "$WORK/status.json"
else echo "{\"stage\": \"status\", \"rc\": $rc}" >"$WORK/status.json"; fi
timeout -k 2 10 ablate status "$STUDY" 2>&1 | tail -12 >>"$WORK/study-wall.txt"; tail -8 "$WORK/study-wall.txt"
save last; pack

bench paper "$(limit_of paper)" --preset "$BENCH_PRESET" --overhead false --lightning false --decode_repeats 1 \
    --warmup 3 --repeats 10 --vs "$PEERS"

ENVS=(ABLATE_CARD=all)
short_run after "${ALL[@]}"
SHARES[compiled]=$(( ($(left 100000) - 25) * 100 / DEADLINE ))  # what is left
short_run compiled "${GRAPHS[@]}"
step "done"
