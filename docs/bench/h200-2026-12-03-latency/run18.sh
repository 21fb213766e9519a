#!/usr/bin/env bash
# Session 2026-12-03 (sixth), call 5: the session's head: golden, offline decode (new, new with merged linears,
# old = aed504e) alternated, kernel rows, per-op profile, the whole op suite, then the FP4 expert kernel's SASS and
# an ncu look at it (for the next session).
set -u
cd "$(dirname "$0")/.."
tar xJf .devpack/devbin.tar.xz
export LD_LIBRARY_PATH="$PWD/.devbin/lib"
OUT=${OUT:-/tmp/out}; R="$OUT/r"; mkdir -p "$R"
s=$SECONDS
timeout 60 .devbin/golden_cuda >"$R/golden.log" 2>&1
echo "golden rc=$? $((SECONDS-s))s"; grep -E "^\[  FAILED|PASSED" "$R/golden.log" | head -10
run() {  # name binary env...
  local name=$1 bin=$2; shift 2
  env "$@" timeout 70 $bin bench offline --preset flash-160 --numerics fast --batch 1,8,64 \
    --context 1000 --prefill 0 --steps 4 --json "$R/off_$name.json" >"$R/off_$name.log" 2>&1
  echo "offline $name rc=$?"
}
s=$SECONDS
run new_0 .devbin/dsv4; run merge_0 .devbin/dsv4 DSV4_MERGE_LINEARS=1; run old_0 .devbin/dsv4_old
run new_1 .devbin/dsv4; run merge_1 .devbin/dsv4 DSV4_MERGE_LINEARS=1; run old_1 .devbin/dsv4_old
echo "offline $((SECONDS-s))s"
python3 - "$R" <<'PY'
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
timeout 40 .devbin/dsv4 bench kernels --rows 1 8 --tokens 1 8 --json "$R/kernels.json" >"$R/kernels.log" 2>&1
echo "kernels rc=$?"
python3 - "$R/kernels.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1])); print("copy TB/s", round(d["copy_tb_per_s"], 3))
for r in d["rows"]:
    if r["path"].startswith("auto") and r["op"].split()[0] in ("wq_a", "wq_b", "wkv", "wo_a", "wo_b", "shared", "indexer", "experts"):
        print(f"{r['op'][:24]:24} {r['path'][:20]:20} m={r['m']:<2} {r['us']:8.1f} us {r['gb_per_s']:7.0f} GB/s")
PY
DSV4_PROFILE_OPS=1 timeout 60 .devbin/dsv4 bench offline --preset flash-160 --numerics fast --batch 1 \
    --context 1000 --prefill 0 --steps 2 --json "$R/prof_1.json" >"$R/prof_1.log" 2>&1
echo "prof rc=$?"
python3 - "$R/prof_1.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
for dec in d["decode"]:
    bd = dec["breakdown_ms"]
    print("batch", dec["batch"], " ".join(f"{k}={1000*v/43:.1f}" for k, v in sorted(bd.items(), key=lambda kv: -kv[1])[:18]), "(us/layer)")
PY
s=$SECONDS
timeout 270 .devbin/ops_cuda >"$R/ops.log" 2>&1
echo "ops rc=$? $((SECONDS-s))s"; grep -E "^\[  FAILED|PASSED|tests ran" "$R/ops.log" | head -20
grep -B2 -A8 "Failure" "$R/ops.log" | head -40
grep -E "^\[ RUN|^\[       OK" "$R/ops.log" | tail -2
/usr/local/cuda/bin/cuobjdump -sass -fun expert_gemv_fp4_kernel .devbin/dsv4 >"$R/fp4.sass" 2>&1
/usr/local/cuda/bin/cuobjdump -sass -fun fp8_gemv_kernel .devbin/dsv4 >"$R/fp8.sass" 2>&1
echo "sass lines: $(wc -l <"$R/fp4.sass") $(wc -l <"$R/fp8.sass")"
timeout 60 /usr/local/cuda/bin/ncu --clock-control none --kernel-name regex:expert_gemv_fp4 --launch-skip 2 \
  --launch-count 2 --section SpeedOfLight --section WarpStateStats --section InstructionStats --section SourceCounters \
  --section MemoryWorkloadAnalysis --csv --page details .devbin/dsv4 bench kernels --rows 1 --tokens 1 --filter experts \
  >"$R/ncu_fp4.csv" 2>"$R/ncu_fp4.err"
echo "ncu rc=$?"
