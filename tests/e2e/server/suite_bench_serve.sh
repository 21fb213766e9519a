# `dsv4 bench serve` (DSV4_CLI) against the server: every request completes, the token counts add up, and the
# server-side sections come from /metrics: the per-event overhead, and the engine steps' mean time and host share
# (the fake engine reports 4 ms steps of which a quarter is host work, so the client must find exactly that).
[[ -x ${DSV4_CLI:-} ]] || fail "DSV4_CLI does not name the dsv4 binary"
API_KEY=none
start_server --fake-step-us 2000 --max-num-seqs 16
"$DSV4_CLI" bench serve --host 127.0.0.1 --port "$PORT" --concurrency 1,4 --num-prompts 8 --input-len 16 \
  --output-len 6 --json "$E2E_WORK/bench.json" >"$E2E_WORK/bench.txt" 2>&1 \
  || { cat "$E2E_WORK/bench.txt" >&2; fail "dsv4 bench serve failed"; }
grep -q "Host share of the step (%):" "$E2E_WORK/bench.txt" || fail "no engine-step section in the report"
command -v node >/dev/null || skip "node is not installed"
cat >"$E2E_WORK/check.js" <<'JS'
const fs = require('fs');
const r = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
const check = (ok, what) => { if (!ok) { console.error('bench serve: ' + what); process.exit(1); } };
check(r.levels.length === 2, 'two levels');
for (const l of r.levels) {
  check(l.completed === 8 && l.failed === 0, `level ${l.concurrency}: ${l.completed} completed, ${l.failed} failed`);
  check(l.output_tokens === 8 * 6, `level ${l.concurrency}: ${l.output_tokens} output tokens`);
  check(l.engine_steps > 0, `level ${l.concurrency}: no engine steps`);
  check(Math.abs(l.step_mean_ms - 4) < 1e-6, `level ${l.concurrency}: mean step ${l.step_mean_ms} ms, not 4`);
  check(Math.abs(l.host_share - 0.25) < 1e-6, `level ${l.concurrency}: host share ${l.host_share}, not 0.25`);
  check(Math.abs(l.host_ms_per_step - 1) < 1e-6, `level ${l.concurrency}: host ${l.host_ms_per_step} ms a step`);
  check(Math.abs(l.sample_ms_per_step - 0.5) < 1e-6, `level ${l.concurrency}: sampling ${l.sample_ms_per_step} ms a step`);
  check(l.workspace_high_water_mib > 0 && l.workspace_high_water_mib <= 1024,
        `level ${l.concurrency}: workspace high water ${l.workspace_high_water_mib} MiB`);
  check(l.server_overhead_mean_us !== null, `level ${l.concurrency}: no server overhead`);
}
console.log('bench serve: levels, counts and server-side sections as expected');
JS
node "$E2E_WORK/check.js" "$E2E_WORK/bench.json" || fail "the benchmark's JSON is not as expected"
stop_server 0
