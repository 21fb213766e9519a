#!/usr/bin/env bash
# Where a decode step's time goes, kernel by kernel: Nsight Compute times every kernel of an eager decode (no graphs,
# clocks left alone) of a truncated flash model, and the table sums them per kernel name per step.
# Usage: tools/device/profile_decode.sh [LAYERS] [BATCH] [extra bench-offline args...]
# Writes $OUT/ncu_decode.csv and prints the table (kernel, launches per step, us per step, share).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
export LD_LIBRARY_PATH="$PWD/.devbin/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
layers=${1:-4} batch=${2:-1}
shift 2 || true
steps=2
ncu=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
"$ncu" --clock-control none --metrics gpu__time_duration.sum --csv --log-file "$OUT/ncu_decode.csv" \
    .devbin/dsv4 bench offline --preset flash --layers "$layers" --numerics fast --batch "$batch" --context 1000 \
    --prefill 0 --steps "$steps" --enforce-eager "$@" >"$OUT/profile_decode.log" 2>&1 || tail -5 "$OUT/profile_decode.log"
python3 - "$OUT/ncu_decode.csv" "$layers" <<'PY'
import csv, sys, collections, re
path, layers = sys.argv[1], int(sys.argv[2])
rows = [r for r in csv.reader(l for l in open(path) if l.startswith('"'))]
head, rows = rows[0], rows[1:]
ni, vi, ui = head.index("Kernel Name"), head.index("Metric Value"), head.index("Metric Unit")
to_us = {"nsecond": 1e-3, "ns": 1e-3, "usecond": 1.0, "us": 1.0, "msecond": 1e3, "ms": 1e3}
def short(name):
    name = name.replace("(anonymous namespace)::", "").replace("void ", "").replace("dsv4::cuda::", "")
    return re.sub(r"\(.*", "", name)
seq = [(short(r[ni]), float(r[vi].replace(",", "")) * to_us[r[ui]]) for r in rows]
# One decode step per embed launch: keep the last complete step.
starts = [i for i, (n, _) in enumerate(seq) if "embed" in n]
last = seq[starts[-2]:starts[-1]] if len(starts) >= 2 else seq
agg = collections.OrderedDict()
for n, us in last:
    c, t = agg.get(n, (0, 0.0))
    agg[n] = (c + 1, t + us)
total = sum(t for _, t in agg.values())
print(f"one eager decode step, {layers} layers: {len(last)} kernels, {total:.1f} us of kernel time "
      f"({total / layers:.1f} us and {len(last) / layers:.1f} kernels per layer)")
for n, (c, t) in sorted(agg.items(), key=lambda kv: -kv[1][1]):
    print(f"{n[:70]:70} {c:4d} {t:9.1f} us {100 * t / total:5.1f}%")
PY
