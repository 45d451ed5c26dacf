#!/usr/bin/env bash
# On a GPU, from the repository root: draw the wide synthetic set with generator seed SEED
# and train notebook 04's U-Net (the profile's encoder, from ImageNet) on it the way the
# shipped model is trained; the executed notebook goes to OUTDIR and its best checkpoint to
# OUTDIR/wide-seed<SEED>.ckpt.
#   bash tools/train_wide.sh SEED OUTDIR [PROFILE] [IMAGES] [STEPS]
set -euo pipefail
seed="$1"; out="$(realpath -m "$2")"; profile="${3:-gpu}"; images="${4:-2400}"; steps="${5:-3600}"
root="$(realpath -m "${NAILSEG_DATA_DIR:-data}/wide-$images-seed$seed")"
mkdir -p "$out"
python3 -c "from nailseg_common.data.synthetic import ensure_synthetic_dataset as ensure
ensure('$root', $images, seed=$seed, progress=False, style='wide')"
marker="$out/.started-$seed"; touch "$marker"
python3 -m papermill --kernel python3 --cwd notebooks --log-level WARNING \
    notebooks/04_dali_pipeline.ipynb "$out/04_wide_seed$seed.ipynb" -p profile "$profile" \
    -p data_root "$root" -p max_steps "$steps"
best=$(find "${NAILSEG_RUNS_DIR:-runs}/$profile" -name 'best-*.ckpt' -newer "$marker" | sort | tail -1)
cp "$best" "$out/wide-seed$seed.ckpt"
echo "== wide seed $seed: $best"
