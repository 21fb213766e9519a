# The chat page at / in real Chromium (webui.test.js, playwright-core from tests/node), on the FakeEngine with an API
# key (--no-webui is tested in tests/unit/server/server_operator_test.cpp). Where Debian has no chromium package for
# this machine the suite skips and says so (also under CI); where it has one but it is not installed, that is a
# missing `scripts/install-deps.sh` (a failure under CI). DSV4_WEBUI_SCREENSHOT=docs/chat-page.png refreshes the
# screenshot in docs/.
[[ $E2E_MODE == fake ]] || skip "the chat page suite runs on the FakeEngine only"
chromium_bin=$(command -v chromium || true)
if [[ -z $chromium_bin ]]; then
  if ! apt-cache policy chromium 2>/dev/null | grep -q 'Candidate: [0-9]'; then
    echo "SKIPPED: Chromium is not installable on this machine (no Debian chromium package): the chat page is untested"
    exit 77
  fi
  skip "chromium is not installed (scripts/install-deps.sh installs it)"
fi
[[ -d $E2E_REPO/tests/node/node_modules/playwright-core ]] ||
  skip "tests/node/node_modules/playwright-core is absent (scripts/install-deps.sh installs the npm packages)"

API_KEY=webui-key
start_server --api-key "$API_KEY" --fake-step-us 10000
expect_code 200 GET /                                        # the page itself needs no key
expect_header Content-Type "text/html"
expect_header Content-Security-Policy "default-src 'none'"
grep -q '<script src=\|<link rel="stylesheet"\|https\?://[a-z]' "$E2E_WORK/last_body" &&
  fail "the chat page references an external asset"
DSV4_CHROMIUM=$chromium_bin DSV4_SCREENSHOT=${DSV4_WEBUI_SCREENSHOT:-$E2E_WORK/chat-page.png} \
  run_node "$E2E_DIR/webui.test.js"
stop_server 0
