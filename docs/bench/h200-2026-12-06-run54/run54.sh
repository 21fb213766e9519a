#!/usr/bin/env bash
# Device calls of 2026-12-06, fourth session. Usage: BUDGET=S bash docs/bench/h200-2026-12-06-run54/run54.sh MODE
# (H200: flash-160 is 102 GiB; LAYERS=24 fits it on an H100)
#   first: the register-weights kernel's 64-token prefill tiles (DSV4_EXPERT_RS_WIDE) against the staged ones (tests,
#          kernel bench 512-8192 tokens, 2K / 8K prefill alternated, with the mHC change's A/B), the 8K prefill's
#          op profile, ncu of every prefill kernel at 8K (4 layers), the FP8 linears at M 2048 / 8192
#   probe: ncu of the staged wide W4A8 tiles at 8192 tokens (details and SASS stall counts), the mHC op tests
#   ws   : the warp-specialized W4A8 kernel (two producer warpgroups) against the staged one: tests, kernel bench,
#          2K / 8K prefill alternated
#   half : the down projection's 48-token tiles, two blocks an SM (DSV4_EXPERT_HALF_WIDE): tests, kernel bench,
#          prefill alternated, the 8K op profile
#   check: head's FP8 / MoE / mHC op tests and golden, 8K prefill at 2,048 / 8,192-token chunks, batch-1 oracles
#   shared: the W4A8 kernels' shared-memory accesses (align_shared_1024) against dsv4_old: tests, kernel bench,
#          decode B=64 / 256 and 2K / 8K prefill alternated
#   serve: the serving protocol C1 / C64 at the default token budget and at 8,192 (the prefill chunk's trade-off)
#   ncuws: ncu of the warp-specialized kernel at 8192 tokens
#   second: main's offline figures, issue 17's batch-1 oracle ratios, the FP8 / MoE / mHC op tests, golden, memcheck
#          of the register-weights kernel's tests
mode=$1
source tools/device/call_lib.sh
fast=(.devbin/dsv4 bench offline --preset flash-160 --numerics fast)
mem=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits | head -1)
((mem < 100000)) && LAYERS=${LAYERS:-24}
[[ -n ${LAYERS:-} ]] && fast+=(--layers "$LAYERS") && echo "LAYERS=$LAYERS"
oracle() {  # K L: batch-1 speculative decode with K MTP drafts accepted at oracle length L, and the plain step
    run "oracle$1" 60 "${fast[@]}" --batch 1 --context 1000 --steps 8 --json "$OUT/oracle$1.json" \
        --speculative-config "{\"method\":\"mtp\",\"num_speculative_tokens\":$1}" --oracle-acceptance "$2"
}
knob_ab() {  # NAME VAR TOKENS: the expert kernel bench at TOKENS with VAR=0 / 1, then 2K / 8K prefill alternated
    local name=$1 var=$2 tokens=$3 v
    for v in 0 1; do
        run "k$name$v" 40 env "$var=$v" .devbin/dsv4 bench kernels --rows 1 --tokens "$tokens" --filter experts \
            --json "$OUT/k$name$v.json"
    done
    for v in 0 1 0 1; do
        run "pre_$name$v.$SECONDS" 40 env "$var=$v" "${fast[@]}" --batch 1 --context 1000 --prefill 2048,8192 \
            --steps 1 --json "$OUT/pre_$name$v.$SECONDS.json"
    done
}
first() {
    run tests 60 .devbin/ops_cuda --gtest_filter='CudaFp8.GroupedRegister*'
    for v in 0 1; do
        run "kwide$v" 40 env DSV4_EXPERT_RS_WIDE=$v .devbin/dsv4 bench kernels --rows 1 --tokens 512,2048,8192 \
            --filter experts --json "$OUT/kwide$v.json"
    done
    # 2K / 8K prefill: staged wide tiles (w0), register wide tiles (w1), and w1 with the mHC tiles' finish at once
    # (dsv4_mhc: head + that change), alternated
    for v in w0 w1 mhc w0 w1 mhc; do
        local bin=.devbin/dsv4 wide=1
        [[ $v == mhc ]] && bin=.devbin/dsv4_mhc
        [[ $v == w0 ]] && wide=0
        run "pre_$v.$SECONDS" 40 env DSV4_EXPERT_RS_WIDE=$wide "$bin" "${fast[@]:1}" --batch 1 --context 1000 \
            --prefill 2048,8192 --steps 1 --json "$OUT/pre_$v.$SECONDS.json"
    done
    run prof_8k 60 env DSV4_PROFILE_OPS=1 DSV4_EXPERT_RS_WIDE=1 "${fast[@]}" --batch 1 --context 1000 --prefill 8192 \
        --steps 1
    # Every prefill kernel's duration at 8K (4 layers: two window, one CSA, one HCA; the build's fill kernels left out)
    run ncupre 150 ncu --clock-control none --section SpeedOfLight --section LaunchStats --section Occupancy \
        --section WarpStateStats --csv --page details --kernel-name-base function \
        --kernel-name regex:'^(?!.*(fill_|expand_block))' --launch-count 400 env DSV4_EXPERT_RS_WIDE=1 .devbin/dsv4 bench offline \
        --preset flash-160 --numerics fast --layers 4 --batch 1 --context 1000 --prefill 8192 --steps 1 --enforce-eager &&
        python3 tools/device/ncu_summary.py "$OUT/ncupre.log" >"$OUT/ncupre.txt"
    run klin 60 .devbin/dsv4 bench kernels --rows 2048,8192 --tokens 8192 --json "$OUT/klin.json"
}
case $mode in
first) first ;;
probe)  # where the staged wide W4A8 tiles spend a K block (8192 tokens: up BN 64 MB 2, down BN 128), the mHC tests
    run ops 60 .devbin/ops_cuda --gtest_filter='*Mhc*:*Fused*:*HcBoundary*'
    run ncuk 120 ncu --clock-control none --section SpeedOfLight --section Occupancy --section WarpStateStats \
        --section SchedulerStats --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis --csv \
        --page details --kernel-name regex:expert_gemm_fp8 --launch-count 2 .devbin/dsv4 bench kernels --rows 1 \
        --tokens 8192 --filter experts
    run ncusrc 150 ncu --clock-control none --section SourceCounters --kernel-name regex:expert_gemm_fp8 \
        --launch-count 2 --page source --print-source sass --csv .devbin/dsv4 bench kernels --rows 1 --tokens 8192 \
        --filter experts &&
        python3 tools/device/ncu_source_summary.py "$OUT/ncusrc.log" >"$OUT/ncusrc.txt"
    cp "$OUT/ncusrc.txt" /dev/stdout 2>/dev/null | head -80
    ;;
