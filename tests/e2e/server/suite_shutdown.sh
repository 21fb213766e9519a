# SIGTERM drain (running streams finish), --shutdown-timeout (the rest are aborted), a second signal, a signal while
# loading, and client disconnects. FakeEngine only: it gives exact control over how long generation takes.
[[ $E2E_MODE == fake ]] || skip "the shutdown suite runs on the FakeEngine only"
json=(-H "Content-Type: application/json")

# stream_in_background FILE MAX_TOKENS: starts a streamed completion; sets STREAM_PID.
stream_in_background() {
  curl -s -N "${json[@]}" -d "{\"prompt\":\"go\",\"max_tokens\":$2,\"stream\":true}" "$BASE_URL/v1/completions" >"$1" &
  STREAM_PID=$!
  for _ in $(seq 1 200); do
    grep -q '"text"' "$1" 2>/dev/null && return 0
    sleep 0.02
  done
  fail "the stream did not start"
}

wait_exit() {  # wait_exit EXPECTED_STATUS
  local status=0
  wait "$SERVER_PID" || status=$?
  check_log_clean
  [[ $status == "$1" ]] || fail "server exit status $status, expected $1"
}

# 1. Drain: the running stream completes normally; new requests get 503 meanwhile; exit 0.
start_server --fake-step-us 20000 --shutdown-timeout 30
stream_in_background "$E2E_WORK/drain" 40
kill -TERM "$SERVER_PID"
sleep 0.2
expect_code 503 GET /health
expect_body '"code":"draining"'
expect_code 503 POST /v1/completions "${json[@]}" -d '{"prompt":"late"}'
expect_header Retry-After "[0-9]+"
wait "$STREAM_PID"
grep -q '"finish_reason":"length"' "$E2E_WORK/drain" || fail "the drained stream did not finish normally"
grep -q '^data: \[DONE\]' "$E2E_WORK/drain" || fail "the drained stream has no [DONE]"
wait_exit 0
grep -q "stopped after" "$SERVER_LOG" || fail "no shutdown log line"
curl -s -o /dev/null "$BASE_URL/health" && fail "the server still answers after exiting"

# 2. --shutdown-timeout: what is still running after it is aborted (finish_reason abort), then exit 0 promptly.
start_server --fake-step-us 20000 --shutdown-timeout 0.5
stream_in_background "$E2E_WORK/abort" 3000
started=$(date +%s%N)
kill -TERM "$SERVER_PID"
wait "$STREAM_PID"
wait_exit 0
elapsed_ms=$((($(date +%s%N) - started) / 1000000))
((elapsed_ms < 4000)) || fail "shutdown took $elapsed_ms ms with --shutdown-timeout 0.5"
grep -q '"finish_reason":"abort"' "$E2E_WORK/abort" || fail "the outliving stream was not aborted: $(tail -c 300 "$E2E_WORK/abort")"
grep -q '^data: \[DONE\]' "$E2E_WORK/abort" || fail "the aborted stream has no [DONE]"

# 3. A second signal exits at once with status 1.
start_server --fake-step-us 20000 --shutdown-timeout 60
stream_in_background "$E2E_WORK/second" 3000
kill -TERM "$SERVER_PID"
sleep 0.2
kill -INT "$SERVER_PID"
wait_exit 1
wait "$STREAM_PID" || true

# 4. A signal while the model loads exits 0 right away.
start_server --no-wait --fake-load-ms 20000
kill -TERM "$SERVER_PID"
started=$(date +%s%N)
wait_exit 0
(( ($(date +%s%N) - started) / 1000000 < 3000 )) || fail "exit while loading was slow"

# 5. Clients that disconnect (mid-stream, and before the first token) free their requests at once.
start_server --fake-step-us 20000 --fake-first-token-ms 0
curl -s -N --max-time 0.3 "${json[@]}" -d '{"prompt":"go","max_tokens":3000,"stream":true}' \
  "$BASE_URL/v1/completions" >/dev/null || true
curl -s --max-time 0.3 "${json[@]}" -d '{"prompt":"go","max_tokens":3000}' "$BASE_URL/v1/completions" >/dev/null || true
for _ in $(seq 1 100); do
  metrics=$(curl -s "$BASE_URL/metrics")
  grep -q '^dsv4:client_disconnects_total{model_name="dsv4-e2e"} 2' <<<"$metrics" &&
    grep -q '^vllm:num_requests_running{model_name="dsv4-e2e"} 0' <<<"$metrics" && break
  sleep 0.05
done
grep -q '^dsv4:client_disconnects_total{model_name="dsv4-e2e"} 2' <<<"$metrics" || fail "disconnects not counted: $(grep -E "disconnect|running|success" <<<"$metrics")"
grep -q '^vllm:num_requests_running{model_name="dsv4-e2e"} 0' <<<"$metrics" || fail "aborted requests still running"
grep -q '^vllm:num_requests_waiting{model_name="dsv4-e2e"} 0' <<<"$metrics" || fail "aborted requests still waiting"
stop_server 0
