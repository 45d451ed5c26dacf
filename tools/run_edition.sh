#!/usr/bin/env bash
# Execute course notebooks one after the other in the `gpu` profile with the profile's
# defaults (the published edition), each into OUTDIR/<name>.ipynb, and append its papermill
# wall time to OUTDIR/timings.tsv. Used on the lent GPU machines:
#   bash tools/run_edition.sh OUTDIR 01 02 03
# Set a fresh machine up first, outside the timings: its packages compiled to bytecode, as pip
# does when it installs (the lent image ships torch without it, and its Python writes none):
#   python3 -m compileall -q -j 16 /root/gpu-site "$(python3 -c 'import torch, pathlib; print(pathlib.Path(torch.__file__).parents[1])')"
set -uo pipefail
out="$1"; shift
mkdir -p "$out"
for number in "$@"; do
  source=$(ls notebooks/"$number"_*.ipynb)
  name=$(basename "$source")
  start=$(date +%s.%N)
  python3 -m papermill --kernel python3 --cwd notebooks --log-level WARNING \
      "$source" "$out/$name" -p profile gpu
  status=$?
  seconds=$(python3 -c "print(f'{$(date +%s.%N) - $start:.1f}')")
  printf '%s\t%s\t%s\t%s\n' "$name" "$seconds" "$status" "$(date -u +%FT%TZ)" >> "$out/timings.tsv"
  echo "== $name: $seconds s, exit $status"
done
