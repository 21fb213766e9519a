#!/usr/bin/env bash
# Session 2026-12-03 (sixth), call 4: latency fixes (batched loads in attention / indexer / codec / argmax, route in
# registers): golden, offline decode new / old alternated, per-op profile at batch 1, the op suites of the changed kernels.
set -u
cd "$(dirname "$0")/.."
tar xJf .devpack/devbin.tar.xz
export LD_LIBRARY_PATH="$PWD/.devbin/lib"
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT/r"
s=$SECONDS
timeout 60 .devbin/golden_cuda >"$OUT/r/golden.log" 2>&1
echo "golden rc=$? $((SECONDS-s))s"; grep -E "^\[  FAILED|PASSED" "$OUT/r/golden.log" | head -10
run() {  # name binary
  local name=$1 bin=$2
  timeout 70 $bin bench offline --preset flash-160 --numerics fast --batch 1,8,64 \
    --context 1000 --prefill 0 --steps 4 --json "$OUT/r/off_$name.json" >"$OUT/r/off_$name.log" 2>&1
  echo "offline $name rc=$?"
}
s=$SECONDS
run new_0 .devbin/dsv4; run old_0 .devbin/dsv4_old; run new_1 .devbin/dsv4; run old_1 .devbin/dsv4_old
echo "offline $((SECONDS-s))s"
python3 - "$OUT/r" <<'PY'
import json, sys, glob, os
rows = {}
for f in sorted(glob.glob(sys.argv[1] + "/off_*.json")):
    name = os.path.basename(f)[4:-5]; base = name.rsplit("_", 1)[0]
    j = json.load(open(f))
    for d in j["decode"]:
        k = (base, d["batch"]); rows.setdefault(k, []).append((d["tok_per_s"], d["nodes_per_layer"], d["breakdown_ms"], d["step_ms"]))
print(f"{'mode':8} {'B':>3} {'best tok/s':>10} {'ms':>7} {'runs':>14} {'nodes/l':>8}  breakdown (best run)")
for (m, b), v in sorted(rows.items(), key=lambda kv: (kv[0][1], kv[0][0])):
    best = max(v, key=lambda t: t[0])
    print(f"{m:8} {b:3d} {best[0]:10.1f} {best[3]:7.2f} {' '.join(f'{t[0]:.1f}' for t in v):>14} {best[1]:8.1f}  " + " ".join(f"{k}={x:.2f}" for k, x in best[2].items()))
PY
DSV4_PROFILE_OPS=1 timeout 60 .devbin/dsv4 bench offline --preset flash-160 --numerics fast --batch 1 \
    --context 1000 --prefill 0 --steps 2 --json "$OUT/r/prof_1.json" >"$OUT/r/prof_1.log" 2>&1
echo "prof rc=$?"
python3 - "$OUT/r/prof_1.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
for dec in d["decode"]:
    bd = dec["breakdown_ms"]
    print("batch", dec["batch"], " ".join(f"{k}={1000*v/43:.1f}" for k, v in sorted(bd.items(), key=lambda kv: -kv[1])[:16]), "(us/layer)")
PY
s=$SECONDS
timeout 200 .devbin/ops_cuda --gtest_filter='CudaOps.*:CudaState.*:CudaTopk.*:CudaArgmax.*:CudaFusedOps.*:CudaFp8Dialect.*:CudaMoeDecodeErrors.*:CudaSampleRows.*' >"$OUT/r/ops.log" 2>&1
echo "ops rc=$? $((SECONDS-s))s"; grep -E "^\[  FAILED|PASSED|tests ran" "$OUT/r/ops.log" | head -20
grep -B2 -A8 "Failure" "$OUT/r/ops.log" | head -40
tar czf "$OUT/results.tgz" -C "$OUT" r && rm -rf "$OUT/r"
