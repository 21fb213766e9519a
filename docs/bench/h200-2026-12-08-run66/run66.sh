#!/usr/bin/env bash
# Device calls of 2026-12-08 (fifteenth session). Usage: BUDGET=S bash docs/bench/h200-2026-12-08-run66/run66.sh MODE
#   m : main's owed figures (main_figures: golden, offline B = 1 / 8 / 64 / 256 and prefill 2K / 8K, serving C1 / C64,
#       the 8K prefill per op), then the batch-1 and batch-8 decode per op
#   p : (any GPU) golden, the state and attention suites on main's new defaults, the per-op profiles of decode B = 1 /
#       8 and of the 8K prefill
#   g : (any GPU) the bf16 GEMV (off by default): its tests, the fused ops, golden, the kernel bench of the bf16
#       weights at 1 / 8 rows, decode B = 1 / 8 alternated with DSV4_MIN_BF16_GEMV_ROWS = 9 (off, the default), 2 (the
#       setting to measure), 1, and B = 8 per op
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
g)
    run tests 120 .devbin/ops_cuda --gtest_filter='*Bf16*:CudaState.StatefulAttentionFastNumerics:*Fused*'
    run golden 70 .devbin/golden_cuda
    for f in router weights_proj compressor; do
        run "k_$f" 30 .devbin/dsv4 bench kernels --rows 1,8 --filter "$f" --json "$OUT/k_$f.json"
        grep -hE "gemv" "$OUT/k_$f.log" | head -12
    done
    for v in 9 2 1 9 2 1; do
        DSV4_MIN_BF16_GEMV_ROWS=$v run "ab_$v.$SECONDS" 40 .devbin/dsv4 "${fast[@]}" --batch 1,8 --context 1000 \
            --prefill 0 --steps 8 --json "$OUT/ab_$v.$SECONDS.json"
    done
    for f in "$OUT"/ab_*.log; do echo "$(basename "$f") $(grep -hE "^(1|8) " "$f" | tr -s ' ' | tr '\n' '|')"; done
    profile_decode
    ;;
o)
    run ops 560 .devbin/ops_cuda
    ;;
esac
python3 tools/device/short_table.py "$OUT"
report "r66_$mode"
