#!/usr/bin/env bash
# One `dsv4 bench offline` command run with two binaries in the same device session, alternated A B A B ... so drift
# (clocks, other tenants) hits both alike; JSON per run to $OUT, and a table of every decode / prefill row last
# (best of the rounds per binary, and B / A).
# Usage: tools/device/ab_bench.sh BIN_A BIN_B ROUNDS bench-offline-args...
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
export LD_LIBRARY_PATH="$PWD/.devbin/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
a=$1 b=$2 rounds=$3
shift 3
for ((r = 0; r < rounds; ++r)); do
    for side in a b; do
        bin=$a && [[ $side == b ]] && bin=$b
        echo "== round $r $side ($bin)"
        "$bin" bench offline "$@" --json "$OUT/ab_${side}_$r.json" >"$OUT/ab_${side}_$r.log" 2>&1 \
            || { echo "run failed:"; tail -5 "$OUT/ab_${side}_$r.log"; }
    done
done
python3 - "$OUT" "$rounds" <<'PY'
import json, sys, glob
out, rounds = sys.argv[1], int(sys.argv[2])
def rows(side):
    best = {}
    for path in glob.glob(f"{out}/ab_{side}_*.json"):
        j = json.load(open(path))
        for d in j.get("decode", []):
            k = ("decode", d["batch"], d["context"])
            best[k] = max(best.get(k, 0), d["tok_per_s"])
        for p in j.get("prefill", []):
            k = ("prefill", p["prompt"], p["chunk"])
            best[k] = max(best.get(k, 0), p["tok_per_s"])
    return best
A, B = rows("a"), rows("b")
print(f"{'row':32} {'A tok/s':>10} {'B tok/s':>10} {'B/A':>7}")
for k in sorted(set(A) | set(B)):
    a, b = A.get(k, 0), B.get(k, 0)
    print(f"{' '.join(map(str, k)):32} {a:10.1f} {b:10.1f} {b / a if a else 0:7.3f}")
PY
