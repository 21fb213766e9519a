# curl-level checks of status codes and headers, then the malformed-request battery (malformed.test.js).
API_KEY=status-key
fake_flags=()
[[ $E2E_MODE == fake ]] && fake_flags=(--fake-step-us 500)
start_server --api-key "$API_KEY" --public-health --max-request-bytes 65536 --max-model-len 256 "${fake_flags[@]}"
auth=(-H "Authorization: Bearer $API_KEY")
json=(-H "Content-Type: application/json")
chat='{"messages":[{"role":"user","content":"hi"}],"max_tokens":3}'

expect_code 200 GET /health                                  # public
expect_header Content-Type "application/json"
expect_code 401 GET /metrics                                 # not public
expect_header WWW-Authenticate "Bearer"
expect_body '"type":"authentication_error"'
expect_code 200 GET /metrics "${auth[@]}"
expect_header Content-Type "text/plain; version=0.0.4"
expect_body '^vllm:num_requests_running\{model_name="dsv4-e2e"\} 0'
expect_code 401 POST /v1/chat/completions "${json[@]}" -d "$chat"
expect_code 401 POST /v1/chat/completions "${json[@]}" -H "Authorization: Bearer wrong" -d "$chat"
expect_code 200 POST /v1/chat/completions "${json[@]}" -H "X-Api-Key: $API_KEY" -d "$chat"
expect_code 200 POST /v1/chat/completions "${json[@]}" "${auth[@]}" -d "$chat"
expect_header X-Request-Id "chatcmpl-[0-9a-f]{32}"
expect_body '"object":"chat.completion"'
expect_code 200 GET /v1/models "${auth[@]}"
expect_body '"id":"dsv4-e2e"'
expect_code 200 GET /version "${auth[@]}"

# Streaming: SSE headers, chunks, [DONE] last.
expect_code 200 POST /v1/chat/completions "${json[@]}" "${auth[@]}" \
  -d '{"messages":[{"role":"user","content":"hi"}],"max_tokens":3,"stream":true}'
expect_header Content-Type "text/event-stream"
expect_header Cache-Control "no-cache"
expect_header X-Accel-Buffering "no"
[[ $(tail -c 14 "$E2E_WORK/last_body") == $'data: [DONE]\n\n' || $(tail -n 2 "$E2E_WORK/last_body" | head -n 1) == "data: [DONE]" ]] ||
  fail "the stream does not end with data: [DONE]"

# Bad input.
expect_code 400 POST /v1/chat/completions "${json[@]}" "${auth[@]}" -d '{"messages": ['
expect_body '"type":"invalid_request_error"'
expect_code 400 POST /v1/chat/completions "${json[@]}" "${auth[@]}" \
  -d '{"messages":[{"role":"user","content":"hi"}],"top_k":"many"}'
expect_body '"param":"top_k"'
expect_code 400 POST /v1/completions "${json[@]}" "${auth[@]}" -d '{"prompt":"hi","max_tokens":1000}'
expect_body '"param":"max_tokens"'
expect_body 'maximum context length is 256'
expect_code 404 POST /v1/chat/completions "${json[@]}" "${auth[@]}" \
  -d '{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}'
expect_body '"code":"model_not_found"'
expect_code 404 GET /v1/engines "${auth[@]}"
expect_body '"type":"not_found_error"'
expect_code 405 GET /v1/chat/completions "${auth[@]}"
big=$(head -c 70000 /dev/zero | tr '\0' 'a')
expect_code 413 POST /v1/completions "${json[@]}" "${auth[@]}" --data-binary "{\"prompt\":\"$big\"}"
expect_body '"code":"request_too_large"'

