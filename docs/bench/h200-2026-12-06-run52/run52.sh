#!/usr/bin/env bash
# Device calls of 2026-12-06, second session. Usage: bash docs/bench/h200-2026-12-06-run52/run52.sh MODE
# (H200 unless named: flash-160 is 102 GiB; LAYERS=24 fits it on an H100)
#   h100 : the fetch-ahead variants (DSV4_EXPERT_AHEAD_UP / _DOWN of 0c23416, since reverted) in the expert kernel
#          bench and offline at 24 layers, golden, the op suite (ran on an H100, binaries of 0c23416)
#   probe: the L2 prefetch-size hint (DSV4_EXPERT_L2_PREFETCH) A/B, the FP8 tests, golden, ncu on the grouped kernel,
#          the op tests h100 did not reach (ran on an H100 with LAYERS=24, binaries of 07f6938)
#   tier : issue 19's 380K TTFT, then short's runs; short: main's offline figures, the full flash with skewed and even
#          routing (PCIe measured in each run), the grouped bits test; ttft: the TTFT alone
#   bench: main's offline figures alone
#   check: the hint's default flip on any GPU (LAYERS=24 on an H100): FP8 / MoE op tests, golden, tier tests, figures
mode=$1
source tools/device/call_lib.sh
flash=(.devbin/dsv4 bench offline --preset flash --numerics fast)
fast=(.devbin/dsv4 bench offline --preset flash-160 --numerics fast)
[[ -n ${LAYERS:-} ]] && fast+=(--layers "$LAYERS")  # an H100 holds 24 of flash-160's 43 layers
expert_kernels() {  # NAME ENV...: the expert kernel bench at 8, 64, 256 tokens under the given environment
    local name=$1
    shift
    run "$name" 40 env "$@" .devbin/dsv4 bench kernels --rows 1 --tokens 8,64,256 --filter experts \
        --json "$OUT/$name.json"
}
decode_prefill() {  # NAME ENV...: offline B=64 / B=256 decode and 2K / 8K prefill under the given environment
    local name=$1
    shift
    run "$name" 60 env "$@" "${fast[@]}" --batch 64,256 --context 1000 --prefill 2048,8192 --steps 4 \
        --json "$OUT/$name.json"
}
ttft() {  # A (380K) cold into a 1.5 GiB device state, 50 x 8K prompts evict it to the host tier, A again
    EVICT_TOKENS=409600 FILLER_TOKENS=8192 run ttft "$1" tools/device/tier_ttft.sh 380000 flash-160 1610612736 16
    cat "$OUT/tier_ttft.json" 2>/dev/null
}
figures_and_tiers() {
    run bench 50 "${fast[@]}" --batch 1,8,64,256 --context 1000 --prefill 2048,8192 --steps 4 --json "$OUT/offline.json"
    run tier_skew 80 "${flash[@]}" --gpu-experts 200 --synthetic-routing-skew 1 --expert-read-in-place-tokens 8 \
        --batch 1,64 --context 1000 --prefill 0 --steps 8 --json "$OUT/tier_skew.json"
    run tier_even 80 "${flash[@]}" --gpu-experts 200 --expert-read-in-place-tokens 8 \
        --batch 1,64 --context 1000 --prefill 0 --steps 8 --json "$OUT/tier_even.json"
    run bits 30 .devbin/ops_cuda --gtest_filter='CudaFp8.Grouped*'
}
case $mode in
h100)
    for v in 11 22 23 13 21; do
        expert_kernels "kern_$v" DSV4_EXPERT_AHEAD_UP="${v:0:1}" DSV4_EXPERT_AHEAD_DOWN="${v:1:1}"
    done
    for v in 11 22 23; do
        decode_prefill "dec_$v" DSV4_EXPERT_AHEAD_UP="${v:0:1}" DSV4_EXPERT_AHEAD_DOWN="${v:1:1}"
    done
    run golden 40 .devbin/golden_cuda
    run ops 300 .devbin/ops_cuda
    ;;
probe)
    for p in 0 128 256; do expert_kernels "kern_l2_$p" DSV4_EXPERT_L2_PREFETCH=$p; done
    for p in 0 256 128; do decode_prefill "dec_l2_$p" DSV4_EXPERT_L2_PREFETCH=$p; done
    run ops 60 .devbin/ops_cuda --gtest_filter='CudaFp8*'
    run golden 40 .devbin/golden_cuda
    run ncu 90 ncu --clock-control none --section SpeedOfLight --section Occupancy --section LaunchStats \
        --section WarpStateStats --section MemoryWorkloadAnalysis --section SchedulerStats --csv --page details \
        --kernel-name regex:expert_gemm_fp8 --launch-count 2 .devbin/dsv4 bench kernels --rows 1 --tokens 64 \
        --filter experts
    run shapes 200 .devbin/ops_cuda --gtest_filter='Shapes/CudaGemvStream.*:Shapes/CudaLinear.*:Shapes/CudaMoeDecode.*'
    ;;
check)  # the hint's default flip (df37e0e) on any GPU: the FP8 and MoE op tests, golden, the tier tests, the figures
    run ops 80 .devbin/ops_cuda --gtest_filter='CudaFp8*:*Moe*'
    run golden 40 .devbin/golden_cuda
    run dist 40 .devbin/golden_dist_cuda --gtest_filter='CudaExpertTier*'
    run bench 50 "${fast[@]}" --batch 1,8,64,256 --context 1000 --prefill 2048,8192 --steps 4 --json "$OUT/offline.json"
    ;;
bench)  # main's offline figures alone
    run bench 70 "${fast[@]}" --batch 1,8,64,256 --context 1000 --prefill 2048,8192 --steps 4 --json "$OUT/offline.json"
    ;;
tier)
    ttft 400
    figures_and_tiers
    ;;
short) figures_and_tiers ;;
ttft) ttft 570 ;;
esac
python3 tools/device/short_table.py "$OUT"
report "r52_$mode"
