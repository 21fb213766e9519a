#!/usr/bin/env bash
# Device calls of 2026-12-06, second session. Usage: bash docs/bench/h200-2026-12-06-run52/run52.sh MODE
# (H200 unless named: flash-160 is 102 GiB; LAYERS=24 fits it on an H100)
#   explore: fetch-ahead variants (DSV4_EXPERT_AHEAD_UP / _DOWN, binaries of 0c23416, since reverted) in the expert
#            kernel bench and offline decode, the drafter's per-op profile, the op suite and golden (never came)
#   h100   : explore's kernels at 24 layers and the suites (H100, binaries of 0c23416)
#   probe  : the L2 prefetch-size hint (DSV4_EXPERT_L2_PREFETCH) A/B, the FP8 tests, golden, ncu on the grouped
#            kernel, the op tests h100 did not reach (H100, LAYERS=24, binaries of 07f6938)
#   tier   : issue 19 (the 380K TTFT, the full flash with skewed and even routing), main's offline figures
#   rest, ttft, final: parts of the above for other calls
mode=$1
source tools/device/call_lib.sh
flash=(.devbin/dsv4 bench offline --preset flash --numerics fast)
fast=(.devbin/dsv4 bench offline --preset flash-160 --numerics fast)
[[ -n ${LAYERS:-} ]] && fast+=(--layers "$LAYERS")  # an H100 holds 24 of flash-160's 43 layers
variants=("1 1" "2 2" "2 3" "1 3" "2 1")
case $mode in
explore)
    for v in "${variants[@]}"; do
        read -r up down <<<"$v"
        DSV4_EXPERT_AHEAD_UP=$up DSV4_EXPERT_AHEAD_DOWN=$down run "kern_${up}${down}" 40 .devbin/dsv4 bench kernels \
            --rows 1 --tokens 8,64,256 --filter experts --json "$OUT/kern_${up}${down}.json"
    done
    for v in "1 1" "2 2" "2 3"; do
        read -r up down <<<"$v"
        DSV4_EXPERT_AHEAD_UP=$up DSV4_EXPERT_AHEAD_DOWN=$down run "dec_${up}${down}" 60 "${fast[@]}" --batch 64,256 \
            --context 1000 --prefill 2048,8192 --steps 4 --json "$OUT/dec_${up}${down}.json"
    done
    DSV4_PROFILE_OPS=1 run draftprof 60 "${fast[@]}" --batch 64 --context 1000 --steps 2 --json "$OUT/draftprof.json" \
        --speculative-config '{"method":"mtp","num_speculative_tokens":3}' --oracle-acceptance 3
    run golden 60 .devbin/golden_cuda
    run ops 300 .devbin/ops_cuda
    ;;
h100)  # no H200: explore's kernels at 24 of flash-160's 43 layers (57 GiB) and the suites (correctness: same sm_90a)
    for v in "${variants[@]}"; do
        read -r up down <<<"$v"
        DSV4_EXPERT_AHEAD_UP=$up DSV4_EXPERT_AHEAD_DOWN=$down run "kern_${up}${down}" 40 .devbin/dsv4 bench kernels \
            --rows 1 --tokens 8,64,256 --filter experts --json "$OUT/kern_${up}${down}.json"
    done
    for v in "1 1" "2 2" "2 3"; do
        read -r up down <<<"$v"
        DSV4_EXPERT_AHEAD_UP=$up DSV4_EXPERT_AHEAD_DOWN=$down run "dec_${up}${down}" 50 "${fast[@]}" --layers 24 \
            --batch 64,256 --context 1000 --prefill 2048,8192 --steps 4 --json "$OUT/dec_${up}${down}.json"
    done
    run golden 40 .devbin/golden_cuda
    run ops 300 .devbin/ops_cuda
    ;;
tier)  # issue 19's 380K TTFT, main's offline figures, the full flash with skewed and even routing (PCIe in each run)
    EVICT_TOKENS=409600 FILLER_TOKENS=8192 run ttft 400 tools/device/tier_ttft.sh 380000 flash-160 1610612736 16
    cat "$OUT/tier_ttft.json" 2>/dev/null
    run bench 50 "${fast[@]}" --batch 1,8,64,256 --context 1000 --prefill 2048,8192 --steps 4 --json "$OUT/offline.json"
    run tier_skew 80 "${flash[@]}" --gpu-experts 200 --synthetic-routing-skew 1 --expert-read-in-place-tokens 8 \
        --batch 1,64 --context 1000 --prefill 0 --steps 8 --json "$OUT/tier_skew.json"
    run tier_even 80 "${flash[@]}" --gpu-experts 200 --expert-read-in-place-tokens 8 \
        --batch 1,64 --context 1000 --prefill 0 --steps 8 --json "$OUT/tier_even.json"
    run bits 30 .devbin/ops_cuda --gtest_filter='CudaFp8.Grouped*'
    ;;
short)  # tier without the TTFT (the budget left): main's offline figures, the full flash skewed and even, the bits
    run bench 50 "${fast[@]}" --batch 1,8,64,256 --context 1000 --prefill 2048,8192 --steps 4 --json "$OUT/offline.json"
    run tier_skew 80 "${flash[@]}" --gpu-experts 200 --synthetic-routing-skew 1 --expert-read-in-place-tokens 8 \
        --batch 1,64 --context 1000 --prefill 0 --steps 8 --json "$OUT/tier_skew.json"
    run tier_even 80 "${flash[@]}" --gpu-experts 200 --expert-read-in-place-tokens 8 \
        --batch 1,64 --context 1000 --prefill 0 --steps 8 --json "$OUT/tier_even.json"
    run bits 30 .devbin/ops_cuda --gtest_filter='CudaFp8.Grouped*'
    ;;
