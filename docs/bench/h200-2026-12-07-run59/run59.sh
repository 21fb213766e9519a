#!/usr/bin/env bash
# Device calls of 2026-12-07 (ninth session). Usage: BUDGET=S bash docs/bench/h200-2026-12-07-run59/run59.sh MODE
# .devbin: .devpack/dev97 (dsv4, ops_cuda, golden_cuda of main with the TMA GEMM's tokens on wgmma's M and the
# indexer's scores and top-k timed apart, DSV4_SIDE_STREAM_PREFILL and norm_rope a warp a row; dsv4_old = dadf511, the
# session start).
#   m : main on the H200: golden; the offline figures (flash-160, B = 1 / 8 / 64 / 256, prefill 2K / 8K at the default
#       chunk); serving C1 / C64 with main's defaults; the whole op suite with the time left
#   t : the TMA GEMM's, the side stream's and norm_rope's tests; golden; FP8 linears at M = 8,192 with DSV4_FP8_TMA=1, new and old kernel,
#       against cuBLASLt and the ceiling; prefill 2K / 8K with and without DSV4_SIDE_STREAM_PREFILL; ncu of the new
#       kernel at wo_b; the 8K prefill per op; the warp-specialized W4A8 experts
#   v : golden and prefill with DSV4_SIDE_STREAM_PREFILL=1 (not run: the session's device time was spent)
#   r : the op suites c's 330 s did not reach
#   c : memcheck of the TMA kernels' and the sampler's tests; the whole op suite
mode=$1
source tools/device/call_lib.sh
source tools/device/offline_lib.sh
source tools/device/report_lines.sh
case $mode in
t)
    run tma_ops 100 .devbin/ops_cuda \
        --gtest_filter='CudaFp8.TmaGemm*:CudaFp8.GroupedProjection:CudaFp8.Linear*:CudaState.CompressorsBeside*:CudaFusedOps.*:CudaOps.*Rope*'
    run golden 70 .devbin/golden_cuda
    # Prefill: the session start (old), the warp-a-row norm_rope (side0), and the compressors and the indexer beside
    # the query path (side1, DSV4_SIDE_STREAM_PREFILL), alternated
    for v in old 0 1 old 0 1; do
        bin=.devbin/dsv4
        [[ $v == old ]] && bin=.devbin/dsv4_old
        DSV4_SIDE_STREAM_PREFILL=${v/old/0} run "pre_side$v.$SECONDS" 40 $bin "${fast[@]}" --batch 1 --context 1000 \
            --prefill 2048,8192 --steps 1 --json "$OUT/pre_side$v.$SECONDS.json"
    done
    for f in "$OUT"/pre_side*.log; do echo "$(basename "$f") $(grep -h "prefill" "$f" | tr '\n' ' ')"; done
    # Decode B=1 / B=8: the session start against the warp-a-row norm_rope
    for v in old new; do
        bin=.devbin/dsv4
        [[ $v == old ]] && bin=.devbin/dsv4_old
        run "dec_$v" 40 $bin "${fast[@]}" --batch 1,8 --context 1000 --prefill 0 --steps 4 --json "$OUT/dec_$v.json"
        grep -h "^1 \|^8 " "$OUT/dec_$v.log"
    done
    DSV4_FP8_TMA=1 run klin_new 60 .devbin/dsv4 bench kernels --rows 8192 --filter " x " --json "$OUT/klin_new.json"
    DSV4_FP8_TMA=1 run klin_old 60 .devbin/dsv4_old bench kernels --rows 8192 --filter " x " \
        --json "$OUT/klin_old.json"
    lin_lines "$OUT/klin_new.json"
    lin_lines "$OUT/klin_old.json"
    # Where the new kernel's time goes at wo_b, M = 8,192: tensor pipe, issue, stall reasons
    DSV4_FP8_TMA=1 run ncu_tma 70 ncu --clock-control none --section SpeedOfLight --section WarpStateStats \
        --section SchedulerStats --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis \
        --metrics sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active \
        --kernel-name regex:fp8_gemm_tma --launch-count 1 .devbin/dsv4 bench kernels --rows 8192 --filter wo_b
    grep -E "gmma|Duration|Throughput|Issue|Eligible|Stall|Warp Cycles|No Eligible|Busy" "$OUT/ncu_tma.log" | head -40
    # Where an 8K prefill's time goes now, the indexer's scores and top-k apart
    DSV4_PROFILE_OPS=1 run prof8k 80 .devbin/dsv4 "${fast[@]}" --batch 1 --context 1000 --prefill 8192 --steps 1
    grep -h "breakdown" "$OUT/prof8k.log"
    # The warp-specialized W4A8 kernel since the shared-memory and sign-split changes (measured before both only)
    DSV4_EXPERT_WS=1 run kexp_ws 45 .devbin/dsv4 bench kernels --rows 1 --tokens 2048,8192 --filter experts \
        --json "$OUT/kexp_ws.json"
    grep -h "experts" "$OUT/kexp_ws.log" | grep -v "^ "
    ;;
m)
    main_offline_and_serving
    run ops 300 .devbin/ops_cuda
    ;;
c)
    run memcheck 200 compute-sanitizer --tool memcheck --error-exitcode 3 .devbin/ops_cuda \
        --gtest_filter='CudaFp8.TmaGemmWritesEveryOutputOnce:CudaFp8.GroupedProjection:CudaFp8.GroupedTma*:CudaSampleRows.MatchesTheReferenceOnFreshRandomDraws'
    grep -h "ERROR SUMMARY" "$OUT/memcheck.log" 2>/dev/null
    run ops 330 .devbin/ops_cuda
    ;;
v)  # the side stream at prefill: golden, prefill
    export DSV4_SIDE_STREAM_PREFILL=1
    run golden 60 .devbin/golden_cuda
    run prefill 40 .devbin/dsv4 "${fast[@]}" --batch 1 --context 1000 --prefill 2048,8192 --steps 1
    grep -h "prefill" "$OUT/prefill.log"
    ;;
r)  # the rest of the op suite after c's 330 s (the suites c completed left out)
    run ops_rest 280 .devbin/ops_cuda --gtest_filter='-CudaFp4Layout.*:CudaFp8.*:CudaFp8Dialect.*:CudaFp8Gemv.*:CudaFusedOps.*:CudaGemvStreamExperts.*:CudaGemvVectors.*:CudaHcPostPre.*:CudaOps.*:CudaSampleRows.*:CudaState.*:Gemv/CudaFp8Linear.*:Paths/CudaFp8Linear.*:Shapes/CudaGemvStream.*:Shapes/CudaHcPostPre.*'
    ;;
esac
python3 tools/device/short_table.py "$OUT"
report "r59_$mode"
