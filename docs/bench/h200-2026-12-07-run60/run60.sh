#!/usr/bin/env bash
# Device calls of 2026-12-07 (tenth session). Usage: BUDGET=S bash docs/bench/h200-2026-12-07-run60/run60.sh MODE
# .devbin: modes i, x, r ran with .devpack/dev100 (dsv4, ops_cuda, golden_cuda of 34c7c11: 669b9c7 + the indexer's
# four-token tiles, DSV4_INDEX_TOKEN_TILE=4, then off by default; dsv4_tmac and ops_cuda_tmac = branch
# next/tma-multicast with 669b9c7 merged, df9fe7d: the TMA FP8 GEMM's weight tile shared by a 2-block cluster);
# mode m's second run with .devpack/dev103 (main with the fused query norm on by default); mode n with .devpack/dev102 (dsv4, ops_cuda, golden_cuda of main with the tiles on by default,
# wq_a and wkv sharing one quantization at prefill, and the queries' norm in the wide attention kernel behind
# DSV4_FUSED_QUERY_NORM=1; dsv4_prev = 34c7c11).
#   m : main on the H200: golden; offline figures (flash-160, B = 1 / 8 / 64 / 256, prefill 2K / 8K at the default
#       chunk); serving C1 / C64 with main's defaults; where a batch-1 decode step's time goes (per op)
#   b : m's offline figures and golden only
#   i : the indexer's token tiles: their tests and memcheck, golden and the indexer's op tests with them on, prefill
#       2K / 8K alternated with and without, the 8K prefill per op with them
#   n : the shared quantization's and the fused query norm's tests (and memcheck), golden with and without the fused
#       norm, prefill 2K / 8K alternated: dsv4_prev (tiles on), main, main with the fused norm; the 8K prefill per op
#   x : the cluster-multicast GEMM (its tests, memcheck, the FP8 linears against one-block and cuBLASLt); golden and
#       prefill with DSV4_SIDE_STREAM_PREFILL=1; the op suites in the time left
#   r : the op suites x did not reach
mode=$1
source tools/device/call_lib.sh
source tools/device/offline_lib.sh
source tools/device/report_lines.sh
case $mode in
m)
    main_offline_and_serving
    DSV4_PROFILE_OPS=1 run prof_b1 60 .devbin/dsv4 "${fast[@]}" --batch 1,8 --context 1000 --prefill 0 --steps 2
    grep -h "breakdown\|per op\|^  " "$OUT/prof_b1.log" | head -60
    ;;
b)  # m's offline figures alone (little device time left)
    run bench 200 .devbin/dsv4 "${fast[@]}" --batch 1,8,64,256 --context 1000 --prefill 2048,8192 --steps 4 \
        --json "$OUT/offline.json"
    grep -h "tok/s" "$OUT/bench.log" | head -12
    run golden 70 .devbin/golden_cuda
    ;;
i)
    run idx_tests 60 .devbin/ops_cuda --gtest_filter='CudaIndexScores.*:CudaTopk.*'
    run idx_memcheck 90 compute-sanitizer --tool memcheck --error-exitcode 3 .devbin/ops_cuda \
        --gtest_filter='CudaIndexScores.*'
    grep -h "ERROR SUMMARY" "$OUT/idx_memcheck.log"
    DSV4_INDEX_TOKEN_TILE=4 run idx_state 90 .devbin/ops_cuda --gtest_filter='CudaState.*Index*:CudaState.*Fast*'
    DSV4_INDEX_TOKEN_TILE=4 run golden_tile 70 .devbin/golden_cuda
    for v in 1 4 1 4; do
        DSV4_INDEX_TOKEN_TILE=$v run "pre_tile$v.$SECONDS" 45 .devbin/dsv4 "${fast[@]}" --batch 1 --context 1000 \
            --prefill 2048,8192 --steps 1 --json "$OUT/pre_tile$v.$SECONDS.json"
    done
    for f in "$OUT"/pre_tile*.log; do echo "$(basename "$f") $(grep -h "prefill" "$f" | tr '\n' ' ')"; done
    DSV4_INDEX_TOKEN_TILE=4 DSV4_PROFILE_OPS=1 run prof8k_tile 80 .devbin/dsv4 "${fast[@]}" --batch 1 --context 1000 \
        --prefill 8192 --steps 1
    grep -h "breakdown" "$OUT/prof8k_tile.log"
    ;;
