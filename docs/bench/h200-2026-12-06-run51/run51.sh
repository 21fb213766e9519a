#!/usr/bin/env bash
# Device calls of 2026-12-06 (binaries of main). Usage: bash docs/bench/h200-2026-12-06-run51/run51.sh MODE
#   perf  : the tier tests, offline decode/prefill (issues 15/16), the WS kernel, per-op profile, full-flash tier (19)
#   serve : serving C1/C64 plain and C64 with MTP oracle drafts (issues 15/16/17), the batch-64 oracle offline
#   ttft  : issue 19's 380K host-tier TTFT
#   h100  : perf's kernels at 24 layers, when only an H100 is lent
#   gemv  : DSV4_EXPERT_GEMV_CHUNK / DSV4_FP8_GEMV_WARPS sweeps and the bit test (any GPU; decode at 24 layers on an
#           H100; run in call 8 with the binaries of cf57c4d, whose load-batch knob was dropped after it)
#   perf3 : perf2 cut to the budget left (call 14, H200); more: call 15 (H200)
#   perf2 : perf without the WS kernel (slower on the H100) plus the FP8 GEMV split A/B and serving C1/C64
# (every mode needs H200 memory: flash-160 is 102 GiB)
mode=$1
source tools/device/call_lib.sh
flash=(.devbin/dsv4 bench offline --preset flash --numerics fast)
fast=(.devbin/dsv4 bench offline --preset flash-160 --numerics fast)
case $mode in
perf)
    run dist 60 .devbin/golden_dist_cuda --gtest_filter='CudaExpertTier*'
    run bench 190 "${fast[@]}" --batch 1,8,64,256 --context 1000 --prefill 2048,8192 --steps 4 --json "$OUT/offline.json"
    DSV4_EXPERT_WS=1 run benchws 110 "${fast[@]}" --batch 64,256 --context 1000 --prefill 2048,8192 --steps 4 \
        --json "$OUT/offline_ws.json"
    DSV4_PROFILE_OPS=1 run profile 70 "${fast[@]}" --batch 1,8 --context 1000 --prefill 0 --steps 2 --json "$OUT/profile.json"
    run tierplace 150 "${flash[@]}" --gpu-experts 200 --synthetic-routing-skew 1 --expert-read-in-place-tokens 8 \
        --batch 1,64 --context 1000 --prefill 0 --steps 8 --json "$OUT/tierplace.json"
    ;;
h100)  # no H200: the same kernels' A/B at 24 of flash-160's 43 layers (57 GiB), shapes only, not the targets
    run dist 60 .devbin/golden_dist_cuda --gtest_filter='CudaExpertTier*'
    run bench 170 "${fast[@]}" --layers 24 --batch 1,8,64,256 --context 1000 --prefill 2048,8192 --steps 4 \
        --json "$OUT/offline.json"
    DSV4_EXPERT_WS=1 run benchws 110 "${fast[@]}" --layers 24 --batch 64,256 --context 1000 --prefill 2048,8192 \
        --steps 4 --json "$OUT/offline_ws.json"
    DSV4_PROFILE_OPS=1 run profile 70 "${fast[@]}" --layers 24 --batch 1,8 --context 1000 --prefill 0 --steps 2 \
        --json "$OUT/profile.json"
    ;;
perf2)  # H200: the tests changed since run50, main's offline figures, the FP8 GEMV split knob, full-flash tier, serving
    run bits 40 .devbin/ops_cuda --gtest_filter='CudaFp8.PerPairMma*:CudaFp8.Grouped*'
    run dist 50 .devbin/golden_dist_cuda --gtest_filter='CudaExpertTier*'
    run bench 150 "${fast[@]}" --batch 1,8,64,256 --context 1000 --prefill 2048,8192 --steps 4 --json "$OUT/offline.json"
    DSV4_FP8_GEMV_WARPS=1056 run warps1056 60 "${fast[@]}" --batch 1,8,64 --context 1000 --prefill 0 --steps 4 \
        --json "$OUT/warps1056.json"
    run base 60 "${fast[@]}" --batch 1,8,64 --context 1000 --prefill 0 --steps 4 --json "$OUT/base.json"
    run tierplace 130 "${flash[@]}" --gpu-experts 200 --synthetic-routing-skew 1 --expert-read-in-place-tokens 8 \
        --batch 1,64 --context 1000 --prefill 0 --steps 8 --json "$OUT/tierplace.json"
    run serve 170 tools/device/serve_bench.sh flash-160 "1 64"
    ;;
perf3)  # perf2 cut to the budget left: the tests, main's offline figures, serving C1/C64, the split knob A/B
    run bits 40 .devbin/ops_cuda --gtest_filter='CudaFp8.PerPairMma*:CudaFp8.Grouped*'
    run bench 130 "${fast[@]}" --batch 1,8,64,256 --context 1000 --prefill 2048,8192 --steps 4 --json "$OUT/offline.json"
    run serve 170 tools/device/serve_bench.sh flash-160 "1 64"
    DSV4_FP8_GEMV_WARPS=1056 run warps1056 50 "${fast[@]}" --batch 1,8,64 --context 1000 --prefill 0 --steps 4 \
        --json "$OUT/warps1056.json"
    run base 50 "${fast[@]}" --batch 1,8,64 --context 1000 --prefill 0 --steps 4 --json "$OUT/base.json"
    ;;
more)  # call 15 (run inline that day, the H200 still warm after perf3): C64 plain and MTP oracle 3, the full-flash
       # tier with skewed routing, the 380K TTFT with what was left of the budget (BUDGET=400)
    run serve_plain 100 tools/device/serve_bench.sh flash-160 "64"
    mv "$OUT/serve_c64.json" "$OUT/plain_c64.json"
    SPEC_CONFIG='{"method":"mtp","num_speculative_tokens":3,"oracle_acceptance_length":3,"draft_sample_method":"greedy"}' \
        run serve_spec 120 tools/device/serve_bench.sh flash-160 "64"
    run tierplace 120 "${flash[@]}" --gpu-experts 200 --synthetic-routing-skew 1 --expert-read-in-place-tokens 8 \
        --batch 1,64 --context 1000 --prefill 0 --steps 8 --json "$OUT/tierplace.json"
    EVICT_TOKENS=409600 FILLER_TOKENS=8192 run ttft 400 tools/device/tier_ttft.sh 380000 flash-160 1610612736 16
    cat "$OUT/tier_ttft.json" 2>/dev/null
    ;;
serve)
    run serve 170 tools/device/serve_bench.sh flash-160 "1 64"
    mv "$OUT/serve_c64.json" "$OUT/plain_c64.json"; mv "$OUT/serve_server.log" "$OUT/plain_server.log"
    SPEC_CONFIG='{"method":"mtp","num_speculative_tokens":3,"oracle_acceptance_length":3,"draft_sample_method":"greedy"}' \
        run serve_spec 250 tools/device/serve_bench.sh flash-160 "64"
    run oracle64 120 "${fast[@]}" --batch 64 --context 1000 --steps 4 --json "$OUT/oracle64.json" \
        --speculative-config '{"method":"mtp","num_speculative_tokens":3}' --oracle-acceptance 3
    ;;
ttft)  # A (380K) cold into a 1.5 GiB device state, 50 x 8K prompts evict it to the host tier, A again
    EVICT_TOKENS=409600 FILLER_TOKENS=8192 run ttft 570 tools/device/tier_ttft.sh 380000 flash-160 1610612736 16
    cat "$OUT/tier_ttft.json" 2>/dev/null
    ;;
esac
report "r51_$mode"
