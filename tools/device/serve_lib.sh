# Sourced by the device machine's serving scripts (serve_bench.sh, tier_ttft.sh).
# start_device_server LOG ARGS...: starts `.devbin/dsv4 serve ARGS --port 0` with its output in LOG, waits until its
# /health answers, and sets SERVER_PID (stopped when the script exits) and PORT.
start_device_server() {
  local log=$1
  shift
  : >"$log"  # exists before the first read below (the background redirection happens in the child)
  .devbin/dsv4 serve "$@" --port 0 >"$log" 2>&1 &
  SERVER_PID=$!
  trap 'kill -TERM $SERVER_PID 2>/dev/null; wait $SERVER_PID 2>/dev/null || true' EXIT
  PORT=""
  for _ in $(seq 1 600); do
    PORT=$(sed -n 's|.*listening on http://[^:]*:\([0-9]*\).*|\1|p' "$log" | head -n 1)
    if [[ -n $PORT ]] && python3 -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:$PORT/health')" \
         2>/dev/null; then
      break
    fi
    kill -0 "$SERVER_PID" 2>/dev/null || { echo "serve exited:"; tail -20 "$log"; exit 1; }
    sleep 0.5
  done
}
