#!/usr/bin/env bash
# Device calls of 2026-12-07 (eighth session). Usage: BUDGET=S bash docs/bench/h200-2026-12-07-run58/run58.sh MODE
# .devbin: .devpack/dev94 (dsv4, ops_cuda, golden_cuda of main with the TMA-fed warp-specialized FP8 GEMM behind
# LinearPath::kFp8Wgmma with DSV4_FP8_TMA=1 and the TMA expert GEMMs over e4m3 copies behind DSV4_EXPERT_TMA=1, both
# off by default, and --batch-invariant (DSV4_BATCH_INVARIANT=1): main's default figures are main's).
#   a : the FP8 op tests (both TMA kernels' among them); the FP8 linears and grouped experts on every path against
#       the ceilings at M = 256, 2,048, 8,192, the experts again with DSV4_EXPERT_TMA=1; main's offline figures
#       (flash-160, B = 1 / 8 / 64 / 256, prefill 2K / 8K at the default chunk), prefill again with the TMA experts;
#       golden
#   b : serving C1 / C64 with main's defaults; the whole op suite
#   c : memcheck of the TMA kernels' tests; decode and prefill with DSV4_BATCH_INVARIANT=1 (the option's cost)
#   one: (the one call the session's device time allowed) the FP8 op tests; golden (with the batch-invariance engine
#       test); FP8 linears and experts (staged / TMA) against the ceilings at M = 2,048 / 8,192; prefill 2K / 8K staged
#       and TMA; batch-1 / batch-8 decode with and without DSV4_BATCH_INVARIANT=1
#   h : (the H100, while no H200 comes) the FP8 op tests; the linears and experts (staged / TMA) in the kernel bench;
#       prefill 2K / 8K staged and TMA (24 layers)
mode=$1
source tools/device/call_lib.sh
source tools/device/offline_lib.sh
source tools/device/report_lines.sh
case $mode in
a)
    run fp8_ops 150 .devbin/ops_cuda --gtest_filter='*CudaFp8*'
    run klin 100 .devbin/dsv4 bench kernels --rows 256,2048,8192 --tokens 512,2048,8192 --json "$OUT/klin.json"
    lin_lines "$OUT/klin.json"
    DSV4_EXPERT_TMA=1 run kexp_tma 50 .devbin/dsv4 bench kernels --rows 1 --tokens 512,2048,8192 --filter experts \
        --json "$OUT/kexp_tma.json"
    grep -h "experts" "$OUT/klin.log" "$OUT/kexp_tma.log" | grep -v "^ "
    run bench 120 .devbin/dsv4 "${fast[@]}" --batch 1,8,64,256 --context 1000 --prefill 2048,8192 --steps 4 \
        --json "$OUT/offline.json"
    DSV4_EXPERT_TMA=1 run bench_tma 70 .devbin/dsv4 "${fast[@]}" --batch 1 --context 1000 --prefill 2048,8192 \
        --steps 1 --json "$OUT/offline_tma.json"
    grep -h "prefill" "$OUT/bench.log" "$OUT/bench_tma.log" | head -8
    run golden 60 .devbin/golden_cuda
    ;;
b)
    SERVER_FLAGS="$cut" run serve 200 tools/device/serve_bench.sh flash-160 "1 64"
    serve_lines
    run ops 330 .devbin/ops_cuda
    ;;
one)
    run fp8_ops 150 .devbin/ops_cuda --gtest_filter='*CudaFp8*'
    run golden 70 .devbin/golden_cuda
    DSV4_FP8_TMA=1 run klin 90 .devbin/dsv4 bench kernels --rows 2048,8192 --tokens 2048,8192 --json "$OUT/klin.json"
    lin_lines "$OUT/klin.json"
    DSV4_EXPERT_TMA=1 run kexp_tma 40 .devbin/dsv4 bench kernels --rows 1 --tokens 2048,8192 --filter experts \
        --json "$OUT/kexp_tma.json"
    grep -h "experts" "$OUT/klin.log" "$OUT/kexp_tma.log" | grep -v "^ "
    run pre 60 .devbin/dsv4 "${fast[@]}" --batch 1,8 --context 1000 --prefill 2048,8192 --steps 4 --json "$OUT/pre.json"
    DSV4_EXPERT_TMA=1 run pre_tma 50 .devbin/dsv4 "${fast[@]}" --batch 1 --context 1000 --prefill 2048,8192 \
        --steps 1 --json "$OUT/pre_tma.json"
    DSV4_BATCH_INVARIANT=1 run dec_inv 50 .devbin/dsv4 "${fast[@]}" --batch 1,8 --context 1000 --prefill 0 \
        --steps 4 --json "$OUT/dec_inv.json"
    grep -h "tok/s" "$OUT/pre.log" "$OUT/pre_tma.log" "$OUT/dec_inv.log" | head -16
    ;;
h)
    run fp8_ops 150 .devbin/ops_cuda --gtest_filter='*CudaFp8*'
    run klin 100 .devbin/dsv4 bench kernels --rows 2048,8192 --tokens 512,2048,8192 --json "$OUT/klin.json"
    lin_lines "$OUT/klin.json"
    DSV4_EXPERT_TMA=1 run kexp_tma 50 .devbin/dsv4 bench kernels --rows 1 --tokens 512,2048,8192 --filter experts \
        --json "$OUT/kexp_tma.json"
    grep -h "experts" "$OUT/klin.log" "$OUT/kexp_tma.log" | grep -v "^ "
    run pre 70 .devbin/dsv4 "${fast[@]}" --batch 1 --context 1000 --prefill 2048,8192 --steps 1 --json "$OUT/pre.json"
    DSV4_EXPERT_TMA=1 run pre_tma 70 .devbin/dsv4 "${fast[@]}" --batch 1 --context 1000 --prefill 2048,8192 \
        --steps 1 --json "$OUT/pre_tma.json"
    grep -h "prefill" "$OUT/pre.log" "$OUT/pre_tma.log" | head -8
    ;;
c)
    run tma_memcheck 200 compute-sanitizer --tool memcheck --error-exitcode 3 .devbin/ops_cuda \
        --gtest_filter='CudaFp8.TmaGemmWritesEveryOutputOnce:CudaFp8.GroupedProjection:CudaFp8.GroupedTma*'
    grep -h "ERROR SUMMARY" "$OUT/tma_memcheck.log" 2>/dev/null
    DSV4_BATCH_INVARIANT=1 run bench_inv 100 .devbin/dsv4 "${fast[@]}" --batch 1,8,64 --context 1000 \
        --prefill 2048,8192 --steps 4 --json "$OUT/offline_invariant.json"
    grep -h "tok/s" "$OUT/bench_inv.log" | head -12
    ;;
esac
python3 tools/device/short_table.py "$OUT"
report "r58_$mode"
