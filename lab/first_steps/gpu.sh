#!/usr/bin/env bash
# The whole measurement on the lent GPU, after the course's wheels are installed
# (../shared/gpu/README.md), in two calls of the device tool:
#   bash lab/first_steps/gpu.sh OUTDIR steps   # first steps, imports, notebook 02's warm-up
#   bash lab/first_steps/gpu.sh OUTDIR fast    # notebook 07's warm-up (compiles)
set -uo pipefail
out="$1"; part="$2"; mkdir -p "$out"
export PYTHONPATH=/root/gpu-site:$PWD NO_ALBUMENTATIONS_UPDATE=1 PYTHONUNBUFFERED=1 \
       NAILSEG_DATA_DIR=/root/data NAILSEG_RUNS_DIR=/root/runs
lib=$(python3 -c 'import os, torch; print(os.path.join(os.path.dirname(torch.__file__), "lib"))')
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "cudnn", torch.backends.cudnn.version())'
  strings "$lib"/libtorch_cuda.so | grep -E "^TORCH_CUDNN" | sort -u; } > "$out/machine.txt" 2>&1
warm() { TORCHINDUCTOR_CACHE_DIR=/tmp/inductor_$RANDOM TORCH_LOGS=recompiles timeout 240 \
         python3 lab/first_steps/warm_up_time.py "$@" 2>> "$out/warm_up_log.txt" | tail -1 >> "$out/warm_up.jsonl"; }
if [ "$part" = fast ]; then
  warm fast --benchmark 1
  warm fast --benchmark 0
  exit 0
fi
steps() { timeout 150 python3 lab/first_steps/first_steps.py "$@" >> "$out/first_steps.jsonl" 2>> "$out/errors.txt"; }
steps default --benchmark 1
steps default --benchmark 0
steps float32 --benchmark 1
steps native --benchmark 1
steps nchw --benchmark 1
TORCH_CUDNN_V8_API_DISABLED=1 steps default --benchmark 1
{ time python3 -X importtime -c "import nailseg_common, pytorch_lightning, kornia, segmentation_models_pytorch, nvidia.dali, albumentations; import nailseg_common.measure.benchmark"; } 2> "$out/importtime.txt"
warm baseline --benchmark 1
warm baseline --benchmark 0
