#!/usr/bin/env bash
# Device calls of 2026-12-07 (eleventh session). Usage: BUDGET=S bash docs/bench/h200-2026-12-07-run61/run61.sh MODE
# .devbin: mode m (never ran: no H200 was lent) with dsv4, ops_cuda, golden_cuda of 5d0e58f (.devpack/dev110); modes
# w and o with .devpack/dev111 (binaries of 6f4c41b's code: main + the wgmma wide kernel, DSV4_MQA_WGMMA off by
# default); both ran on an H100 (24 layers). Logs: docs/bench/h100-2026-12-07-run61/{w,o,g} (g: golden at the
# defaults, the same warm machine).
#   m : main on the H200: golden; offline figures (flash-160, B = 1 / 8 / 64 / 256, prefill 2K / 8K at the default
#       chunk); serving C1 / C64 with main's defaults; where a batch-1 decode step's time goes (per op)
#   o : the whole op suite (FILTER: a negative gtest filter of suites already run)
#   w : the wide attention kernel on wgmma (DSV4_MQA_WGMMA=1; .devbin of main + kernels_attention_wgmma.cu): its tests
#       and memcheck, golden with it, prefill 2K / 8K alternated without and with, the 8K prefill per op with it
mode=$1
source tools/device/call_lib.sh
source tools/device/offline_lib.sh
source tools/device/report_lines.sh
case $mode in
m)
    main_figures
    ;;
w)
    run wide_tests 120 .devbin/ops_cuda --gtest_filter='CudaAttentionWide.*'
    DSV4_MQA_WGMMA=1 run wg_state 90 .devbin/ops_cuda \
        --gtest_filter='CudaState.NormedQueries*:CudaState.LongIndexer*:CudaState.*Fast*'
    DSV4_MQA_WGMMA=1 run golden_wg 70 .devbin/golden_cuda
    for v in 0 1 0 1; do
        DSV4_MQA_WGMMA=$v run "pre_wg$v.$SECONDS" 45 .devbin/dsv4 "${fast[@]}" --batch 1 --context 1000 \
            --prefill 2048,8192 --steps 1 --json "$OUT/pre_wg$v.$SECONDS.json"
    done
    for f in "$OUT"/pre_wg*.log; do echo "$(basename "$f") $(grep -h "^prefill" "$f" | tr '\n' ' ')"; done
    DSV4_MQA_WGMMA=1 DSV4_PROFILE_OPS=1 run prof8k_wg 80 .devbin/dsv4 "${fast[@]}" --batch 1 --context 1000 \
        --prefill 8192 --steps 1
    grep -h "breakdown" "$OUT/prof8k_wg.log"
    run wg_memcheck 150 compute-sanitizer --tool memcheck --error-exitcode 3 .devbin/ops_cuda \
        --gtest_filter='CudaAttentionWide.*'
    grep -h "ERROR SUMMARY" "$OUT/wg_memcheck.log"
    ;;
o)
    run ops 520 .devbin/ops_cuda --gtest_filter="${FILTER:--}"
    ;;
esac
python3 tools/device/short_table.py "$OUT"
report "r61_$mode"
