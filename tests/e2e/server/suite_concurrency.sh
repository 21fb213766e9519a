# 64 concurrent streams, each checked against the same request run alone (concurrency.test.js).
API_KEY=none
if [[ $E2E_MODE == fake ]]; then
  start_server --fake-step-us 2000 --max-num-seqs 64
else
  # The CPU engine on the bundled model: fewer tokens keep CI time bounded.
  export DSV4_E2E_TOKENS=${DSV4_E2E_TOKENS:-16}
  start_server --max-num-seqs 64 --max-model-len 512
fi
run_node "$E2E_DIR/concurrency.test.js"
stop_server 0
