#!/usr/bin/env bash
# What every archive's results read as, written to one folder, for a byte-for-byte comparison before and after a
# change that must not change them (a refactor):
#
#   bash scripts/identity.sh /tmp/before            # on the commit before
#   bash scripts/identity.sh /tmp/after             # on the commit after
#   bash scripts/identity.sh --compare /tmp/before /tmp/after
#
# Per archive under benchmarks/runs/: its report in every format (the HTML page's and the JSON's timestamp taken out, the
# plots left out: their PNG bytes carry matplotlib's metadata), `ablate replay`, `ablate status --json`; and
# `ablate simulate table3 --replicates 200 --seed 1`. Runs `ablate` from the PATH (activate the venv first).
set -euo pipefail
ablate() { ${ABLATE:-command ablate} "$@"; }  # ABLATE="env PYTHONPATH=DIR python -m ablate.ablations.cli": another tree

if [[ "${1:-}" == "--compare" ]]; then
    before=$2 after=$3
    if diff -r "$before" "$after"; then
        echo "identical: $(find "$before" -type f | wc -l) files"
    else
        echo "differs (above)" >&2
        exit 1
    fi
    exit 0
fi

out=${1:?usage: identity.sh OUT_DIR | --compare BEFORE AFTER}
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$out"
for archive in "$root"/benchmarks/runs/*.tar.xz; do
    name=$(basename "$archive" .tar.xz)
    mkdir -p "$work/$name" "$out/$name"
    tar -xJf "$archive" -C "$work/$name"
    dir=$(dirname "$(find "$work/$name" -name study.json | head -1)")
    export OMP_NUM_THREADS=1
    # progress lines (per-sentence scoring, cached after the first run) are the run's, not the report's
    ablate report "$dir" --out "$work/$name/report" --no_plots --quiet 2>&1 | grep -v "scoring the dev translations" \
        > "$out/$name/report.txt" || true
    for f in "$work/$name"/report/*; do
        [[ -f "$f" ]] || continue
        case "$f" in
            *.html) grep -v -E 'generated|[0-9]{4}-[0-9]{2}-[0-9]{2}[ T][0-9]{2}:[0-9]{2}' "$f" > "$out/$name/$(basename "$f")" ;;
            *.png | *.svg) ;;
            *.json) grep -v '"generated_at"' "$f" > "$out/$name/$(basename "$f")" ;;
            *) cp "$f" "$out/$name/" ;;
        esac
    done
    ablate replay "$dir" > "$out/$name/replay.txt" 2>&1 || echo "exit $?" >> "$out/$name/replay.txt"
    ablate status "$dir" --json > "$out/$name/status.json" 2>&1 || echo "exit $?" >> "$out/$name/status.json"
    sed -i "s#$work#WORK#g" "$out/$name"/*
done
ablate simulate table3 --replicates 200 --seed 1 > "$out/simulate.txt" 2>/dev/null
echo "wrote $(find "$out" -type f | wc -l) files to $out"
