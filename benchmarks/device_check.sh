#!/usr/bin/env bash
# Issue 31's measurements in one call on a lent GPU machine (its `device` tool): what our GPU path does on a real GPU.
# Run from the repository root there, with the wheels the machine lacks in .whl/ and the prepared corpora in
# .ablate-cache/, both carried (results and findings: benchmarks/RESULTS.md, "GPU path on an H200"). Here, first:
#   echo /.whl/ >>.git/info/exclude; echo /.ablate-cache/ >>.git/info/exclude
#   .venv/bin/pip freeze | grep -v ablate   # minus what the machine has (the device tool's KINDS.md lists it):
#   pip download --no-deps --only-binary=:all: --python-version 3.12 --platform manylinux_2_17_x86_64 ... -d .whl
#   .venv/bin/pip wheel --no-deps --no-build-isolation -w .whl .          # ours, rebuilt after every change
#   .venv/bin/ablate bench --preset paper --device cpu --repeats 1 ...   # prepares the corpus; then
#   cp -r ~/.cache/ablate .ablate-cache                                  # (31 + 6 MB on 2026-11-26)
# Writes its logs and JSON under $OUT (at most 8 files come back).
#   bash benchmarks/device_check.sh        (about 9 minutes)
#   1. the gpu-marked tests, then, with tracebacks, the test files that failed there on 2026-11-26;
#   2. `ablate bench --preset paper` with the peers (bf16, SDPA kernels, MFU), then with train.compile;
#   3. `ablate bench --preset tiny` (the default study's row on a GPU: what its step time is bound by).
#   bash benchmarks/device_check.sh suite  (about 9 minutes): the whole suite, 12 pytest-xdist workers.
# Every step has its own time limit, so one that hangs cannot take the others' device time.
set -u
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site PATH=/tmp/site/bin:$PATH WANDB_MODE=offline WANDB_SILENT=true PYTHONUNBUFFERED=1
step() { echo "== $1 ($(date +%T))"; }

step "machine"
{ nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv
  python3 -c 'import torch, pytorch_lightning as pl; print("torch", torch.__version__, "lightning", pl.__version__, torch.cuda.get_device_name())'
  nproc; } 2>&1 | tee "$OUT/machine.txt"

if [ "${1:-}" = suite ]; then
    step "whole suite"
    OMP_NUM_THREADS=1 timeout 520 python3 -m pytest -v -n 12 --timeout 300 --tb=short -rfE -W ignore tests >"$OUT/tests.log" 2>&1
    grep -E "\] (FAILED|ERROR)|passed|failed" "$OUT/tests.log" | tail -40  # the names even if the limit cuts the summary
    step "done"
    exit 0
fi

step "gpu-marked tests"
timeout 90 python3 -m pytest -q -m gpu -rs tests 2>&1 | tee "$OUT/tests-gpu.log" | tail -15

step "the test files that failed on the H200 on 2026-11-26 (12 failed, 19 errors, causes unread)"
# One thread per pytest process: 16 processes with torch's default 16 threads each on 16 cores is the oversubscription
# that slows training 20-50x, the likely cause of those failures (each training test then ran into --timeout).
files=(tests/benchmarks/test_bench.py)
for f in sweep api budgets reliability secrets sweep_workers cli compare launchers tracking tune; do
    files+=("tests/ablations/test_$f.py")
done
OMP_NUM_THREADS=1 timeout 170 python3 -m pytest -q -n 8 --timeout 160 --tb=short -rfE -W ignore "${files[@]}" >"$OUT/tests-failed.log" 2>&1
grep -E "^(FAILED|ERROR)|^E  |passed|failed" "$OUT/tests-failed.log" | head -40

bench() {  # bench NAME LIMIT ARGS...: one `ablate bench` run, its JSON in $OUT/NAME.json, its progress in the log
    local name=$1 limit=$2; shift 2
    step "bench $name: $*"
    ABLATE_CACHE=$PWD/.ablate-cache timeout "$limit" ablate bench "$@" --json >"$OUT/$name.json" 2>"$OUT/$name.err"
    echo "rc=$? $(tail -c 400 "$OUT/$name.err")"
    { echo "== $name"; cat "$OUT/$name.err"; } >>"$OUT/bench.log"; rm -f "$OUT/$name.err"
}
bench paper 130 --preset paper --vs hf,torch --overhead false
bench paper-compile 150 --preset paper --vs none --compile true --overhead false --lightning false --decode_repeats 1
bench tiny 60 --preset tiny --vs none --overhead false --decode_repeats 1
step "done"
