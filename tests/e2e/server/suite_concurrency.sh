# 64 concurrent streams, each checked against the same request run alone (concurrency.test.js).
API_KEY=none
if [[ $E2E_MODE == fake ]]; then
  start_server --fake-step-us 2000 --max-num-seqs 64
else
  # The CPU engine on the bundled model (a Debug + sanitizer build in CI): 16 streams of 12 tokens still batch
  # together and keep CI time bounded (each is also run alone afterwards); the 64-stream run against the real engine
  # is the GPU's (tools/device/e2e_cuda.sh), and the fake engine's above.
  export DSV4_E2E_STREAMS=${DSV4_E2E_STREAMS:-16}
  export DSV4_E2E_TOKENS=${DSV4_E2E_TOKENS:-12}
  start_server --max-num-seqs 64 --max-model-len 512
fi
run_node "$E2E_DIR/concurrency.test.js"
if [[ ${DSV4_E2E_SERVE_FLAGS:-} == *--speculative-config* ]]; then
  # The drafter really ran: verify steps were counted, and some drafts were accepted.
  metrics=$(curl -sf "$BASE_URL/metrics") || fail "GET /metrics failed"
  drafts=$(sed -n 's/^vllm:spec_decode_num_drafts_total{[^}]*} \([0-9.e+]*\)$/\1/p' <<<"$metrics" | head -n 1)
  accepted=$(sed -n 's/^vllm:spec_decode_num_accepted_tokens_total{[^}]*} \([0-9.e+]*\)$/\1/p' <<<"$metrics" | head -n 1)
  awk -v d="${drafts:-0}" -v a="${accepted:-0}" 'BEGIN { exit !(d > 0 && a > 0) }' \
    || fail "speculative decoding did not run: ${drafts:-no} verify steps, ${accepted:-no} accepted drafts"
  echo "speculative: $drafts verify steps, $accepted accepted drafts"
fi
stop_server 0