rest)  # the op tests the H100 call's 300 s did not reach, the FP8 tests and golden on main's binaries, and where the
       # grouped W4A8 kernel's time goes at batch 64 (ncu: occupancy, stalls, memory; clocks left alone)
    run ops 250 .devbin/ops_cuda --gtest_filter='CudaFp8*:Shapes/CudaGemvStream.*:Shapes/CudaLinear.*:Shapes/CudaMoeDecode.*'
    run golden 40 .devbin/golden_cuda
    run ncu 120 ncu --clock-control none --section SpeedOfLight --section Occupancy --section LaunchStats \
        --section WarpStateStats --section MemoryWorkloadAnalysis --section SchedulerStats --csv --page details \
        --kernel-name regex:expert_gemm_fp8 --launch-count 2 .devbin/dsv4 bench kernels --rows 1 --tokens 64 \
        --filter experts
    ;;
probe)  # the grouped W4A8 kernel's L2 prefetch-size hint (DSV4_EXPERT_L2_PREFETCH), the FP8 tests and golden on
        # these binaries, ncu on the kernel at batch 64, then the op tests the H100 call did not reach
    for p in 0 128 256; do
        DSV4_EXPERT_L2_PREFETCH=$p run "kern_l2_$p" 40 .devbin/dsv4 bench kernels --rows 1 --tokens 8,64,256 \
            --filter experts --json "$OUT/kern_l2_$p.json"
    done
    for p in 0 256 128; do
        DSV4_EXPERT_L2_PREFETCH=$p run "dec_l2_$p" 60 "${fast[@]}" --batch 64,256 --context 1000 \
            --prefill 2048,8192 --steps 4 --json "$OUT/dec_l2_$p.json"
    done
    run ops 60 .devbin/ops_cuda --gtest_filter='CudaFp8*'
    run golden 40 .devbin/golden_cuda
    run ncu 90 ncu --clock-control none --section SpeedOfLight --section Occupancy --section LaunchStats \
        --section WarpStateStats --section MemoryWorkloadAnalysis --section SchedulerStats --csv --page details \
        --kernel-name regex:expert_gemm_fp8 --launch-count 2 .devbin/dsv4 bench kernels --rows 1 --tokens 64 \
        --filter experts
    run shapes 200 .devbin/ops_cuda --gtest_filter='Shapes/CudaGemvStream.*:Shapes/CudaLinear.*:Shapes/CudaMoeDecode.*'
    ;;
ttft)  # A (380K) cold into a 1.5 GiB device state, 50 x 8K prompts evict it to the host tier, A again
    EVICT_TOKENS=409600 FILLER_TOKENS=8192 run ttft 570 tools/device/tier_ttft.sh 380000 flash-160 1610612736 16
    cat "$OUT/tier_ttft.json" 2>/dev/null
    ;;
final)
    export DSV4_EXPERT_AHEAD_UP=${UP:-1} DSV4_EXPERT_AHEAD_DOWN=${DOWN:-1}
    run bench 130 "${fast[@]}" --batch 1,8,64,256 --context 1000 --prefill 2048,8192 --steps 4 --json "$OUT/offline.json"
    run serve 120 tools/device/serve_bench.sh flash-160 "64"
    SPEC_CONFIG='{"method":"mtp","num_speculative_tokens":3,"oracle_acceptance_length":3,"draft_sample_method":"greedy"}' \
        run serve_spec 120 tools/device/serve_bench.sh flash-160 "64"
    run tier_skew 100 "${flash[@]}" --gpu-experts 200 --synthetic-routing-skew 1 --expert-read-in-place-tokens 8 \
        --batch 1,64 --context 1000 --prefill 0 --steps 8 --json "$OUT/tier_skew.json"
    run tier_even 100 "${flash[@]}" --gpu-experts 200 --expert-read-in-place-tokens 8 \
        --batch 1,64 --context 1000 --prefill 0 --steps 8 --json "$OUT/tier_even.json"
    for i in 1 2; do
        run "w2112_$i" 35 "${fast[@]}" --batch 1,8 --context 1000 --prefill 0 --steps 4 --json "$OUT/w2112_$i.json"
        DSV4_FP8_GEMV_WARPS=1056 run "w1056_$i" 35 "${fast[@]}" --batch 1,8 --context 1000 --prefill 0 --steps 4 \
            --json "$OUT/w1056_$i.json"
    done
    ;;
esac
# The short table: tok/s per decode batch of every offline JSON, and the expert kernel rows.
python3 - "$OUT" <<'PY' 2>/dev/null
import glob, json, os, sys
for f in sorted(glob.glob(os.path.join(sys.argv[1], "*.json"))):
    try:
        j = json.load(open(f))
    except Exception:
        continue
    name = os.path.basename(f)[:-5]
    for r in j.get("decode", []):
        print(f"{name:12s} decode B={r.get('batch')} tok/s={r.get('tok_per_s', 0):.1f} step={r.get('step_ms', 0):.2f}")
    for r in j.get("prefill", []):
        print(f"{name:12s} prefill {r.get('tokens')} tok/s={r.get('tok_per_s', 0):.0f}")
    for r in j.get("rows", []):
        if "experts" in r.get("op", ""):
            print(f"{name:12s} {r['path']:22s} n={r['m']:4d} us={r['us']:9.1f} copy={100 * r['copy_fraction']:.1f}%")
PY
report "r52_$mode"
