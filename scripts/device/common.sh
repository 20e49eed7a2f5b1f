# Sourced by the lease scripts beside it: the wheels and prepared corpora a lent machine lacks, a deadline for the
# whole call, stages that always end, and packing of what comes back ($OUT holds at most 8 files).
# Here, before a lease: `bash scripts/device/prepare.sh IMAGE_PACKAGES` builds `.whl/` (the wheels the machine lacks,
# plus ours) and `.ablate-cache/` (the prepared corpus); name both in the run's `carry`.
#
# A stage (`run_stage NAME LIMIT CMD...`) runs in a process group of its own (setsid), its output streaming into
# $WORK/NAME.log as it runs. At its limit the whole group gets SIGTERM, then after GRACE seconds the stage's leader
# gets SIGABRT (PYTHONFAULTHANDLER=1: Python writes every thread's stack into the log) and the group SIGKILL. Its start,
# end and exit code go into the summary at once. A packer packs $WORK every 20 s, on every stage's end and on exit; a
# watchdog kills the running stage and packs at DEADLINE - 20 s, so a hung stage never costs the call's figures.
set -u
OUT=${OUT:-/tmp/out}
NAME=$(basename "$0" .sh)
WORK=${WORK:-/tmp/lease-$NAME}
mkdir -p "$WORK" "$OUT"
T0=$(date +%s)  # the install counts against the deadline too
if [ -d .whl ] && [ -z "${NO_WHEELS:-}" ]; then  # NO_WHEELS: a rehearsal here, in our own environment
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
        || exit 1
    export PYTHONPATH=/tmp/site PATH=/tmp/site/bin:$PATH
