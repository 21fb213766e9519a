#!/usr/bin/env bash
# Device calls of 2026-12-06, third session. Usage: bash docs/bench/h200-2026-12-06-run53/run53.sh MODE
# (H200 unless named: flash-160 is 102 GiB; LAYERS=24 fits it on an H100)
#   rs   : the register-weights kernel of the 16-token expert tiles (DSV4_EXPERT_RS): its tests, the expert kernel
#          bench and offline decode / prefill against the staged kernel, golden
#   order: the register-weights kernel's K orders (1: a lane's group spread over the steps; 2: a group a step; ran
#          twice on an H100; the group-a-step order was removed since, so DSV4_EXPERT_RS=2 is refused now)
#   main : main's offline figures (register weights on by default), the FP8 and MoE op tests, golden, memcheck of
#          the register-weights kernel's test
#   wide : the register-weights kernel's 64-token prefill tiles (DSV4_EXPERT_RS_WIDE) against the staged ones
#   next : main, then wide (one machine start)
#   tier : issue 19's 380K TTFT, then main's offline figures and the full flash with skewed and even routing
#   suite: the whole op suite and golden on this call's binaries
mode=$1
source tools/device/call_lib.sh
flash=(.devbin/dsv4 bench offline --preset flash --numerics fast)
fast=(.devbin/dsv4 bench offline --preset flash-160 --numerics fast)
# An H100 (80 GB) holds 24 of flash-160's 43 layers.
mem=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits | head -1)
((mem < 100000)) && LAYERS=${LAYERS:-24}
[[ -n ${LAYERS:-} ]] && fast+=(--layers "$LAYERS") && echo "LAYERS=$LAYERS"
expert_kernels() {  # NAME ENV...: the expert kernel bench at 8, 64, 256 tokens under the given environment
    local name=$1
    shift
    run "$name" 40 env "$@" .devbin/dsv4 bench kernels --rows 1 --tokens 8,64,256 --filter experts \
        --json "$OUT/$name.json"
}
decode() {  # NAME ENV...: offline B=8 / B=64 / B=256 decode under the given environment
    local name=$1
    shift
    run "$name" 60 env "$@" "${fast[@]}" --batch 8,64,256 --context 1000 --prefill 0 --steps 4 --json "$OUT/$name.json"
}
main_checks() {  # main's figures (register weights on by default), its FP8 and MoE op tests, golden, memcheck
    run bench 50 "${fast[@]}" --batch 1,8,64,256 --context 1000 --prefill 2048,8192 --steps 4 --json "$OUT/offline.json"
    run ops 100 .devbin/ops_cuda --gtest_filter='CudaFp8*:*Moe*'
    run golden 40 .devbin/golden_cuda
    run memcheck 70 compute-sanitizer --tool memcheck --error-exitcode 3 .devbin/ops_cuda \
        --gtest_filter='CudaFp8.GroupedRegister*'
    grep -h "ERROR SUMMARY" "$OUT/memcheck.log" 2>/dev/null
}
wide_tiles() {  # the register-weights kernel's 64-token prefill tiles (DSV4_EXPERT_RS_WIDE) against the staged ones
    run tests 90 .devbin/ops_cuda --gtest_filter='CudaFp8.GroupedRegister*'
    for v in 0 1; do
        run "kwide$v" 40 env DSV4_EXPERT_RS_WIDE=$v .devbin/dsv4 bench kernels --rows 1 --tokens 512,2048,8192 \
            --filter experts --json "$OUT/kwide$v.json"
    done
    for v in 0 1 0 1; do
        run "pre$v.$SECONDS" 40 env DSV4_EXPERT_RS_WIDE=$v "${fast[@]}" --batch 1 --context 1000 --prefill 2048,8192 \
            --steps 1 --json "$OUT/pre$v.$SECONDS.json"
    done
}
case $mode in
rs)
    run tests 60 .devbin/ops_cuda --gtest_filter='CudaFp8.Grouped*'
    for v in 0 1 0 1; do expert_kernels "kern_rs$v.$SECONDS" DSV4_EXPERT_RS=$v; done
    run kern_wide 60 .devbin/dsv4 bench kernels --rows 1 --tokens 2048,8192 --filter experts --json "$OUT/kern_wide.json"
    run prof_2k 60 env DSV4_PROFILE_OPS=1 "${fast[@]}" --batch 1 --context 1000 --prefill 2048 --steps 1
    for v in 0 1 0 1; do decode "dec_rs$v.$SECONDS" DSV4_EXPERT_RS=$v; done
    run golden 40 env DSV4_EXPERT_RS=1 .devbin/golden_cuda
    ;;
order)  # the register-weights kernel's two K orders (DSV4_EXPERT_RS=1 / 2) against the staged kernel (0)
    run tests 80 .devbin/ops_cuda --gtest_filter='CudaFp8.Grouped*'
    for v in 1 2; do expert_kernels "kern_rs$v" DSV4_EXPERT_RS=$v; done
    for v in 0 1 2 1 2; do decode "dec_rs$v.$SECONDS" DSV4_EXPERT_RS=$v; done
    ;;
main) main_checks ;;
wide) wide_tiles ;;
next) # both, in one call
    main_checks
    wide_tiles
    ;;
tier)
    EVICT_TOKENS=409600 FILLER_TOKENS=8192 run ttft 400 tools/device/tier_ttft.sh 380000 flash-160 1610612736 16
    cat "$OUT/tier_ttft.json" 2>/dev/null
    run bench 50 "${fast[@]}" --batch 1,8,64,256 --context 1000 --prefill 2048,8192 --steps 4 --json "$OUT/offline.json"
    run tier_skew 80 "${flash[@]}" --gpu-experts 200 --synthetic-routing-skew 1 --expert-read-in-place-tokens 8 \
        --batch 1,64 --context 1000 --prefill 0 --steps 8 --json "$OUT/tier_skew.json"
    run tier_even 80 "${flash[@]}" --gpu-experts 200 --expert-read-in-place-tokens 8 \
        --batch 1,64 --context 1000 --prefill 0 --steps 8 --json "$OUT/tier_even.json"
    ;;
suite)
    run ops 330 .devbin/ops_cuda
    run golden 40 .devbin/golden_cuda
    run dist 40 .devbin/golden_dist_cuda --gtest_filter='CudaExpertTier*'
    ;;
esac
python3 tools/device/short_table.py "$OUT"
report "r53_$mode"
