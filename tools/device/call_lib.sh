#!/usr/bin/env bash
# Sourced by the per-session device-call scripts (docs/bench/*/runNN.sh): unpacks the carried binaries
# (.devpack/dev*.tar.xz, tools/device/pack.sh), sets the environment the programs need, and gives
#   run NAME LIMIT COMMAND...  runs COMMAND under LIMIT seconds (less when the call's BUDGET is nearly spent; skipped
#                              under 20 s), its output in $OUT/NAME.log, a summary line kept;
#   sampler_checks             the device sampler's op tests twice and their memcheck;
#   serve_variants FLAGS V...  serving C1 / C64 with .devbin/dsv4_V for each variant V in turn;
#   report TAG                 prints each log's errors and tail, archives $OUT as $OUT/TAG.tgz (the one file that
#                              must come back: a call returns few files), prints the summary lines.
# BUDGET: the seconds the whole call may take (default 575).
set -uo pipefail
T0=$SECONDS
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
for pack in .devpack/dev*.tar.xz; do tar xJf "$pack"; done
export LD_LIBRARY_PATH="$PWD/.devbin/lib:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export DSV4_SOURCE_DIR="$PWD"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
summary=()
left() { echo $((${BUDGET:-575} - (SECONDS - T0))); }
run() {
    local name=$1 limit=$2
    shift 2
    local l
    l=$(left)
    ((l < 20)) && { summary+=("$name skipped (no time)"); return; }
    ((limit > l)) && limit=$l
    local start=$SECONDS
    timeout "$limit" "$@" >"$OUT/$name.log" 2>&1
    local rc=$?
    summary+=("$name rc=$rc $((SECONDS - start))s $(grep -E '^\[  (PASSED|FAILED|SKIPPED) +\]' "$OUT/$name.log" | sort | uniq -c | tr -s ' ' | tr '\n' ';')")
}
report() {
    local f n
    for f in "$OUT"/*.log; do
        n=$(basename "$f" .log)
        echo "== $n"
        grep -E "Failure|FAILED|error|Error" "$f" | head -15
        case $n in ops | golden | probes | dist | bits) grep -E "^\[  (PASSED|FAILED) " "$f" | head -5 ;; *) grep -v "^$" "$f" | tail -"${REPORT_LINES:-25}" ;; esac
    done
    tar czf "/tmp/$1.tgz" -C "$OUT" . 2>/dev/null && find "$OUT" -mindepth 1 -delete && mv "/tmp/$1.tgz" "$OUT/"
    printf '%s\n' "${summary[@]}"
}
# The device sampler's op tests twice (fresh random draws each run) and a memcheck of its comparison with the host.
sampler_checks() {
    for i in 1 2; do run "sample_ops$i" 60 .devbin/ops_cuda --gtest_filter='*Sample*:*Argmax*'; done
    run sample_memcheck 90 compute-sanitizer --tool memcheck --error-exitcode 3 .devbin/ops_cuda \
        --gtest_filter='CudaSampleRows.MatchesTheReferenceOnFreshRandomDraws'
    grep -h "ERROR SUMMARY" "$OUT/sample_memcheck.log" 2>/dev/null
}
# Serving C1 / C64 (tools/device/serve_bench.sh, server flags $1) with .devbin/dsv4_<variant> for each further argument
# in turn, "new" being .devbin/dsv4 as carried (e.g. new old new); JSON as serve_c<level>_<variant>.<seconds>.json.
serve_variants() {
    local flags=$1 b c
    shift
    cp .devbin/dsv4 .devbin/dsv4_new
    for b in "$@"; do
        cp ".devbin/dsv4_$b" .devbin/dsv4
        SERVER_FLAGS="$flags" run "serve_$b.$SECONDS" 120 tools/device/serve_bench.sh flash-160 "1 64"
        for c in 1 64; do [[ -f $OUT/serve_c$c.json ]] && mv "$OUT/serve_c$c.json" "$OUT/serve_c${c}_$b.$SECONDS.json"; done
    done
    cp .devbin/dsv4_new .devbin/dsv4
}