ws)  # the warp-specialized W4A8 kernel with two producer warpgroups (DSV4_EXPERT_WS) against the staged one
    run tests 90 .devbin/ops_cuda --gtest_filter='CudaFp8.GroupedWarpSpecialized*:CudaFp8.GroupedExperts*'
    knob_ab ws DSV4_EXPERT_WS 64,512,2048,8192
    ;;
half)  # the down projection's 48-token tiles two blocks an SM (DSV4_EXPERT_HALF_WIDE) against the 128-token ones
    run tests 120 .devbin/ops_cuda --gtest_filter='CudaFp8.Grouped*'
    knob_ab half DSV4_EXPERT_HALF_WIDE 512,2048,8192
    run prof_half 40 env DSV4_PROFILE_OPS=1 DSV4_EXPERT_HALF_WIDE=1 "${fast[@]}" --batch 1 --context 1000 \
        --prefill 8192 --steps 1
    ;;
check)  # head on any GPU: the FP8 / MoE / mHC op tests, golden, prefill at 2,048- and 8,192-token chunks, oracles
    run ops 150 .devbin/ops_cuda --gtest_filter='CudaFp8*:*Moe*:*Mhc*:*Fused*:*HcPostPre*'
    run golden 40 .devbin/golden_cuda
    for c in 2048 8192; do
        run "chunk$c" 40 "${fast[@]}" --batch 1 --context 1000 --prefill 8192 --prefill-chunk $c --steps 1 \
            --json "$OUT/chunk$c.json"
    done
    oracle 3 3
    oracle 7 5.6
    ;;
shared)  # the W4A8 kernels' shared-memory accesses as shared (LDS / STS): head (dsv4) against dsv4_old (e34b3c4)
    run tests 120 .devbin/ops_cuda --gtest_filter='CudaFp8.Grouped*'
    for b in old new; do
        bin=.devbin/dsv4
        [[ $b == old ]] && bin=.devbin/dsv4_old
        run "kshared_$b" 40 "$bin" bench kernels --rows 1 --tokens 64,256,2048,8192 --filter experts \
            --json "$OUT/kshared_$b.json"
    done
    for b in old new old new; do
        bin=.devbin/dsv4
        [[ $b == old ]] && bin=.devbin/dsv4_old
        run "ab_$b.$SECONDS" 60 "$bin" "${fast[@]:1}" --batch 64,256 --context 1000 --prefill 2048,8192 --steps 4 \
            --json "$OUT/ab_$b.$SECONDS.json"
    done
    ;;
serve)  # the seeds' serving protocol C1 / C64 with the default token budget and with 8,192 tokens a step (H200)
    run serve 200 tools/device/serve_bench.sh flash-160 "1 64"
    for f in "$OUT"/serve_c*.json; do mv "$f" "${f%.json}_budget2048.json"; done
    SERVER_FLAGS="--max-num-batched-tokens 8192 --long-prefill-token-threshold 8192" \
        run serve8k 200 tools/device/serve_bench.sh flash-160 "1 64"
    ;;
ncuws)  # the warp-specialized kernel under ncu at 8192 tokens (details, then SASS stall counts)
    run ncuk 120 env DSV4_EXPERT_WS=1 ncu --clock-control none --section SpeedOfLight --section WarpStateStats \
        --section SchedulerStats --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis --csv \
        --page details --kernel-name regex:expert_gemm_ws --launch-count 2 .devbin/dsv4 bench kernels --rows 1 \
        --tokens 8192 --filter experts
    run ncusrc 150 env DSV4_EXPERT_WS=1 ncu --clock-control none --section SourceCounters \
        --kernel-name regex:expert_gemm_ws --launch-count 1 --page source --print-source sass --csv .devbin/dsv4 \
        bench kernels --rows 1 --tokens 8192 --filter experts
    ;;
second)
    run bench 60 "${fast[@]}" --batch 1,8,64,256 --context 1000 --prefill 2048,8192 --steps 4 --json "$OUT/offline.json"
    oracle 3 3
    oracle 7 5.6
    run ops 100 .devbin/ops_cuda --gtest_filter='CudaFp8*:*Moe*:*Mhc*:*Fused*'
    run golden 40 .devbin/golden_cuda
    run memcheck 90 compute-sanitizer --tool memcheck --error-exitcode 3 .devbin/ops_cuda \
        --gtest_filter='CudaFp8.GroupedRegister*'
    grep -h "ERROR SUMMARY" "$OUT/memcheck.log" 2>/dev/null
    ;;
esac
python3 tools/device/short_table.py "$OUT"
report "r54_$mode"
