#!/usr/bin/env bash
# Static validation of the container files (this machine has a Docker client but no daemon and no registry, so the
# images cannot be built or run here; the Caddy configuration itself runs in tests/e2e/server/suite_caddy.sh):
#   - deploy/compose.yaml through Debian's `docker-compose config` (schema and interpolation), and its shape: only
#     Caddy publishes a port, dsv4 reserves a GPU, has a healthcheck and the model / cache volumes, the API key is
#     required;
#   - the Dockerfile through dockerfile-utils' linter and check_dockerfile.js;
#   - every `dsv4 serve` flag the Dockerfile and compose.yaml pass exists (`dsv4 serve --help`);
#   - deploy/caddy/Caddyfile with the compose upstream through `caddy validate`.
# Usage: check_deploy.sh DSV4_BINARY REPO_DIR. Exit 77 (skipped) when a tool is missing, except under CI.
set -euo pipefail
dsv4=$1
repo=$2
skip() {
  if [[ -n ${CI:-} ]]; then echo "deploy check: cannot run under CI: $*" >&2; exit 1; fi
  echo "SKIPPED: $*"
  exit 77
}
fail() { echo "deploy check FAILED: $*" >&2; exit 1; }
command -v docker-compose >/dev/null || skip "docker-compose is not installed (scripts/install-deps.sh installs it)"
command -v caddy >/dev/null || skip "caddy is not installed (scripts/install-deps.sh installs it)"
command -v node >/dev/null || skip "node is not installed"
[[ -d $repo/tests/node/node_modules/dockerfile-utils ]] || skip "tests/node/node_modules is absent (scripts/install-deps.sh)"

compose=$repo/deploy/compose.yaml
if (unset DSV4_API_KEY; docker-compose -f "$compose" config >/dev/null 2>&1); then
  fail "compose.yaml must refuse to start without DSV4_API_KEY"
fi
config=$(DSV4_API_KEY=check docker-compose -f "$compose" config) || fail "docker-compose config rejected compose.yaml"
service() {  # the normalized config of one service (two-space indented block under services:)
  awk -v name="  $1:" '$0 == name {on=1; next} on && /^  [^ ]/ {on=0} on' <<<"$config"
}
dsv4_service=$(service dsv4)
caddy_service=$(service caddy)
[[ -n $dsv4_service && -n $caddy_service ]] || fail "compose.yaml needs the services dsv4 and caddy"
grep -q '^    ports:' <<<"$dsv4_service" && fail "dsv4 must not publish a port (only Caddy does)"
grep -q '^    ports:' <<<"$caddy_service" || fail "caddy publishes no port"
grep -q 'driver: nvidia' <<<"$dsv4_service" || fail "dsv4 reserves no GPU"
grep -q -- '- gpu' <<<"$dsv4_service" || fail "dsv4's device reservation lacks the gpu capability"
grep -q 'http://127.0.0.1:8000/health' <<<"$dsv4_service" || fail "dsv4 has no /health healthcheck"
grep -q ':/models/model:ro' <<<"$dsv4_service" || fail "dsv4 mounts no model volume (read-only)"
grep -q 'dsv4-cache:/cache' <<<"$dsv4_service" || fail "dsv4 has no cache volume"
grep -q 'DSV4_UPSTREAM: dsv4:8000' <<<"$caddy_service" || fail "caddy does not proxy to dsv4:8000"
grep -q 'deploy/caddy/Caddyfile:/etc/caddy/Caddyfile:ro' <<<"$caddy_service" || fail "caddy does not run deploy/caddy/Caddyfile"
grep -q 'caddy-data:/data' <<<"$caddy_service" || fail "caddy's certificates (/data) are not on a volume"
echo "ok: compose.yaml"

flags=$(cd "$repo/tests/node" && NODE_PATH=$PWD/node_modules node "$repo/tests/e2e/deploy/check_dockerfile.js" "$repo/Dockerfile") ||
  fail "Dockerfile"
echo "ok: Dockerfile"
flags+=$'\n'$(sed -n 's/^      - \(--[a-z-]*\).*/\1/p' "$compose")
help=$("$dsv4" serve --help)
for flag in $(sort -u <<<"$flags"); do
  grep -q -- "^  $flag[ ,=]" <<<"$help" || fail "the container passes $flag, which dsv4 serve does not have"
done
echo "ok: every serve flag they pass exists"

DSV4_UPSTREAM=dsv4:8000 DSV4_PUBLIC_ADDRESS=llm.example.lan:8443 XDG_DATA_HOME=$(mktemp -d) \
  caddy validate --config "$repo/deploy/caddy/Caddyfile" --adapter caddyfile >/dev/null 2>&1 ||
  fail "caddy validate rejected deploy/caddy/Caddyfile"
echo "ok: Caddyfile"
echo "deploy check: passed"