fi
[ -d .ablate-cache ] && export ABLATE_CACHE=$PWD/.ablate-cache
export WANDB_MODE=offline WANDB_SILENT=true PYTHONUNBUFFERED=1 PYTHONFAULTHANDLER=1
export TORCHINDUCTOR_CACHE_DIR=${TORCHINDUCTOR_CACHE_DIR:-/tmp/inductor}
DEADLINE=${DEADLINE:-540}  # seconds for the whole call: every step's limit is cut to what is left of it
GRACE=${GRACE:-10}         # seconds a stage has between SIGTERM and its stack dump and SIGKILL
left() { local l=$(( DEADLINE - ($(date +%s) - T0) )); [ "$l" -lt 1 ] && l=1; [ "$l" -lt "$1" ] && echo "$l" || echo "$1"; }
elapsed() { echo $(( $(date +%s) - T0 )); }
step() { echo "== $1 ($(elapsed) s)"; }
pack() {  # everything in one archive, and every text figure in one summary ($OUT returns at most 8 files); each is
    # written aside and moved, so a pack cut by the watchdog never leaves a torn archive behind
    tar czf "$OUT/.$NAME.tgz.$$" -C "$WORK" . 2>/dev/null && mv -f "$OUT/.$NAME.tgz.$$" "$OUT/$NAME.tgz"
    for f in "$WORK"/*.txt; do [ -e "$f" ] && { echo "== $(basename "$f")"; cat "$f"; }; done >"$OUT/.summary.$$" \
        && mv -f "$OUT/.summary.$$" "$OUT/summary.txt"; true
}
stages() { echo "$(date +%T) $(elapsed)s $*" >>"$WORK/stages.txt"; }
kill_stage() {  # kill_stage PGID: TERM the group, GRACE s, then the leader's stacks (SIGABRT) and the group's SIGKILL
    local pgid=$1 waited=0
    kill -TERM -- "-$pgid" 2>/dev/null || return 0
    while kill -0 -- "-$pgid" 2>/dev/null && [ "$waited" -lt "$GRACE" ]; do sleep 1; waited=$((waited + 1)); done
    if kill -0 -- "-$pgid" 2>/dev/null; then
        kill -ABRT "$pgid" 2>/dev/null; sleep 2
        kill -KILL -- "-$pgid" 2>/dev/null
        echo "killed after ${GRACE} s of grace (stacks dumped by SIGABRT)"
    else
        echo "stopped within ${waited} s of SIGTERM"
    fi
}
run_stage() {  # run_stage NAME LIMIT CMD...: CMD in its own process group, cut at min(LIMIT, what is left - 25 s)
    local name=$1 limit=$2; shift 2
    local cut; cut=$(left "$limit"); [ "$cut" -gt $(( DEADLINE - $(elapsed) - 25 )) ] && cut=$(( DEADLINE - $(elapsed) - 25 ))
    if [ "$cut" -lt 5 ]; then stages "$name skipped: ${cut} s left"; echo 125; return; fi
    stages "$name start (limit ${cut} s): $*"
    setsid "$@" >"$WORK/$name.log" 2>&1 &
    local pid=$! start; start=$(date +%s)
    echo "$pid" >"$WORK/.current"
    while kill -0 "$pid" 2>/dev/null && [ $(( $(date +%s) - start )) -lt "$cut" ]; do sleep 1; done
    local rc how=""
    if kill -0 "$pid" 2>/dev/null; then
        how=$(kill_stage "$pid"); wait "$pid"; rc=124
    else
        wait "$pid"; rc=$?
        kill -KILL -- "-$pid" 2>/dev/null && how="its leftover processes killed"  # compile workers, MPS clients
    fi
    rm -f "$WORK/.current"
    stages "$name end rc=$rc after $(( $(date +%s) - start )) s${how:+; $how}"
    pack
    echo "$rc"
}
watchdog() {  # at DEADLINE - 20 s: the running stage is killed and everything packed
    sleep $(( DEADLINE - 20 - $(elapsed) ))
    stages "watchdog at DEADLINE - 20 s"
    [ -e "$WORK/.current" ] && GRACE=3 kill_stage "$(cat "$WORK/.current")" >>"$WORK/stages.txt"
    pack
}
# In the background with no hold on the call's output (a caller reading it to its end would wait for their sleeps).
watchdog >/dev/null 2>&1 & WATCHDOG=$!
( while sleep 20; do pack; done ) >/dev/null 2>&1 & PACKER=$!
trap 'pkill -P $WATCHDOG 2>/dev/null; pkill -P $PACKER 2>/dev/null; kill $WATCHDOG $PACKER 2>/dev/null; pack' EXIT
sample() {  # sample FILE: the card's utilisation and memory every 5 s (run in the background, killed after)
    while sleep 5; do { date +%T; nvidia-smi --query-gpu=utilization.gpu,memory.used --format=csv,noheader; } \
        >>"$WORK/$1" 2>&1; done
}
step "machine"
{ nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null
  python3 -c 'import torch; print("torch", torch.__version__, torch.cuda.get_device_name() if torch.cuda.is_available()
else "no cuda")'; nproc; command -v nvidia-cuda-mps-control || echo "no MPS control program"; } 2>&1 | tee "$WORK/machine.txt"
bench() {  # bench NAME LIMIT ARGS...: one `ablate bench` as a stage, its JSON kept and its summary printed
    local name=$1 limit=$2; shift 2
    step "bench $name: $*"
    local rc; rc=$(run_stage "$name" "$limit" sh -c 'o=$0 e=$1; shift; exec ablate bench "$@" --json >"$o" 2>"$e"' \
        "$WORK/$name.json" "$WORK/$name.err" "$@")
    echo "rc=$rc"
    python3 -c "import json,sys; from ablate.benchmarks.summary import format_report; \
print(format_report(json.load(open(sys.argv[1]))))" "$WORK/$name.json" 2>/dev/null | tee "$WORK/$name.txt" | tail -14
    [ -s "$WORK/$name.json" ] || echo "{\"stage\": \"$name\", \"rc\": $rc}" >"$WORK/$name.json"
    pack
}
