#!/usr/bin/env bash
# Installs what dsv4 needs on a Debian 12 machine. Idempotent: packages already present are skipped.
# Used by the README's first command and by CI (.ci/run -> scripts/test.sh).
#   --serving   only what building and serving need (scripts/run.sh): no test-only tools (Chromium, docker-compose)
set -euo pipefail
serving_only=0
[[ ${1:-} == --serving ]] && serving_only=1

packages=(
  build-essential cmake ninja-build pkg-config git
  libcpp-httplib-dev nlohmann-json3-dev libonig-dev libcli11-dev libfmt-dev libxxhash-dev libssl-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  clang-14 libclang-rt-14-dev libomp-dev clang-format clang-tidy
  caddy curl ca-certificates
)
optional_packages=()
if ((!serving_only)); then
  # docker-compose validates deploy/compose.yaml (`docker-compose config`; no daemon needed).
  packages+=(docker-compose)
  # The official JSON-Schema-Test-Suite as data for the structured-output tests (tests/unit/structured).
  packages+=(json-schema-test-suite)
  # Chromium runs the chat page's end-to-end test (tests/e2e/webui). Not every Debian architecture ships it: where
  # it cannot be installed the test says so and skips.
  optional_packages+=(chromium)
fi
# Node.js 20 with npm: the machine image ships it (nodesource); Debian's own nodejs/npm only if it is absent.
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  packages+=(nodejs npm)
fi

missing=()
apt_updated=0
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if ((${#missing[@]})); then
  echo "install-deps: installing ${missing[*]}"
  sudo_cmd=()
  if [[ $(id -u) -ne 0 ]]; then sudo_cmd=(sudo); fi
  export DEBIAN_FRONTEND=noninteractive
  "${sudo_cmd[@]}" apt-get update -qq
  apt_updated=1
  "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
  echo "install-deps: all Debian packages present"
fi
for p in ${optional_packages[@]+"${optional_packages[@]}"}; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    echo "install-deps: installing $p (optional)"
    sudo_cmd=()
    if [[ $(id -u) -ne 0 ]]; then sudo_cmd=(sudo); fi
    if ((!apt_updated)); then
      "${sudo_cmd[@]}" apt-get update -qq || true
      apt_updated=1
    fi
    if ! DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "$p"; then
      echo "install-deps: $p is not installable here; the tests that need it will skip"
    fi
  fi
done

# Node packages for the tokenizer reference check and the end-to-end tests (pinned in package-lock.json).
repo_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
if [[ -f "$repo_root/tests/node/package.json" ]]; then
  if [[ ! -d "$repo_root/tests/node/node_modules" ]] || [[ "$repo_root/tests/node/package-lock.json" -nt "$repo_root/tests/node/node_modules/.install-stamp" ]]; then
    (cd "$repo_root/tests/node" && npm ci --no-audit --no-fund --loglevel=error && touch node_modules/.install-stamp)
  fi
fi
