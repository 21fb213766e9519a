#!/usr/bin/env bash
# Session 2026-12-03 (sixth), call 3: ncu of the decode kernels at batch 1 and 8 (4 layers, eager, clocks free).
set -u
cd "$(dirname "$0")/.."
tar xJf .devpack/devbin.tar.xz
export LD_LIBRARY_PATH="$PWD/.devbin/lib"
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT/r"
NCU=/usr/local/cuda/bin/ncu
for b in 1 8; do
s=$SECONDS
timeout 200 $NCU --clock-control none --section SpeedOfLight --section LaunchStats --section Occupancy \
  --section WarpStateStats --csv --page details --kernel-name-base function \
  --kernel-name regex:'^(?!.*(fill_|expand_block|nvjet|cutlass|gemm_bf16))' --launch-count 500 \
  .devbin/dsv4 bench offline --preset flash-160 --layers 4 --numerics fast --batch $b --context 1000 --prefill 0 \
  --steps 1 --enforce-eager >"$OUT/r/ncu_$b.csv" 2>"$OUT/r/ncu_$b.err"
echo "ncu $b rc=$? $((SECONDS-s))s"; tail -2 "$OUT/r/ncu_$b.err"
python3 .devpack/ncu_summary.py "$OUT/r/ncu_$b.csv" | head -45
done
tar czf "$OUT/results.tgz" -C "$OUT" r && rm -rf "$OUT/r"
