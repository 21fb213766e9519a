# The openai SDK suite (openai_sdk.test.js) against one server.
API_KEY=e2e-key
start_server --api-key "$API_KEY" --max-model-len 4096 $([[ $E2E_MODE == fake ]] && echo "--fake-step-us 500")
run_node "$E2E_DIR/openai_sdk.test.js"
stop_server 0
