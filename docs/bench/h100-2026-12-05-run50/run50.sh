#!/usr/bin/env bash
# Device call for branch next/device-50 (= main 2aa2036 + next/prefill). Usage: bash .devpack/run50.sh MODE
#   tier : issue 19 (full flash, expert tier, in-place reads) + device verification probes   [needs H200 memory]
#   gate : the merge gate of next/prefill: golden + the whole op suite
#   perf : offline bench (issues 15/16), profile (nodes/layer), oracle64 (issue 17), serving C1/C64
mode=$1
source tools/device/call_lib.sh
flash=(.devbin/dsv4 bench offline --preset flash --numerics fast)
fast=(.devbin/dsv4 bench offline --preset flash-160 --numerics fast)
case $mode in
tier)
    run dist 150 .devbin/golden_dist_cuda --gtest_filter='CudaExpertTier*'
    run tierplace 260 "${flash[@]}" --gpu-experts 200 --synthetic-routing-skew 1 --expert-read-in-place-tokens 8 \
        --batch 1,8,64 --context 1000 --prefill 0 --steps 12 --json "$OUT/tierplace.json"
    run tiermax 200 "${flash[@]}" --gpu-experts 222 --gpu-memory-utilization 0.97 --synthetic-routing-skew 1 \
        --expert-read-in-place-tokens 8 --batch 1,8 --context 1000 --prefill 0 --steps 12 --json "$OUT/tiermax.json"
    ;;
gate)
    run golden 60 .devbin/golden_cuda
    run ops 480 .devbin/ops_cuda
    ;;
perf)
    run bench 200 "${fast[@]}" --batch 1,8,64,256 --context 1000 --prefill 2048,8192 --steps 4 --json "$OUT/offline.json"
    DSV4_EXPERT_WS=1 run benchws 100 "${fast[@]}" --batch 64 --context 1000 --prefill 8192 --steps 4 --json "$OUT/offline_ws.json"
    DSV4_PROFILE_OPS=1 run profile 90 "${fast[@]}" --batch 1,8,64 --context 1000 --prefill 0 --steps 2 --json "$OUT/profile.json"
    run oracle64 120 "${fast[@]}" --batch 64 --context 1000 --steps 4 --json "$OUT/oracle64.json" \
        --speculative-config '{"method":"mtp","num_speculative_tokens":3}' --oracle-acceptance 3
    run serve 150 tools/device/serve_bench.sh flash-160 "1 64"
    ;;
combo)  # one call for all: decode/prefill (issues 15, 16), the WS kernel, the tier (19), serving C1/C64
    run dist 60 .devbin/golden_dist_cuda --gtest_filter='CudaExpertTier*'
    run bench 170 "${fast[@]}" --batch 1,8,64 --context 1000 --prefill 2048,8192 --steps 4 --json "$OUT/offline.json"
    DSV4_EXPERT_WS=1 run benchws 90 "${fast[@]}" --batch 64 --context 1000 --prefill 8192 --steps 4 --json "$OUT/offline_ws.json"
    run tierplace 180 "${flash[@]}" --gpu-experts 200 --synthetic-routing-skew 1 --expert-read-in-place-tokens 8 \
        --batch 1,64 --context 1000 --prefill 0 --steps 8 --json "$OUT/tierplace.json"
    run serve 150 tools/device/serve_bench.sh flash-160 "1 64"
    ;;
spec)  # issue 17: C64 serving with and without speculation (oracle acceptance length 3), the seeds' protocol
    run serve_plain 220 tools/device/serve_bench.sh flash-160 "64"
    mv "$OUT/serve_c64.json" "$OUT/plain_c64.json"; mv "$OUT/serve_server.log" "$OUT/plain_server.log"
    SPEC_CONFIG='{"method":"mtp","num_speculative_tokens":3,"oracle_acceptance_length":3,"draft_sample_method":"greedy"}' \
        run serve_spec 250 tools/device/serve_bench.sh flash-160 "64"
    ;;
ttft)  # A (380K) cold into a 1.5 GiB device state, 50 x 8K prompts evict it to the host tier, A again
    EVICT_TOKENS=409600 FILLER_TOKENS=8192 run ttft 570 tools/device/tier_ttft.sh 380000 flash-160 1610612736 16
    cat "$OUT/tier_ttft.json" 2>/dev/null
    ;;
esac
report "r50_$mode"
