#!/usr/bin/env bash
# Device calls of 2026-12-07 (twelfth session). Usage: BUDGET=S bash docs/bench/h200-2026-12-07-run62/run62.sh MODE
# .devbin: dsv4, ops_cuda, golden_cuda of main with the wide kernels' shared key range and partials (the review's D3).
#   m : main on the H200: golden, the wide kernels' tests; offline figures (flash-160, B = 1 / 8 / 64 / 256, prefill
#       2K / 8K at the default chunk); serving C1 / C64 with main's defaults; the 8K prefill per op
#   n : where the mma.sync wide attention kernel's time goes: ncu (speed of light, warp states, the SASS lines'
#       stall samples) of its launches in an 8K prefill of 4 layers at one 8,192-token chunk (every launch the
#       prefill's: 3 prefills of 4 layers; layers 0-1 window only, 2 CSA, 3 HCA)
#   v : the wide kernel's per-token and per-chunk costs cut (.devbin/dsv4 new, .devbin/dsv4_base = main before):
#       its tests, the norm/rope tests, golden, memcheck; prefill 2K / 8K alternated base / new; ncu of the new
#       kernel's launches (as n)
mode=$1
source tools/device/call_lib.sh
source tools/device/offline_lib.sh
source tools/device/report_lines.sh
ncu_prefill=(.devbin/dsv4 bench offline --preset flash-160 --numerics fast --layers 4 --batch 1 --context 1000
    --prefill 8192 --prefill-chunk 8192 --steps 1 --enforce-eager)
case $mode in
m)
    run wide 60 .devbin/ops_cuda --gtest_filter='CudaAttentionWide.*'
    main_figures
    ;;
n)
    run ncuwide 90 ncu --clock-control none --section SpeedOfLight --section LaunchStats --section Occupancy --section WarpStateStats \
        --section SchedulerStats --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis --csv \
        --page details --kernel-name regex:attention_mqa_wide --launch-count 12 "${ncu_prefill[@]}"
    run ncuwsrc 120 ncu --clock-control none --section SourceCounters --kernel-name regex:attention_mqa_wide \
        --launch-skip 4 --launch-count 2 --page source --print-source sass --csv "${ncu_prefill[@]}" &&
        python3 tools/device/ncu_source_summary.py "$OUT/ncuwsrc.log" >"$OUT/ncuwsrc.txt"
    head -60 "$OUT/ncuwsrc.txt"
    xz -T4 "$OUT/ncuwsrc.log"
    ;;
v)
    run wide 90 .devbin/ops_cuda --gtest_filter='CudaAttentionWide.*:CudaState.NormedQueries*:CudaState.*Fast*:*NormRope*:*Rope*:*RmsNorm*'
    run golden 70 .devbin/golden_cuda
    for bin in dsv4_base dsv4 dsv4_base dsv4; do
        run "pre_$bin.$SECONDS" 60 .devbin/$bin "${fast[@]}" --batch 1 --context 1000 --prefill 2048,8192 --steps 1 \
            --json "$OUT/pre_$bin.$SECONDS.json"
    done
    for f in "$OUT"/pre_*.log; do echo "$(basename "$f") $(grep -h "^prefill" "$f" | tr '\n' ' ')"; done
    run ncuwide 90 ncu --clock-control none --section SpeedOfLight --section WarpStateStats --section SchedulerStats \
        --csv --page details --kernel-name regex:attention_mqa_wide --launch-count 4 "${ncu_prefill[@]}"
    python3 -c "import csv,sys; [print(r[0], r[4][:60], r[14]) for r in csv.reader(open(sys.argv[1])) if len(r) > 14 and r[12] == 'Duration']" "$OUT/ncuwide.log"
    run memcheck 150 compute-sanitizer --tool memcheck --error-exitcode 3 .devbin/ops_cuda \
        --gtest_filter='CudaAttentionWide.*:CudaState.NormedQueries*'
    grep -h "ERROR SUMMARY" "$OUT/memcheck.log"
    ;;
esac
python3 tools/device/short_table.py "$OUT"
report "r62_$mode"