# Issue 22's faults as a user meets them. `curl -d @file` sends application/x-www-form-urlencoded: bodies over 8 KB
# got a false 413 claiming an 8 MiB limit.
{ printf '{"prompt":"hi","max_tokens":2,"pad":"'; head -c 20000 /dev/zero | tr '\0' 'p'; printf '"}'; } >"$E2E_WORK/form.json"
expect_code 200 POST /v1/completions "${auth[@]}" -d @"$E2E_WORK/form.json"
expect_body '"object":"text_completion"'
expect_code 413 POST /v1/completions "${auth[@]}" --data-binary @<(head -c 70000 /dev/zero | tr '\0' ' ')
expect_body '70000 bytes'
expect_body '65536 bytes'
expect_code 405 PUT /v1/chat/completions "${json[@]}" "${auth[@]}" -d "$chat"
expect_header Allow "POST"
expect_code 200 POST /v1/chat/completions "${json[@]}" "${auth[@]}" -H "X-Request-Id: e2e-trace-1" -d "$chat"
expect_header X-Request-Id "e2e-trace-1"
expect_body '"id":"chatcmpl-e2e-trace-1"'
expect_code 200 GET /metrics "${auth[@]}"
expect_body 'dsv4:requests_rejected_total\{model_name="dsv4-e2e",reason="unauthorized"\} [1-9]'
expect_body 'dsv4:requests_rejected_total\{model_name="dsv4-e2e",reason="too_large"\} [1-9]'

run_node "$E2E_DIR/malformed.test.js"
expect_code 200 GET /health
stop_server 0

# --max-num-queued-reqs counts only requests beyond the free sequence slots: 3 concurrent requests on an idle server
# with 4 slots and a queue of 1 all succeed (the fault answered 429 429 200), three times in a row.
start_server --max-num-seqs 4 --max-num-queued-reqs 1 "${fake_flags[@]}"
for round in 1 2 3; do
  pids=()
  for i in 1 2 3; do
    curl -s -o /dev/null -w '%{http_code}' "${json[@]}" -d '{"prompt":"q","max_tokens":8}' "$BASE_URL/v1/completions" \
      >"$E2E_WORK/queued-$round-$i" &
    pids+=($!)
  done
  wait "${pids[@]}"
  codes=$(cat "$E2E_WORK"/queued-"$round"-*)
  [[ $codes == 200200200 ]] || fail "round $round of 3 concurrent requests with 4 free slots: $codes"
done
stop_server 0

if [[ $E2E_MODE == fake ]]; then
  # Overload: two slow streams hold the only two generation slots; the third request gets 429 + Retry-After.
  start_server --max-concurrent-requests 2 --http-threads 8 --fake-step-us 20000
  holders=()
  for i in 1 2; do
    curl -s -N "${json[@]}" -d '{"prompt":"hold","max_tokens":100,"stream":true}' "$BASE_URL/v1/completions" \
      >"$E2E_WORK/hold$i" &
    holders+=($!)
  done
  for _ in $(seq 1 100); do
    curl -s "$BASE_URL/metrics" | grep -q '^dsv4:requests_in_flight{model_name="dsv4-e2e"} 2' && break
    sleep 0.05
  done
  expect_code 429 POST /v1/completions "${json[@]}" -d '{"prompt":"one more","max_tokens":2}'
  expect_header Retry-After "[0-9]+"
  expect_body '"type":"rate_limit_error"'
  expect_code 200 GET /health                               # health still answers under load
  wait "${holders[@]}"
  grep -q '"finish_reason":"length"' "$E2E_WORK/hold1" || fail "a held stream did not complete"
  stop_server 0

  # Loading: /health and model routes answer 503 + Retry-After until the model is ready.
  start_server --no-wait --fake-load-ms 2500
  expect_code 503 GET /health
  expect_header Retry-After "[0-9]+"
  expect_body '"message":"Loading model"'
  expect_code 503 POST /v1/chat/completions "${json[@]}" -d "$chat"
  # Wait on the clock, not a count: under a loaded CI machine the 2.5 s fake load can take several times longer.
  ready_deadline=$((SECONDS + 60))
  while ((SECONDS < ready_deadline)); do
    [[ $(http_code GET /health) == 200 ]] && break
    sleep 0.1
  done
  expect_code 200 GET /health
  expect_code 200 POST /v1/chat/completions "${json[@]}" -d "$chat"
  stop_server 0
fi
