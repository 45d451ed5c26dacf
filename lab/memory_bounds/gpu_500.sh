#!/usr/bin/env bash
# Peak memory on a GPU machine (gpu profile) with 500 photos: notebook 06 on a 500-photo
# stand-in (every fold, start and learning-curve point), then nailseg-finetune on the same
# photos. GPU memory: nvidia-smi every 0.5 s, one csv per case. Resident memory: the peak of
# the largest waited-for child (getrusage), as GNU time reports it.
#   bash lab/memory_bounds/gpu_500.sh OUTDIR 06|finetune
set -euo pipefail
out="$(realpath -m "$1")"; case="$2"; mkdir -p "$out"
export NO_ALBUMENTATIONS_UPDATE=1 NAILSEG_DATA_DIR="${NAILSEG_DATA_DIR:-$out/data}" \
       NAILSEG_RUNS_DIR="${NAILSEG_RUNS_DIR:-$out/runs}"
peak() {
  python3 -c 'import resource, subprocess, sys, time
start = time.perf_counter(); code = subprocess.run(sys.argv[1:]).returncode
rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 2**20
print(f"exit {code}, {time.perf_counter() - start:.1f} s, peak resident {rss:.2f} GiB")
sys.exit(code)' "$@"
}
nvidia-smi --query-gpu=timestamp,memory.used,memory.total --format=csv,noheader,nounits \
    -lms 500 > "$out/gpu_memory_$case.csv" &
smi=$!
trap 'kill $smi' EXIT
if [ "$case" = 06 ]; then
  peak python3 -m papermill --kernel python3 --cwd notebooks --log-level WARNING \
      notebooks/06_your_own_photos.ipynb "$out/06_500.ipynb" -p profile gpu \
      -p standin_images 500 > "$out/06_500.txt" 2>&1 || true
  tail -3 "$out/06_500.txt"
else
  peak python3 -m nailseg_common.commands.fine_tune "$NAILSEG_DATA_DIR/standin-500" \
      "$out/finetune-500" --profile gpu --force > "$out/finetune_500.txt" 2>&1 || true
  tail -8 "$out/finetune_500.txt"
fi
python3 -c "import sys; used = [float(l.split(',')[1]) for l in open(sys.argv[1]) if l.count(',') == 2]
print(f'peak GPU memory: {max(used) / 1024:.2f} GiB of {float(open(sys.argv[1]).readline().split(\",\")[2]) / 1024:.0f} GiB ({len(used)} samples)')" \
    "$out/gpu_memory_$case.csv"
