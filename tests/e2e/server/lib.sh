# Shared helpers for the e2e server suites (sourced by run_suite.sh and the suite scripts).
# Expects: E2E_MODE (fake|engine), E2E_SERVER (binary), E2E_TOKENIZER, E2E_WORK, E2E_REPO.
# Optional: DSV4_BUNDLED_MODEL (engine mode: the model to serve), DSV4_E2E_SERVE_FLAGS (extra `dsv4 serve` flags).

# Exit 77 (CTest "skipped") with a reason, except under CI, where a missing prerequisite is a failure.
skip() {
  if [[ -n ${CI:-} ]]; then
    echo "e2e: cannot run under CI: $*" >&2
    exit 1
  fi
  echo "SKIPPED: $*"
  exit 77
}

fail() {
  echo "e2e FAILED: $*" >&2
  if [[ -n ${SERVER_LOG:-} && -f $SERVER_LOG ]]; then
    echo "--- server log (tail) ---" >&2
    tail -n 40 "$SERVER_LOG" >&2
  fi
  exit 1
}

# The model directory for the mode: a tokenizer-only directory for the fake, the bundled model for the engine.
prepare_model_dir() {
  if [[ $E2E_MODE == fake ]]; then
    [[ -f $E2E_TOKENIZER ]] || skip "the V4 tokenizer.json is missing ($E2E_TOKENIZER): run scripts/install-deps.sh"
    MODEL_DIR=$E2E_WORK/model
    mkdir -p "$MODEL_DIR"
    ln -sf "$E2E_TOKENIZER" "$MODEL_DIR/tokenizer.json"
    echo '{}' >"$MODEL_DIR/config.json"
  else
    MODEL_DIR=${DSV4_BUNDLED_MODEL:-$E2E_REPO/models/bundled}
    if [[ ! -f $MODEL_DIR/model.safetensors.index.json || ! -f $MODEL_DIR/tokenizer.json ]]; then
      # No bundled model in the checkout: make one in the build tree (seconds), once for all suites. Suites run in
      # parallel, so the check happens under the lock (a half-written model must never be served).
      [[ -f $E2E_TOKENIZER ]] || skip "the V4 tokenizer.json is missing ($E2E_TOKENIZER): run scripts/install-deps.sh"
      MODEL_DIR=$(dirname "$E2E_WORK")/bundled_model
      (
        flock 9
        if [[ ! -f $MODEL_DIR/model.safetensors.index.json || ! -f $MODEL_DIR/tokenizer.json ]]; then
          "$E2E_SERVER" make-model --preset random-v4 --out "$MODEL_DIR" --force --tokenizer "$E2E_TOKENIZER" \
            >"$E2E_WORK/make-model.log" 2>&1 || fail "dsv4 make-model --preset random-v4 failed: $(tail -n 3 "$E2E_WORK/make-model.log")"
        fi
      ) 9>"$(dirname "$E2E_WORK")/bundled_model.lock"
    fi
  fi
}

# start_server [extra flags...]: starts the server on a free port, waits until /health is 200 (or until `--no-wait`
# is the first argument: only until it listens). Sets SERVER_PID, SERVER_LOG, BASE_URL, PORT.
start_server() {
  local wait_ready=1
  if [[ ${1:-} == --no-wait ]]; then
    wait_ready=0
    shift
  fi
  SERVER_LOG=$E2E_WORK/server-$((++SERVER_COUNT)).log
  # The background command's redirection happens in the child, after the fork: created here, the log exists before
  # the first read below (a loaded machine once ran that sed first: "can't read server-1.log", exit under set -e).
  : >"$SERVER_LOG"
  local args=(--model "$MODEL_DIR" --port 0 --served-model-name dsv4-e2e)
  if [[ $E2E_MODE == engine ]]; then
    # DSV4_E2E_SERVE_FLAGS: extra engine flags, e.g. "--device cuda --numerics exact" (tools/device/e2e_cuda.sh).
    # shellcheck disable=SC2086
    "$E2E_SERVER" serve "${args[@]}" ${DSV4_E2E_SERVE_FLAGS:-} "$@" >"$SERVER_LOG" 2>&1 &
  else
    "$E2E_SERVER" "${args[@]}" "$@" >"$SERVER_LOG" 2>&1 &
  fi
  SERVER_PID=$!
  PORT=""
  for _ in $(seq 1 600); do
    PORT=$(sed -n 's|.*listening on http://[^:]*:\([0-9]*\).*|\1|p' "$SERVER_LOG" | head -n 1)
    [[ -n $PORT ]] && break
    if ! kill -0 "$SERVER_PID" 2>/dev/null; then
      grep -q "no engine module" "$SERVER_LOG" && skip "this build of dsv4 has no engine yet"
      fail "the server exited before listening"
    fi
    sleep 0.1
  done
  [[ -n $PORT ]] || fail "the server did not start listening"
  BASE_URL=http://127.0.0.1:$PORT
  if ((wait_ready)); then
    for _ in $(seq 1 3000); do
      [[ $(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer ${API_KEY:-}" "$BASE_URL/health") == 200 ]] && return 0
      kill -0 "$SERVER_PID" 2>/dev/null || fail "the server exited while loading"
      sleep 0.1
    done
    fail "the server did not become ready"
  fi
}

# stop_server [expected-status]: SIGTERM, wait, check the exit status (default 0) and the log for sanitizer reports.
stop_server() {
  local expected=${1:-0}
  kill -TERM "$SERVER_PID" 2>/dev/null || true
  local status=0
  wait "$SERVER_PID" || status=$?
  check_log_clean
  [[ $status == "$expected" ]] || fail "server exit status $status, expected $expected"
}

check_log_clean() {
  if grep -qE "ERROR: (AddressSanitizer|LeakSanitizer)|runtime error:" "$SERVER_LOG"; then
    fail "sanitizer report in $SERVER_LOG"
  fi
}

# http_code METHOD PATH [curl args...]: prints the status code.
http_code() {
  local method=$1 path=$2
  shift 2
  curl -s -o "$E2E_WORK/last_body" -D "$E2E_WORK/last_headers" -w '%{http_code}' -X "$method" "$BASE_URL$path" "$@"
}

expect_code() {
  local want=$1
  shift
  local got
  got=$(http_code "$@")
  [[ $got == "$want" ]] || fail "$* -> HTTP $got, expected $want: $(head -c 300 "$E2E_WORK/last_body")"
}

# expect_header NAME VALUE-REGEX (on the last response)
expect_header() {
  grep -qiE "^$1: $2" "$E2E_WORK/last_headers" || fail "header $1 ~ '$2' missing: $(cat "$E2E_WORK/last_headers")"
}

expect_body() {
  grep -qE -- "$1" "$E2E_WORK/last_body" || fail "body does not match '$1': $(head -c 300 "$E2E_WORK/last_body")"
}

run_node() {
  command -v node >/dev/null || skip "node is not installed"
  [[ -d $E2E_REPO/tests/node/node_modules/openai ]] ||
    skip "tests/node/node_modules is absent (scripts/install-deps.sh installs the npm packages)"
  NODE_PATH=$E2E_REPO/tests/node/node_modules DSV4_BASE_URL=$BASE_URL DSV4_MODE=$E2E_MODE \
    DSV4_API_KEY=${API_KEY:-none} DSV4_MODEL=dsv4-e2e node --test "$@" || fail "node tests $* failed"
}
