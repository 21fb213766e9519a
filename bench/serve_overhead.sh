#!/usr/bin/env bash
# Server overhead per streamed token, measured with the FakeEngine (no model): for each concurrency level a fresh
# dsv4_fake_serve runs and `dsv4 bench serve` loads it. The overhead of one engine event is
#   handoff     engine pushes the event -> the server's request thread pops it   (FakeEngine, printed at shutdown)
#   processing  popped -> its SSE bytes written to the socket                   (dsv4:stream_event_overhead_seconds)
# One event carries one token here. Both are wall-clock and include waiting for a CPU when the machine is busy
# (client, server and engine share it), so the last column is the cost free of scheduling: the server process's
# CPU time (all threads, from /proc/PID/task/*/schedstat) per generated token. Usage (release build recommended):
#   bench/serve_overhead.sh [BUILD_DIR=build/release] [STEP_US=10000] [ENDPOINT=completions] [LEVELS="1 8 64"]
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=$(cd "${1:-$repo/build/release}" && pwd)
step_us=${2:-10000}
endpoint=${3:-completions}
levels=${4:-"1 8 64"}
output_len=${OUTPUT_LEN:-64}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/model"
ln -s "$build/tokenizer/deepseek_v4/tokenizer.json" "$work/model/tokenizer.json"
echo '{}' >"$work/model/config.json"

printf "%-6s %-12s %10s %10s %10s %10s %10s %12s %12s %12s %12s\n" level endpoint tok/s "TTFT p50" "ITL p50" \
  "ITL p99" "TPOT p50" "handoff us" "process us" "total us" "CPU us/tok"
cpu_ns() {  # summed on-CPU time of every thread of process $1
  cat /proc/"$1"/task/*/schedstat 2>/dev/null | awk '{s += $1} END {printf "%.0f", s}'
}
for c in $levels; do
  "$build/dsv4_fake_serve" --model "$work/model" --port 0 --quiet --fake-step-us "$step_us" --max-num-seqs 256 \
    >"$work/server.log" 2>&1 &
  server=$!
  port=""
  for _ in $(seq 1 200); do
    port=$(sed -n 's|.*listening on http://[^:]*:\([0-9]*\).*|\1|p' "$work/server.log" | head -n 1)
    [[ -n $port ]] && curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/health" | grep -q 200 && break
    sleep 0.1
  done
  cpu_before=$(cpu_ns "$server")
  "$build/dsv4" bench serve --port "$port" --concurrency "$c" --endpoint "$endpoint" --input-len 128 \
    --output-len "$output_len" --json "$work/result.json" >"$work/bench.out"
  cpu_after=$(cpu_ns "$server")
  kill -TERM "$server"
  wait "$server" || true
  handoff=$(sed -n 's/.*handed off, mean \([0-9.]*\) us.*/\1/p' "$work/server.log")
  node -e '
    const r = require(process.argv[1]).levels[0];
    const handoff = Number(process.argv[2]);
    const cpuPerToken = Number(process.argv[4]) / 1000 / r.output_tokens;
    const f = (x) => x.toFixed(2);
    console.log([String(r.concurrency).padEnd(6), process.argv[3].padEnd(12), f(r.output_throughput).padStart(10),
      f(r.ttft.median_ms).padStart(10), f(r.itl.median_ms).padStart(10), f(r.itl.p99_ms).padStart(10),
      f(r.tpot.median_ms).padStart(10), f(handoff).padStart(12), f(r.server_overhead_mean_us).padStart(12),
      f(handoff + r.server_overhead_mean_us).padStart(12), f(cpuPerToken).padStart(12)].join(" "));
  ' "$work/result.json" "$handoff" "$endpoint" "$((cpu_after - cpu_before))"
done
