#!/usr/bin/env bash
# Device calls of 2026-12-07 (thirteenth session). Usage: BUDGET=S bash docs/bench/h200-2026-12-07-run63/run63.sh MODE
# .devbin (.devpack/dev117): dsv4, ops_cuda, golden_cuda of main (the wide kernels with one normed-query staging).
#   m : main's owed figures on the H200: golden, the wide kernels' tests, offline figures (flash-160, B = 1 / 8 / 64 /
#       256, prefill 2K / 8K at the default chunk), serving C1 / C64, the 8K prefill per op
#   o : the whole op suite on main's binaries; ncu of every kernel of two eager batch-1 decode steps (2 layers): each
#       kernel's duration, DRAM throughput, occupancy and stalls (tools/device/ncu_summary.py)
mode=$1
source tools/device/call_lib.sh
source tools/device/offline_lib.sh
source tools/device/report_lines.sh
case $mode in
m)
    run wide 80 .devbin/ops_cuda --gtest_filter='CudaAttentionWide.*:CudaState.NormedQueries*'
    main_figures
    ;;
o)
    run ops 420 .devbin/ops_cuda
    run ncub1 100 ncu --clock-control none --section SpeedOfLight --section LaunchStats --section Occupancy \
        --section WarpStateStats --csv --page details .devbin/dsv4 "${fast[@]}" --layers 2 --batch 1 --context 1000 \
        --prefill 0 --steps 2 --enforce-eager
    python3 tools/device/ncu_summary.py "$OUT/ncub1.log" | head -40
    ;;
esac
python3 tools/device/short_table.py "$OUT"
report "r63_$mode"
