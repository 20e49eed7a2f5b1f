#!/usr/bin/env bash
# Issue 53's end-to-end measure: the default study on one lent card from an empty folder, to the end of its first
# look (41 trials), with the card's settings (ARGS). A second call resumes it from the records it sent back: carry
# `resume/` (the previous call's study folder, unpacked) and it continues there. Every 30 s the study's records,
# hypotheses, study file and worker logs go back (no checkpoints), so a call cut at its limit keeps its finished
# trials. Run from the repository root: bash scripts/device/study.sh
source "$(dirname "$0")/common.sh"
STUDY=/tmp/study
[ -d resume ] && cp -r resume "$STUDY"
ARGS=${ARGS:-"--workers 8"}
save() { tar czf "$OUT/study.tgz" -C "$STUDY" --exclude checkpoints --exclude '*.ckpt' --exclude '*.pt' --exclude wandb . 2>/dev/null; }
( while sleep 30; do save; done ) & SAVER=$!
sample card.txt & SAMPLER=$!
step "ablate sweep table3 --preset tiny $ARGS"
start=$(date +%s)
# shellcheck disable=SC2086  # ARGS is a list of options
timeout --signal INT "$(left 560)" ablate sweep table3 --preset tiny $ARGS --out "$STUDY" --no_report \
    >"$WORK/sweep.log" 2>&1
echo "rc=$? after $(( $(date +%s) - start )) s" | tee "$WORK/wall.txt"
kill $SAVER $SAMPLER
tail -30 "$WORK/sweep.log"
ablate status "$STUDY" 2>&1 | tail -8 | tee -a "$WORK/wall.txt"
save; pack
step "done"
