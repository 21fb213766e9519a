#!/usr/bin/env bash
# CTest driver: run_suite.sh SUITE MODE SERVER_BINARY TOKENIZER_JSON WORK_DIR
#   SUITE  openai_sdk | http_status | concurrency | shutdown | caddy | webui | bench_serve  (suite_<SUITE>.sh next to this file)
#   MODE   fake (dsv4_fake_serve: FakeEngine behind the real HTTP layer) | engine (`dsv4 serve`, bundled model)
set -euo pipefail
E2E_SUITE=$1 E2E_MODE=$2 E2E_SERVER=$3 E2E_TOKENIZER=$4 E2E_WORK=$5
E2E_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
E2E_REPO=$(cd "$E2E_DIR/../../.." && pwd)
SERVER_COUNT=0
SERVER_PID=""
rm -rf "$E2E_WORK"
mkdir -p "$E2E_WORK"
# shellcheck source=lib.sh
source "$E2E_DIR/lib.sh"
command -v curl >/dev/null || skip "curl is not installed"
cleanup() {
  if [[ -n $SERVER_PID ]] && kill -0 "$SERVER_PID" 2>/dev/null; then kill -KILL "$SERVER_PID" 2>/dev/null || true; fi
  if [[ -n ${CADDY_PID:-} ]] && kill -0 "$CADDY_PID" 2>/dev/null; then kill -TERM "$CADDY_PID" 2>/dev/null || true; fi
}
trap cleanup EXIT
prepare_model_dir
# shellcheck source=/dev/null
source "$E2E_DIR/suite_${E2E_SUITE}.sh"
echo "e2e $E2E_SUITE ($E2E_MODE): passed"
