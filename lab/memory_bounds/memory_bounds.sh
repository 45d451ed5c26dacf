#!/usr/bin/env bash
# Peak memory of the commands that take many photos, on this machine's CPU (cpu profile):
# notebook 06 on a 300-photo stand-in, and nailseg-predict on 1000 photos. GNU time's
# "Maximum resident set size" is the peak of the process (and, for papermill, of its
# largest child, the kernel: see README.md).
#   bash lab/memory_bounds/memory_bounds.sh OUTDIR
set -euo pipefail
out="$(realpath -m "$1")"; mkdir -p "$out"
export NO_ALBUMENTATIONS_UPDATE=1 NAILSEG_DATA_DIR="$out/data" NAILSEG_RUNS_DIR="$out/runs"
/usr/bin/time -v .venv/bin/papermill --kernel python3 --cwd notebooks --log-level WARNING \
    notebooks/06_your_own_photos.ipynb "$out/06_300.ipynb" -p profile cpu -p standin_images 300 \
    2> "$out/06_300.time" > /dev/null
.venv/bin/python -c "from nailseg_common.data.synthetic import ensure_synthetic_dataset as e
e('$out/photos-1000', 1000, seed=7, progress=False, style='wide')"
/usr/bin/time -v .venv/bin/nailseg-predict "$out/photos-1000/Images" "$out/masks-1000" --device cpu \
    2> "$out/predict_1000.time" | tail -2
grep -E "Maximum resident|Elapsed" "$out/06_300.time" "$out/predict_1000.time"
