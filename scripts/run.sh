#!/usr/bin/env bash
# One command from a fresh Debian machine to a running dsv4: installs what is missing, builds the release binary,
# creates the bundled model when it is missing (models/bundled, git-ignored), and starts the main job.
# Extra arguments are passed to `dsv4 serve`.
#
# The bundled model is a synthetic checkpoint (`dsv4 make-model --preset bundled`): the real DeepSeek-V4 vocabulary
# and tokenizer, small dims, RANDOM weights. It runs fast on a laptop CPU and exercises every code path end to end,
# but the text it produces is gibberish. Point --model at a real checkpoint for real output.
set -euo pipefail
repo_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo_root"
scripts/install-deps.sh
cmake --preset release >/dev/null
cmake --build --preset release -j "$(nproc)"

dsv4=build/release/dsv4
bundled=models/bundled
tokenizer=build/release/tokenizer/deepseek_v4/tokenizer.json

# Idempotent: (re)created only when absent, incomplete (the index is written last) or not valid for this build.
if [[ ! -f $bundled/model.safetensors.index.json ]] || ! "$dsv4" inspect --model "$bundled" >/dev/null 2>&1; then
  echo "run: creating the bundled model in $bundled (random weights)"
  tokenizer_args=()
  if [[ -f $tokenizer ]]; then tokenizer_args=(--tokenizer "$tokenizer"); fi
  "$dsv4" make-model --preset bundled --out "$bundled" --force "${tokenizer_args[@]}"
fi
if [[ ! -f $bundled/tokenizer.json ]]; then
  if [[ -f $tokenizer ]]; then
    cp "$tokenizer" "$bundled/tokenizer.json"
  else
    node tools/make_v4_tokenizer.js --out "$bundled/tokenizer.json"
  fi
fi

# The main job: the OpenAI-compatible server on the bundled model (http://127.0.0.1:8000/v1 unless --port says).
exec "$dsv4" serve --model "$bundled" "$@"
