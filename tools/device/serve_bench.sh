#!/usr/bin/env bash
# Serving benchmark on the device machine: `dsv4 serve --synthetic-weights PRESET --device cuda` (a full-size model
# made in GPU memory; the bundled model directory provides the tokenizer and chat template) loaded by
# `dsv4 bench serve` with the seeds' protocol: distinct ~400-word chat prompts, streaming, temperature 1.0, top_p 0.95;
# C1/C2/C4/C8 with 512 output tokens, C64 with 256. One round of requests per level (device time is scarce).
# Needs tools/device/stage.sh (binaries and tokenizer.json.xz in .devbin/). Results: $OUT/serve_*.json.
#   tools/device/serve_bench.sh [PRESET=flash-160] [LEVELS="1 2 4 8 64"]
# SPEC_CONFIG: a --speculative-config for the server, e.g. issue 17's C64 oracle point:
#   SPEC_CONFIG='{"method":"mtp","num_speculative_tokens":3,"oracle_acceptance_length":3}'
# SERVER_FLAGS: more server flags, e.g. SERVER_FLAGS="--max-num-batched-tokens 8192 --long-prefill-token-threshold 8192".
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
export LD_LIBRARY_PATH="$PWD/.devbin/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
preset=${1:-flash-160}
levels=${2:-"1 2 4 8 64"}
OUT=${OUT:-/tmp/out}
work=${SERVE_BENCH_WORK:-/tmp/dsv4-serve-bench}
rm -rf "$work" && mkdir -p "$work" "$OUT"
xz -dc .devbin/tokenizer.json.xz >"$work/tokenizer.json"
.devbin/dsv4 make-model --preset random-v4 --out "$work/bundled" --force --tokenizer "$work/tokenizer.json" >/dev/null

# SERVE_BENCH_MODEL overrides the model flags (e.g. "--device cpu" to try this script on the bundled model here).
# shellcheck source=serve_lib.sh
source tools/device/serve_lib.sh
spec_flags=()
[[ -n ${SPEC_CONFIG:-} ]] && spec_flags=(--speculative-config "$SPEC_CONFIG")
# shellcheck disable=SC2086
start_device_server "$OUT/serve_server.log" --model "$work/bundled" \
  ${SERVE_BENCH_MODEL:---synthetic-weights $preset --device cuda --numerics fast} --max-num-seqs 64 --quiet \
  "${spec_flags[@]}" ${SERVER_FLAGS:-}
port=$PORT
echo "server ready on port $port"

for c in $levels; do
  output_len=512
  [[ $c -ge 64 ]] && output_len=256
  prompts=$((c < 2 ? 2 : c))
  .devbin/dsv4 bench serve --port "$port" --endpoint chat --input-len "${INPUT_LEN:-400}" \
    --output-len "${OUTPUT_LEN:-$output_len}" \
    --concurrency "$c" --num-prompts "$prompts" --temperature 1.0 --top-p 0.95 --json "$OUT/serve_c$c.json"
done

if [[ ${QUEUED_TTFT:-0} == 1 ]]; then
  python3 tools/bench/queued_ttft.py --port "$port" --long-tokens "${LONG_TOKENS:-52000}" --json "$OUT/queued_ttft.json"
fi
