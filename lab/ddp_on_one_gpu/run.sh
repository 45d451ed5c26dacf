#!/usr/bin/env bash
# On one GPU, from the repository root: notebook 07's recipe through `nailseg-train` (its
# defaults), seeds 0-2, each run plain and then wrapped in DDP (--ddp-on-one-device), with a
# step profile of epoch 3; one results file per run into OUT.
#   bash lab/ddp_on_one_gpu/run.sh OUT && python -m lab.ddp_on_one_gpu.summarise OUT
set -euo pipefail
out="$1"
mkdir -p "$out"
for seed in 0 1 2; do
  for ddp in "" "--ddp-on-one-device"; do
    name="seed${seed}${ddp:+_ddp}"
    python3 -m nailseg_common.commands.train --profile gpu --devices 1 --target-iou 0.86 \
      --profile-epoch 3 --seed "$seed" $ddp --run-name "ddp_on_one_gpu/$name" \
      --out "$out/$name.json" | grep "device(s):"
  done
done
