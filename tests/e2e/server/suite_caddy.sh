# Real Caddy (deploy/caddy/Caddyfile, the file deploy/compose.yaml runs) in front of the server, without containers:
# HTTPS with Caddy's local CA (verified, not -k), HTTP/2, SSE chunks delivered as they are produced (not buffered),
# /metrics kept internal, slow clients buffered by Caddy (they never hold one of dsv4's HTTP threads), the IP
# allow-list, and the openai SDK through the proxy.
command -v caddy >/dev/null || skip "caddy is not installed (scripts/install-deps.sh installs it)"
[[ $E2E_MODE == fake ]] || skip "the caddy suite runs on the FakeEngine only"
CADDYFILE=$E2E_REPO/deploy/caddy/Caddyfile
export XDG_DATA_HOME=$E2E_WORK/caddy-data XDG_CONFIG_HOME=$E2E_WORK/caddy-config
free_port() { node -e "const s=require('net').createServer().listen(0,'127.0.0.1',()=>{console.log(s.address().port);s.close()})"; }

# start_caddy ALLOWED_IPS: Caddy on a free port proxying to the running server. Sets CADDY_PID, HTTPS_URL, CA.
start_caddy() {
  local port
  port=$(free_port)
  DSV4_PUBLIC_ADDRESS=localhost:$port DSV4_UPSTREAM=127.0.0.1:$PORT DSV4_ALLOWED_IPS="$1" \
    caddy run --config "$CADDYFILE" --adapter caddyfile >"$E2E_WORK/caddy-$port.log" 2>&1 &
  CADDY_PID=$!
  HTTPS_URL=https://localhost:$port
  CA=$XDG_DATA_HOME/caddy/pki/authorities/local/root.crt
  for _ in $(seq 1 100); do
    [[ -f $CA ]] && curl -s -o /dev/null --cacert "$CA" "$HTTPS_URL/health" && return 0
    kill -0 "$CADDY_PID" 2>/dev/null || fail "caddy exited: $(tail -n 5 "$E2E_WORK/caddy-$port.log")"
    sleep 0.1
  done
  fail "caddy did not start: $(tail -n 5 "$E2E_WORK/caddy-$port.log")"
}
stop_caddy() {
  kill -TERM "$CADDY_PID"
  wait "$CADDY_PID" || true
  CADDY_PID=""
}

# The fake engine produces one token every 200 ms: a buffering proxy would deliver them all at the end.
start_server --fake-step-us 200000 --public-health
start_caddy "127.0.0.1/32 ::1/128"

