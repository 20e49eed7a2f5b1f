#!/usr/bin/env bash
# Issues 53 and 54 on a lent card, one call of about 9 minutes: the GPU tests of what was built on CPUs (the static
# decoder's captured graph, CUDA graphs in training, the MPS daemon), a tiny run's 400 steps and validation three
# ways (dynamic decoding; static; static with CUDA graphs in training), the tiny bench's decoders side by side, and
# the paper base's MFU eager (masked attention, with the attention kernels side by side; then model.kernels jagged)
# and compiled whole (dynamo's restarts and recompiles logged), MarianMT and nn.Transformer on the same batches.
# Run from the repository root: bash scripts/device/measure.sh
source "$(dirname "$0")/common.sh"

step "gpu-marked tests"
timeout "$(left 120)" python3 -m pytest -q -rs -m gpu tests/lightning_modules tests/ablations/runtime/test_mps.py \
    2>&1 | tee "$WORK/tests-gpu.txt" | tail -5
pack

short_run() {  # short_run NAME ARGS...: 400 tiny steps and one validation (no T/2 branch, no test), timed
    local name=$1; shift
    step "400 tiny steps and one validation: $name"
    local start; start=$(date +%s); rm -rf "/tmp/short-$name"  # a rerun on a warm machine measures afresh
    timeout "$(left 120)" ablate train --preset tiny --train.max_steps 400 --train.val_every 400 --train.budgets "[]" \
        --train.test_eval false --train.final_full_validation false "$@" --out "/tmp/short-$name" \
        >"$WORK/short-$name.log" 2>&1
    echo "rc=$? after $(( $(date +%s) - start )) s; $(grep -E 'dev PPL' "$WORK/short-$name.log" | tail -1)" \
        | tee -a "$WORK/short-runs.txt"
    pack
}
short_run dynamic --train.decoding dynamic
short_run static --train.decoding static
short_run graphs --train.decoding static --train.compile true --train.compile_scope model --train.cuda_graphs true \
    --data.buckets 8

bench tiny-decoding 90 --preset tiny --vs none --overhead false --lightning false --repeats 5
PAPER=(--preset paper --overhead false --lightning false --decode_repeats 1 --warmup 3 --repeats 12)
bench paper-eager 100 "${PAPER[@]}" --vs hf,torch --attention true
bench paper-jagged 60 "${PAPER[@]}" --vs none --model.kernels jagged
TORCH_LOGS=recompiles,graph_breaks,dynamo bench paper-compiled-model 200 "${PAPER[@]}" --vs none --compile true \
    --compile_scope model
grep -E "Restarting analysis|Recompiling" "$WORK/paper-compiled-model.err" | head -5
step "done"
