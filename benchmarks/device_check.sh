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
# Writes its logs and JSON under $OUT (at most 8 files come back); failing tests' tracebacks go to $OUT/failures.txt
# as they happen (tests/conftest.py, ABLATE_TEST_FAILURES), so a call cut off at its limit still says why.
#   bash benchmarks/device_check.sh          (about 7 minutes)
#   1. the gpu-marked tests, then the four tests that failed on the second lease of 2026-11-26 (fixed since);
#   2. `ablate bench --preset paper` with the peers (bf16, SDPA kernels, MFU; cold and warm steps);
#   3. `ablate bench --preset tiny` (the default study's row on a GPU: what its step time is bound by).
#   bash benchmarks/device_check.sh compile  (about 4 minutes): the paper bench with train.compile.
#   bash benchmarks/device_check.sh suite    (about 9 minutes): the whole suite, 12 pytest-xdist workers.
# Every step has its own time limit, so one that hangs cannot take the others' device time.
set -u
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site PATH=/tmp/site/bin:$PATH WANDB_MODE=offline WANDB_SILENT=true PYTHONUNBUFFERED=1
export ABLATE_TEST_FAILURES=$OUT/failures.txt
step() { echo "== $1 ($(date +%T))"; }

step "machine"
{ nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv
  python3 -c 'import torch, pytorch_lightning as pl; print("torch", torch.__version__, "lightning", pl.__version__, torch.cuda.get_device_name())'
  nproc; } 2>&1 | tee "$OUT/machine.txt"

if [ "${1:-}" = suite ]; then
    step "whole suite"
    OMP_NUM_THREADS=1 timeout 520 python3 -m pytest -v -n 12 --timeout 300 --tb=short -rfE -W ignore tests >"$OUT/tests.log" 2>&1
    # The names as they happen, even if the limit cuts the summary; the tracebacks are in $OUT/failures.txt
    grep -E "\] (FAILED|ERROR)|passed|failed" "$OUT/tests.log" | tail -40
    step "done"
    exit 0
fi

if [ "${1:-}" != compile ]; then
step "gpu-marked tests"
timeout 90 python3 -m pytest -q -m gpu -rs tests 2>&1 | tee "$OUT/tests-gpu.log" | tail -15

step "the tests that failed on the H200's second lease of 2026-11-26"
# Two asserted the message of a reachable driver (psycopg2 is not installed there), two timed Ctrl-C and the device
# string against CPU-speed training (tests/ablations/conftest.py now hides the GPU from the sweep tests).
OMP_NUM_THREADS=1 timeout 150 python3 -m pytest -q -n 4 --timeout 140 --tb=short -rfE -W ignore \
    tests/ablations/test_api.py::test_the_api_gives_the_reports_table_and_verdicts \
    tests/ablations/test_secrets.py::test_no_command_shows_the_password_of_an_unreachable_storage \
    tests/ablations/test_secrets.py::test_a_sweep_on_an_unreachable_storage_shows_no_password \
    tests/ablations/test_reliability.py::test_ctrl_c_on_a_two_worker_sweep_saves_the_running_trials_prints_the_resume_line_and_exits_130 \
    >"$OUT/tests-failed.log" 2>&1
tail -n 3 "$OUT/tests-failed.log"
fi

bench() {  # bench NAME LIMIT ARGS...: one `ablate bench` run, its JSON in $OUT/NAME.json, its progress in the log
    local name=$1 limit=$2; shift 2
    step "bench $name: $*"
    ABLATE_CACHE=$PWD/.ablate-cache timeout "$limit" ablate bench "$@" --json >"$OUT/$name.json" 2>"$OUT/$name.err"
    echo "rc=$? $(tail -c 400 "$OUT/$name.err")"
    { echo "== $name"; cat "$OUT/$name.err"; } >>"$OUT/bench.log"; rm -f "$OUT/$name.err"
}
if [ "${1:-}" = compile ]; then
    bench paper-compile 220 --preset paper --vs none --compile true --overhead false --lightning false --decode_repeats 1
else
    bench paper 240 --preset paper --vs hf,torch --overhead false
    bench tiny 60 --preset tiny --vs none --overhead false --decode_repeats 1
fi
step "done"