n)
    run new_tests 120 .devbin/ops_cuda --gtest_filter='CudaFp8Gemv.*:CudaIndexScores.*:CudaState.NormedQueries*:CudaState.*Fast*:CudaFusedOps.*:CudaOps.*Rope*:CudaState.WindowRows*'
    run golden 70 .devbin/golden_cuda
    DSV4_FUSED_QUERY_NORM=1 run golden_qnorm 70 .devbin/golden_cuda
    run qn_memcheck 120 compute-sanitizer --tool memcheck --error-exitcode 3 .devbin/ops_cuda \
        --gtest_filter='CudaState.NormedQueries*'
    grep -h "ERROR SUMMARY" "$OUT/qn_memcheck.log"
    for v in prev new qnorm prev new qnorm; do
        bin=.devbin/dsv4
        [[ $v == prev ]] && bin=.devbin/dsv4_prev
        DSV4_FUSED_QUERY_NORM=$([[ $v == qnorm ]] && echo 1 || echo 0) DSV4_INDEX_TOKEN_TILE=4 run "pre_$v.$SECONDS" 45 \
            $bin "${fast[@]}" --batch 1 --context 1000 --prefill 2048,8192 --steps 1 --json "$OUT/pre_$v.$SECONDS.json"
    done
    for f in "$OUT"/pre_*.log; do echo "$(basename "$f") $(grep -h "^prefill" "$f" | tr '\n' ' ')"; done
    DSV4_FUSED_QUERY_NORM=1 DSV4_PROFILE_OPS=1 run prof8k 80 .devbin/dsv4 "${fast[@]}" --batch 1 --context 1000 \
        --prefill 8192 --steps 1
    grep -h "breakdown" "$OUT/prof8k.log"
    ;;
x)
    export DSV4_FP8_TMA=1
    DSV4_FP8_TMA_CLUSTER=1 run tmac_tests 90 .devbin/ops_cuda_tmac \
        --gtest_filter='CudaFp8.TmaGemm*:CudaFp8.GroupedProjection'
    DSV4_FP8_TMA_CLUSTER=1 run tmac_memcheck 100 compute-sanitizer --tool memcheck --error-exitcode 3 \
        .devbin/ops_cuda_tmac --gtest_filter='CudaFp8.TmaGemmWritesEveryOutputOnce'
    grep -h "ERROR SUMMARY" "$OUT/tmac_memcheck.log"
    run klin_one 60 .devbin/dsv4_tmac bench kernels --rows 2048,8192 --tokens 64 --json "$OUT/klin_one.json"
    DSV4_FP8_TMA_CLUSTER=1 run klin_two 60 .devbin/dsv4_tmac bench kernels --rows 2048,8192 --tokens 64 \
        --json "$OUT/klin_two.json"
    lin_lines "$OUT/klin_one.json"
    lin_lines "$OUT/klin_two.json"
    unset DSV4_FP8_TMA
    DSV4_SIDE_STREAM_PREFILL=1 run golden_side 60 .devbin/golden_cuda
    DSV4_SIDE_STREAM_PREFILL=1 run prefill_side 40 .devbin/dsv4 "${fast[@]}" --batch 1 --context 1000 \
        --prefill 2048,8192 --steps 1 --json "$OUT/prefill_side.json"
    grep -h "prefill" "$OUT/prefill_side.log"
    run ops 300 .devbin/ops_cuda
    ;;
r)  # the op suites x's ops run did not reach (pass the completed suites as a negative filter in FILTER)
    run ops_rest 400 .devbin/ops_cuda --gtest_filter="${FILTER:--}"
    ;;
esac
python3 tools/device/short_table.py "$OUT"
report "r60_$mode"