code=$(curl -s -o "$E2E_WORK/h" -w '%{http_code} %{http_version}' --cacert "$CA" "$HTTPS_URL/health")
[[ $code == "200 2" ]] || fail "GET /health over HTTPS/2 through caddy: $code"
curl -s -o /dev/null --cacert "$CA" --http1.1 "$HTTPS_URL/health" || fail "HTTPS/1.1 through caddy failed"
plain=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:${HTTPS_URL##*:}/health" || true)
[[ $plain != 200 ]] || fail "plain HTTP must not be served on the TLS port"

timing=$(NODE_EXTRA_CA_CERTS=$CA node "$E2E_DIR/stream_timing.js" "$HTTPS_URL/v1/completions")
echo "through caddy: $timing"
node -e '
  const t = JSON.parse(process.argv[1]);
  const fail = (m) => { console.error("stream timing: " + m + " " + process.argv[1]); process.exit(1); };
  if (t.status !== 200 || !t.done) fail("bad status or no [DONE]");
  if (t.chunks < 6) fail("too few chunks");
  // Tokens 200 ms apart must arrive about 200 ms apart (a buffered stream would show ~0 ms gaps).
  const spaced = t.gaps_ms.filter((g) => g >= 120).length;
  if (spaced < t.gaps_ms.length - 1) fail("chunks were buffered");
  if (t.total_ms - t.first_ms < 800) fail("everything arrived at once");
' "$timing" || fail "SSE through caddy is buffered"

# HTTP/1.1 clients: streamed responses on reused upstream connections must all complete (caddyserver/caddy#5431,
# which the Caddyfile's buffer_requests works around).
for i in $(seq 1 20); do
  curl -s -o /dev/null --cacert "$CA" --http1.1 "$HTTPS_URL/health"
  out=$(curl -s -N --cacert "$CA" --http1.1 -H "Content-Type: application/json" \
    -d '{"prompt":"tick","max_tokens":2,"stream":true}' "$HTTPS_URL/v1/completions")
  grep -q '^data: \[DONE\]' <<<"$out" || fail "HTTP/1.1 stream $i through caddy was truncated: $out"
done

API_KEY=none BASE_URL=$HTTPS_URL NODE_EXTRA_CA_CERTS=$CA run_node --test-name-pattern "models.list|non-streaming and streaming" \
  "$E2E_DIR/openai_sdk.test.js"

# /metrics is internal: Caddy answers 404 itself; dsv4 still serves it on its own address.
code=$(curl -s -o "$E2E_WORK/metrics" -w '%{http_code}' --cacert "$CA" "$HTTPS_URL/metrics")
[[ $code == 404 ]] || fail "/metrics through caddy: $code"
[[ $(curl -s -o /dev/null -w '%{http_code}' "$BASE_URL/metrics") == 200 ]] || fail "/metrics on dsv4 itself"
stop_caddy
stop_server 0

# Slow clients: dsv4 with 4 HTTP threads. Straight at dsv4, 4 clients that stall inside their body hold every
# thread until --request-read-timeout; through Caddy, 12 of them hold nothing (Caddy waits for the whole body and
# never forwards a partial request), so /health through Caddy answers at once.
start_server --http-threads 4 --max-concurrent-requests 2 --request-read-timeout 2
start_caddy "127.0.0.1/32 ::1/128"
node "$E2E_DIR/slow_clients.js" "$BASE_URL/v1/completions" 4 1500 >"$E2E_WORK/direct" &
direct_pid=$!
sleep 0.5
blocked=$(curl -s -o /dev/null -m 0.7 -w '%{http_code}' "$BASE_URL/health" || true)
[[ $blocked != 200 ]] || fail "4 stalled clients did not occupy dsv4's 4 threads (the buffering test would prove nothing)"
wait "$direct_pid"
sleep 2.2  # --request-read-timeout ends the direct ones
posts_before=$(grep -c '"POST /v1/completions"' "$SERVER_LOG" || true)
NODE_EXTRA_CA_CERTS=$CA node "$E2E_DIR/slow_clients.js" "$HTTPS_URL/v1/completions" 12 2500 >"$E2E_WORK/buffered" &
buffered_pid=$!
sleep 0.5
start_ms=$(date +%s%3N)
code=$(curl -s -o /dev/null -m 2 -w '%{http_code}' --cacert "$CA" "$HTTPS_URL/health" || true)
elapsed=$(($(date +%s%3N) - start_ms))
[[ $code == 200 ]] || fail "/health through caddy with 12 slow clients: $code"
((elapsed < 1000)) || fail "/health through caddy took $elapsed ms with 12 slow clients"
[[ $(grep -c '"POST /v1/completions"' "$SERVER_LOG" || true) == "$posts_before" ]] ||
  fail "a partial request reached dsv4 through caddy while its client was still sending"
wait "$buffered_pid"
grep -q '"opened":12' "$E2E_WORK/buffered" || fail "slow clients: $(cat "$E2E_WORK/buffered")"
# When such a client gives up, Caddy 2.6 forwards the truncated body all at once; dsv4 answers it at once (400).
sleep 0.3
tail -n +$((posts_before + 1)) <(grep '"POST /v1/completions"' "$SERVER_LOG") | while read -r line; do
  ms=${line% ms*}
  ms=${ms##* }
  [[ ${ms%.*} -lt 100 ]] || fail "a request forwarded by caddy held a dsv4 thread for $ms ms: $line"
done
echo "slow clients: direct $(cat "$E2E_WORK/direct"), through caddy $(cat "$E2E_WORK/buffered"), /health in ${elapsed} ms"
stop_caddy

# The allow-list: a list without loopback turns this client away with 403 before anything reaches dsv4.
start_caddy "10.0.0.0/8"
seen_before=$(grep -c '"GET /v1/models"' "$SERVER_LOG" || true)
code=$(curl -s -o "$E2E_WORK/denied" -w '%{http_code}' --cacert "$CA" "$HTTPS_URL/v1/models")
[[ $code == 403 ]] || fail "a client outside the allow-list got $code"
grep -q "allow-list" "$E2E_WORK/denied" || fail "unexpected 403 body: $(cat "$E2E_WORK/denied")"
sleep 0.2
[[ $(grep -c '"GET /v1/models"' "$SERVER_LOG" || true) == "$seen_before" ]] || fail "a denied request reached dsv4"
stop_caddy
stop_server 0
