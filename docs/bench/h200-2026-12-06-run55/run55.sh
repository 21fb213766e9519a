#!/usr/bin/env bash
# Device calls of 2026-12-06, fifth session. Usage: BUDGET=S bash docs/bench/h200-2026-12-06-run55/run55.sh MODE
# (H200: flash-160 is 102 GiB; LAYERS=24 fits it on an H100). .devbin/dsv4_old: the binaries of 5b1507c.
#   spec : the MTP drafter's recursive substeps recorded in graphs (dsv4) against eager ones (dsv4_old): batch-1
#          oracle K = 7 / L = 5.6 and K = 3 / L = 3, alternated; the fused-op / mHC tests and golden (the engine's
#          speculative greedy = plain greedy test replays the drafter's graphs)
#   knobs: memcheck of the register-weights kernel's tests; decode B=1 / 8 alternated with the FP8 GEMV split at
#          1,056 target warps (2,112 default; its op tests at 1,056) and with W4A8 grouping from 24 pairs (64
#          default; the expert kernel bench at 4 / 8 tokens both ways); the batch-1 decode's per-op profile (eager)
#   combo: spec's K = 7 A/B and K = 3, main's offline figures, the fused-op / mHC / FP8 / MoE op tests and golden, in
#          one call (when device starts are scarce)
#   fp4  : (never ran here; run56.sh f ran it on the merged branch and replaced it)
#   h200 : combo's offline figures and batch-1 oracles (48 steps: the steady state), then serve, in one call
#   serve: the serving protocol C1 / C64 at the default token budget and at 8,192 (the prefill chunk's trade-off)
mode=$1
source tools/device/call_lib.sh
source tools/device/offline_lib.sh
case $mode in
spec)
    for b in dsv4_old dsv4 dsv4_old dsv4; do oracle ".devbin/$b" 7 5.6; done
    for b in dsv4_old dsv4; do oracle ".devbin/$b" 3 3; done
    run ops 120 .devbin/ops_cuda --gtest_filter='CudaFusedOps*:*HcPostPre*:*Mhc*'
    run golden 60 .devbin/golden_cuda
    grep -h "speedup" -A1 "$OUT"/dsv4*_k*.log | grep -v "^--" | sort -u
    ;;
knobs)
    run memcheck 90 compute-sanitizer --tool memcheck --error-exitcode 3 .devbin/ops_cuda \
        --gtest_filter='CudaFp8.GroupedRegister*'
    grep -h "ERROR SUMMARY" "$OUT/memcheck.log" 2>/dev/null
    run gemv1056 60 env DSV4_FP8_GEMV_WARPS=1056 .devbin/ops_cuda --gtest_filter='*Gemv*:*Fp8Dense*'
    for v in 64 24; do
        run "kpairs$v" 30 env DSV4_MIN_GROUPED_FP8_PAIRS=$v .devbin/dsv4 bench kernels --rows 1 --tokens 4,8 \
            --filter experts --json "$OUT/kpairs$v.json"
    done
    # decode B=1 / 8: default, the FP8 GEMV at 1,056 target warps, W4A8 grouping from 24 pairs; alternated
    for v in base warps pairs base warps pairs; do
        local_env=()
        [[ $v == warps ]] && local_env=(DSV4_FP8_GEMV_WARPS=1056)
        [[ $v == pairs ]] && local_env=(DSV4_MIN_GROUPED_FP8_PAIRS=24)
        run "dec_$v.$SECONDS" 60 env "${local_env[@]}" .devbin/dsv4 "${fast[@]}" --batch 1,8 --context 1000 \
            --prefill 0 --steps 16 --json "$OUT/dec_$v.$SECONDS.json"
    done
    run prof_b1 45 env DSV4_PROFILE_OPS=1 .devbin/dsv4 "${fast[@]}" --batch 1 --context 1000 --prefill 0 --steps 4
    ;;
combo)
    run bench 90 .devbin/dsv4 "${fast[@]}" --batch 1,8,64,256 --context 1000 --prefill 2048,8192 --steps 4 \
        --json "$OUT/offline.json"
    for b in dsv4_old dsv4 dsv4_old dsv4; do oracle ".devbin/$b" 7 5.6; done
    oracle .devbin/dsv4 3 3
    run ops 120 .devbin/ops_cuda --gtest_filter='CudaFusedOps*:*HcPostPre*:CudaFp8.Grouped*:*MoeDecode*'
    run golden 60 .devbin/golden_cuda
    grep -h "speedup" -A1 "$OUT"/dsv4*_k*.log | grep -v "^--" | sort -u
    ;;
h200)
    run bench 60 .devbin/dsv4 "${fast[@]}" --batch 1,8,64,256 --context 1000 --prefill 2048,8192 --steps 4 \
        --json "$OUT/offline.json"
    STEPS=48 oracle .devbin/dsv4_old 7 5.6
    STEPS=48 oracle .devbin/dsv4 7 5.6
    STEPS=48 oracle .devbin/dsv4 3 3
    oracle .devbin/dsv4 7 5.6
    grep -h "speedup" -A1 "$OUT"/dsv4*_k*.log | grep -v "^--" | sort -u
    ;&
serve)
    run serve 200 tools/device/serve_bench.sh flash-160 "1 64"
    for f in "$OUT"/serve_c*.json; do mv "$f" "${f%.json}_budget2048.json"; done
    SERVER_FLAGS="--max-num-batched-tokens 8192 --long-prefill-token-threshold 8192" \
        run serve8k 200 tools/device/serve_bench.sh flash-160 "1 64"
    ;;
esac
python3 tools/device/short_table.py "$OUT"
report "r55_$mode"
