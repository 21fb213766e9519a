#!/usr/bin/env bash
# One command from a fresh Debian machine to a running dsv4: installs what is missing, builds the release binary and
# starts the main job, the OpenAI-compatible server on the bundled demo model. Extra arguments go to `dsv4 serve`.
#
# The bundled model (models/demo, committed) is a small model in the DeepSeek-V4 architecture trained on the Brown
# corpus of American English: every layer type (sliding window, CSA with the lightning indexer, HCA, hash and learned
# MoE, mHC), its own 2,048-token BPE with the V4 special tokens and chat format, FP8/FP4 weights in DeepSeek's
# on-disk format, an MTP drafter (models/demo-dspark: the same body with DSpark drafters). Its English is simple and
# often odd: 6.8 M parameters trained for 4 minutes (docs/demo-model.md). Point --model at a real checkpoint for
# real answers; `dsv4 make-model --preset random-v4` makes the random-weight test model.
#
# It builds only what serving needs (the dsv4 binary, not the test suites and benchmarks) and says what it is doing
# and how long each step took. DSV4_JOBS sets the build's parallelism (default: all cores).
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
cmake --build --preset release -j "$jobs" --target dsv4
done_step

dsv4=build/release/dsv4
model=models/demo
if ! "$dsv4" inspect --model "$model" >/dev/null 2>&1; then
  echo "run: $model is missing or incomplete (it is part of the repository: git checkout -- $model)" >&2
  exit 1
fi

# The main job: the OpenAI-compatible server on the demo model (http://127.0.0.1:8000/v1 unless --port says);
# the chat page is at http://127.0.0.1:8000/.
echo "run: starting dsv4 serve --model $model $* (chat page at / once it says ready; Ctrl-C stops it)"
exec "$dsv4" serve --model "$model" "$@"
