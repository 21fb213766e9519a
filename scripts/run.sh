#!/usr/bin/env bash
# One command from a fresh Debian machine to a running dsv4: installs what is missing, builds the release binary,
# and starts the main job. Extra arguments are passed to `dsv4 serve`.
set -euo pipefail
repo_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo_root"
scripts/install-deps.sh
cmake --preset release >/dev/null
cmake --build --preset release -j "$(nproc)"
exec build/release/dsv4 version
