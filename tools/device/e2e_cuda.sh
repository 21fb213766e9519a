#!/usr/bin/env bash
# The server e2e suites against `dsv4 serve --device cuda` on the bundled model, on the device machine. Needs
# tools/device/stage.sh and tools/device/stage_e2e.sh to have been run here (binaries, node, openai SDK, curl,
# tokenizer under .devbin/). Usage: tools/device/e2e_cuda.sh [suite...]  (default: openai_sdk http_status concurrency)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
repo=$PWD
work=${E2E_CUDA_WORK:-/tmp/dsv4-e2e-cuda}
rm -rf "$work" && mkdir -p "$work/bin"
xz -dc .devbin/e2e/node.xz >"$work/bin/node" && chmod +x "$work/bin/node"
cp .devbin/e2e/curl "$work/bin/curl"
tar xJf .devbin/e2e/node_modules.tar.xz -C tests/node
xz -dc .devbin/e2e/tokenizer.json.xz >"$work/tokenizer.json"
export PATH="$work/bin:$PATH"
export LD_LIBRARY_PATH="$repo/.devbin/lib:$repo/.devbin/e2e/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
node --version && curl --version | head -n 1
# E2E_MODEL: serve this model instead of a fresh random-v4 one; E2E_EXTRA_FLAGS: more `dsv4 serve` flags (e.g. the
# speculative suite: E2E_MODEL=models/demo E2E_EXTRA_FLAGS='--speculative-config={...}' ... concurrency).
if [[ -n ${E2E_MODEL:-} ]]; then
  export DSV4_BUNDLED_MODEL=$repo/$E2E_MODEL
else
  .devbin/dsv4 make-model --preset random-v4 --out "$work/bundled" --force --tokenizer "$work/tokenizer.json" >/dev/null
  export DSV4_BUNDLED_MODEL="$work/bundled"
fi
# exact: the concurrency suite compares streams bitwise
export DSV4_E2E_SERVE_FLAGS="--device cuda --numerics exact ${E2E_EXTRA_FLAGS:-}"
export DSV4_E2E_STREAMS=64 DSV4_E2E_TOKENS=24  # the full concurrency run (CI's CPU engine runs 16 streams)
suites=("$@")
[[ ${#suites[@]} -gt 0 ]] || suites=(openai_sdk http_status concurrency)
for suite in "${suites[@]}"; do
  bash tests/e2e/server/run_suite.sh "$suite" engine "$repo/.devbin/dsv4" "$work/tokenizer.json" "$work/$suite"
done
