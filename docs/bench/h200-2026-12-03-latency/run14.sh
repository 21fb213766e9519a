#!/usr/bin/env bash
# Session 2026-12-03 (sixth), call 1: golden on aed504e, per-op profile at batch 1 and 8, tool check.
set -u
cd "$(dirname "$0")/.."
tar xJf .devpack/devbin.tar.xz
export LD_LIBRARY_PATH="$PWD/.devbin/lib"
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT/r"
ls /usr/local/cuda/bin 2>&1 | tr '\n' ' ' | head -c 600; echo
which nsys ncu cuobjdump 2>&1 | head
s=$SECONDS
timeout 60 .devbin/golden_cuda >"$OUT/r/golden.log" 2>&1
echo "golden rc=$? $((SECONDS-s))s"; grep -E "^\[  FAILED|PASSED" "$OUT/r/golden.log" | head -10
for b in 1 8; do
DSV4_PROFILE_OPS=1 timeout 90 .devbin/dsv4 bench offline --preset flash-160 --numerics fast --batch $b \
    --context 1000 --prefill 0 --steps 2 --json "$OUT/r/prof_$b.json" >"$OUT/r/prof_$b.log" 2>&1
echo "prof $b rc=$?"
python3 - "$OUT/r/prof_$b.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
for dec in d["decode"]:
    bd = dec["breakdown_ms"]; tot = sum(bd.values())
    print("batch", dec["batch"], "step_ms", round(dec["step_ms"], 2), "sum", round(tot, 2))
    for k, v in sorted(bd.items(), key=lambda kv: -kv[1])[:40]:
        print(f"  {k:40} {v:7.3f} ms {1000*v/43:7.1f} us/layer")
PY
done
timeout 60 .devbin/dsv4 bench offline --preset flash-160 --numerics fast --batch 1,8 \
    --context 1000 --prefill 0 --steps 4 --json "$OUT/r/off.json" >"$OUT/r/off.log" 2>&1
echo "offline rc=$?"; grep -E "tok/s|batch" "$OUT/r/off.log" | head -8
tar czf "$OUT/results.tgz" -C "$OUT" r && rm -rf "$OUT/r"
