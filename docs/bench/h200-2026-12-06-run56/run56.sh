#!/usr/bin/env bash
# Device calls of 2026-12-06, sixth session. Usage: BUDGET=S bash docs/bench/h200-2026-12-06-run56/run56.sh MODE
# .devbin: .devpack/dev79 for modes f and b (main's dsv4, ops_cuda, golden_cuda at 574bb60, and branch
# next/fp4-layout's under *_fp4 at 382ee75: main merged into it, FP4 codes sign-split on the CUDA backend);
# .devpack/dev81 for mode a (dsv4 of main 7cee281: the branch merged, the sampling part of the host work in
# bench serve; golden_cuda of 382ee75, the same GPU code).
#   a    : main's offline figures (flash-160, B = 1 / 8 / 64 / 256, prefill 2K / 8K; prefill in 8K chunks), batch-1
#          oracles (48 steps, K = 7 / L = 5.6 and K = 3 / L = 3) and golden; then serving C1 / C64 at the default
#          token budget (2,048) and at 8,192 (with a 10 GiB workspace: 6 GiB was short at C64 on 2026-12-06)
#   f    : the fp4 branch's layout tests, golden and expert-tier tests; the expert kernel bench and B = 1 / 64 / 256 +
#          prefill A/B against main, alternated; the FP4 op filter with what is left
#   b    : main's whole op suite
#   t    : (.devpack/dev83: 4ebad2b's binaries) the sampler's op tests twice (fresh random draws each run), their
#          memcheck, golden, serving C1 / C64
#   s    : (.devpack/dev82: dsv4, ops_cuda, golden_cuda with the sampler's per-warp-pair histograms; dsv4_old: 7cee281)
#          the sampler's op tests (and memcheck), golden, then serving C1 / C64 new / old / new (the sampling part of
#          the host work per step is in each JSON)
mode=$1
source tools/device/call_lib.sh
source tools/device/offline_lib.sh
STEPS=${STEPS:-48}
case $mode in
a)
    run bench 90 .devbin/dsv4 "${fast[@]}" --batch 1,8,64,256 --context 1000 --prefill 2048,8192 --steps 4 \
        --json "$OUT/offline.json"
    run chunk8k 60 .devbin/dsv4 "${fast[@]}" --batch 1 --context 1000 --prefill 2048,8192 --prefill-chunk 8192 \
        --steps 2 --json "$OUT/chunk8k.json"
    oracle .devbin/dsv4 7 5.6
    oracle .devbin/dsv4 3 3
    grep -h "speedup" -A1 "$OUT"/dsv4*_k*.log | grep -v "^--" | sort -u
    run golden 60 .devbin/golden_cuda
    cut=${LAYERS:+--synthetic-layers $LAYERS}
    SERVER_FLAGS="$cut" run serve 200 tools/device/serve_bench.sh flash-160 "1 64"
    for f in "$OUT"/serve_c*.json; do mv "$f" "${f%.json}_budget2048.json"; done
    SERVER_FLAGS="$cut --max-num-batched-tokens 8192 --long-prefill-token-threshold 8192 --cuda-workspace-mib 10240" \
        run serve8k 200 tools/device/serve_bench.sh flash-160 "1 64"
    ;;
f)
    run layout 60 .devbin/ops_cuda_fp4 --gtest_filter='CudaFp4Layout.*'
    run golden_fp4 60 .devbin/golden_cuda_fp4
    run tier_fp4 40 .devbin/golden_dist_cuda_fp4 --gtest_filter='CudaExpertTier*'
    for b in dsv4 dsv4_fp4; do
        run "k_$b" 40 ".devbin/$b" bench kernels --rows 1 --tokens 8,64,256,2048,8192 --filter experts \
            --json "$OUT/k_$b.json"
    done
    for b in dsv4 dsv4_fp4 dsv4 dsv4_fp4; do
        run "ab_$b.$SECONDS" 60 ".devbin/$b" "${fast[@]}" --batch 1,64,256 --context 1000 --prefill 2048,8192 \
            --steps 8 --json "$OUT/ab_$b.$SECONDS.json"
    done
    run ops_fp4 200 .devbin/ops_cuda_fp4 --gtest_filter='CudaFp8.*:CudaFp8Dialect.*:Shapes/CudaLinear.*:Shapes/CudaGemvStream.*:CudaGemvStreamMulti.*:CudaGemvStreamExperts.*:CudaGemvVectors.*:Shapes/CudaMoeDecode.*:CudaMoeDecodeErrors.*:CudaOps.Moe*:CudaOps.SharedExpertStreamEqualsOneStream'
    ;;
b)
    run ops 560 .devbin/ops_cuda
    ;;
t)
    for i in 1 2; do run "sample_ops$i" 60 .devbin/ops_cuda --gtest_filter='*Sample*:*Argmax*'; done
    run sample_memcheck 90 compute-sanitizer --tool memcheck --error-exitcode 3 .devbin/ops_cuda \
        --gtest_filter='CudaSampleRows.MatchesTheReferenceOnFreshRandomDraws'
    grep -h "ERROR SUMMARY" "$OUT/sample_memcheck.log" 2>/dev/null
    run golden 60 .devbin/golden_cuda
    SERVER_FLAGS="${LAYERS:+--synthetic-layers $LAYERS}" run serve 120 tools/device/serve_bench.sh flash-160 "1 64"
    ;;
s)
    run sample_ops 120 .devbin/ops_cuda --gtest_filter='*Sample*:*Argmax*'
    run sample_memcheck 90 compute-sanitizer --tool memcheck --error-exitcode 3 .devbin/ops_cuda \
        --gtest_filter='CudaSampleRows.MatchesTheReferenceOnFreshRandomDraws'
    grep -h "ERROR SUMMARY" "$OUT/sample_memcheck.log" 2>/dev/null
    run golden 60 .devbin/golden_cuda
    cut=${LAYERS:+--synthetic-layers $LAYERS}
    cp .devbin/dsv4 .devbin/dsv4_new
    for b in new old new; do
        cp ".devbin/dsv4_$b" .devbin/dsv4
        SERVER_FLAGS="$cut" run "serve_$b.$SECONDS" 120 tools/device/serve_bench.sh flash-160 "1 64"
        for c in 1 64; do [[ -f $OUT/serve_c$c.json ]] && mv "$OUT/serve_c$c.json" "$OUT/serve_c${c}_$b.$SECONDS.json"; done
    done
    for f in "$OUT"/serve_c*_*.json; do
        python3 -c "import json,sys; l=json.load(open(sys.argv[1]))['levels'][0]; print(sys.argv[1].split('/')[-1], \
'tok/s %.1f step %.2f ms host %.3f sample %.3f' % (l['output_throughput'], l['step_mean_ms'], \
l['host_ms_per_step'], l['sample_ms_per_step']))" "$f"
    done
    ;;
esac
python3 tools/device/short_table.py "$OUT"
report "r56_$mode"
