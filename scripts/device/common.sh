# Sourced by the lease scripts beside it: the wheels and prepared corpora a lent machine lacks, a deadline for the
# whole call, and packing of what comes back ($OUT holds at most 8 files).
# Here, before a lease: `bash scripts/device/prepare.sh IMAGE_PACKAGES` builds `.whl/` (the wheels the machine lacks,
# plus ours) and `.ablate-cache/` (the prepared corpus); name both in the run's `carry`.
set -u
OUT=${OUT:-/tmp/out}
NAME=$(basename "$0" .sh)
WORK=${WORK:-/tmp/lease-$NAME}
mkdir -p "$WORK" "$OUT"
T0=$(date +%s)  # the install counts against the deadline too
if [ -d .whl ]; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
        || exit 1
    export PYTHONPATH=/tmp/site PATH=/tmp/site/bin:$PATH
fi
[ -d .ablate-cache ] && export ABLATE_CACHE=$PWD/.ablate-cache
export WANDB_MODE=offline WANDB_SILENT=true PYTHONUNBUFFERED=1
export TORCHINDUCTOR_CACHE_DIR=${TORCHINDUCTOR_CACHE_DIR:-/tmp/inductor}
DEADLINE=${DEADLINE:-540}  # seconds for the whole call: every step's limit is cut to what is left of it
left() { local l=$(( DEADLINE - ($(date +%s) - T0) )); [ "$l" -lt 1 ] && l=1; [ "$l" -lt "$1" ] && echo "$l" || echo "$1"; }
step() { echo "== $1 ($(( $(date +%s) - T0 )) s)"; }
pack() {  # everything in one archive, and every text figure in one summary ($OUT returns at most 8 files)
    tar czf "$OUT/$NAME.tgz" -C "$WORK" . 2>/dev/null
    for f in "$WORK"/*.txt; do [ -e "$f" ] && { echo "== $(basename "$f")"; cat "$f"; }; done >"$OUT/summary.txt"; true
}
sample() {  # sample FILE: the card's utilisation and memory every 5 s (run in the background, killed after)
    while sleep 5; do { date +%T; nvidia-smi --query-gpu=utilization.gpu,memory.used --format=csv,noheader; } \
        >>"$WORK/$1" 2>&1; done
}
step "machine"
{ nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null
  python3 -c 'import torch; print("torch", torch.__version__, torch.cuda.get_device_name() if torch.cuda.is_available()
else "no cuda")'; nproc; command -v nvidia-cuda-mps-control || echo "no MPS control program"; } 2>&1 | tee "$WORK/machine.txt"
bench() {  # bench NAME LIMIT ARGS...: one `ablate bench`, its JSON kept and its summary printed
    local name=$1 limit=$2; shift 2
    step "bench $name: $*"
    timeout "$(left "$limit")" ablate bench "$@" --json >"$WORK/$name.json" 2>"$WORK/$name.err"
    echo "rc=$?"
    python3 -c "import json,sys; from ablate.benchmarks.summary import format_report; \
print(format_report(json.load(open(sys.argv[1]))))" "$WORK/$name.json" 2>/dev/null | tee "$WORK/$name.txt" | tail -14
    pack
}
