#!/usr/bin/env bash
# Issue 19's host-tier TTFT on the device machine: `dsv4 serve --synthetic-weights PRESET` with a device state that
# holds one long prompt but not two and a host KV pool, driven by tools/bench/tier_ttft.py (A cold, B evicts A, A hit).
# Needs tools/device/stage.sh's .devbin/ (dsv4, tokenizer.json.xz). Results: $OUT/tier_ttft.{log,json}.
#   tools/device/tier_ttft.sh [TOKENS=380000] [PRESET=flash-160] [STATE_BYTES=2147483648] [HOST_GIB=16]
# EVICT_TOKENS / FILLER_TOKENS: the evicting prompts' total and longest length (tier_ttft.py; default one prompt as
# long as A). With STATE_BYTES just above A's state, EVICT_TOKENS of about the device capacity in 8K prompts evicts
# all of A in ~100 s instead of a second cold 380K prefill (~400 s), so the run fits one 600 s device command.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
export LD_LIBRARY_PATH="$PWD/.devbin/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
tokens=${1:-380000} preset=${2:-flash-160} state_bytes=${3:-2147483648} host_gib=${4:-16}
OUT=${OUT:-/tmp/out}
work=/tmp/dsv4-tier-ttft
rm -rf "$work" && mkdir -p "$work" "$OUT"
xz -dc .devbin/tokenizer.json.xz >"$work/tokenizer.json"
.devbin/dsv4 make-model --preset random-v4 --out "$work/bundled" --force --tokenizer "$work/tokenizer.json" >/dev/null
# shellcheck source=serve_lib.sh
source tools/device/serve_lib.sh
start_device_server "$OUT/tier_server.log" --model "$work/bundled" --synthetic-weights "$preset" --device cuda \
  --numerics fast --max-num-seqs 2 --max-model-len $((tokens + 1024)) --kv-cache-memory-bytes "$state_bytes" \
  --host-kv-cache-gib "$host_gib" --max-request-bytes 67108864
port=$PORT
grep -h "capacity plan" "$OUT/tier_server.log" || true
python3 tools/bench/tier_ttft.py --port "$port" --tokens "$tokens" --evict-tokens "${EVICT_TOKENS:-0}" \
  --filler-tokens "${FILLER_TOKENS:-0}" --json "$OUT/tier_ttft.json"
