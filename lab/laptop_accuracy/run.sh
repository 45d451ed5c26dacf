#!/usr/bin/env bash
# Notebook 02 in the cpu profile at other sides and lengths, one run each, on this machine.
# Run from the repository root: bash lab/laptop_accuracy/run.sh OUTDIR
set -euo pipefail
out="${1:-/tmp/laptop_accuracy}"; mkdir -p "$out"
for run in "160 240" "192 240" "192 160"; do
  set -- $run
  NO_ALBUMENTATIONS_UPDATE=1 .venv/bin/python -m papermill --kernel python3 --cwd notebooks \
      notebooks/02_lightning_baseline.ipynb "$out/02_${1}px_${2}steps.ipynb" \
      -p profile cpu -p image_size "$1" -p max_steps "$2"
done
