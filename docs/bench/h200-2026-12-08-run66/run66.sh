#!/usr/bin/env bash
# Device calls of 2026-12-08 (fifteenth session). Usage: BUDGET=S bash docs/bench/h200-2026-12-08-run66/run66.sh MODE
#   m : main's owed figures (main_figures: golden, offline B = 1 / 8 / 64 / 256 and prefill 2K / 8K, serving C1 / C64,
#       the 8K prefill per op), then the batch-1 and batch-8 decode per op
#   p : (any GPU) golden, the state and attention suites on main's new defaults, the per-op profiles of decode B = 1 /
#       8 and of the 8K prefill
#   o : the whole op suite
mode=$1
source tools/device/call_lib.sh
source tools/device/offline_lib.sh
source tools/device/report_lines.sh
profile_decode() {
    DSV4_PROFILE_OPS=1 run prof_b1 60 .devbin/dsv4 "${fast[@]}" --batch 1,8 --context 1000 --prefill 0 --steps 2
    grep -hE "^(1|8) |breakdown" "$OUT/prof_b1.log"
}
case $mode in
m)
    main_figures
    profile_decode
    ;;
p)
    run golden 70 .devbin/golden_cuda
    run tests 150 .devbin/ops_cuda --gtest_filter='CudaState.*:CudaAttention*:CudaFp8*'
    profile_decode
    DSV4_PROFILE_OPS=1 run prof8k 80 .devbin/dsv4 "${fast[@]}" --batch 1 --context 1000 --prefill 8192 --steps 1
    grep -h "breakdown" "$OUT/prof8k.log"
    ;;
o)
    run ops 560 .devbin/ops_cuda
    ;;
esac
python3 tools/device/short_table.py "$OUT"
report "r66_$mode"
