#!/usr/bin/env bash
# Device calls of 2026-12-06, seventh session. Usage: BUDGET=S bash docs/bench/h200-2026-12-06-run57/run57.sh MODE
# .devbin: .devpack/dev86 (dsv4, ops_cuda, golden_cuda of main with the sampler on a cluster of 8 blocks a draw and the
# workspace high-water gauge;
# dsv4_old: 08a5864, one block a draw).
#   a    : the sampler's op tests twice (fresh random draws each run) and their memcheck, its kernel bench; main's
#          offline figures
#          (flash-160, B = 1 / 8 / 64 / 256, prefill 2K / 8K; prefill in 8K chunks), the FP8 linears and grouped
#          experts against the FP8 ceiling, batch-1 oracles (48 steps, K = 7 / L = 5.6 and K = 3 / L = 3), golden;
#          serving C1 / C64 at the default token budget (2,048), the same with dsv4_old (the sampler's A/B), and at
#          8,192 with a 10 GiB workspace
#   h    : (the H100, while no H200 comes) the sampler's op tests twice, memcheck, kernel bench, golden; serving C1 /
#          C64 new / old / new (24 layers)
#   c    : serving C64 plain and with MTP k = 3 at oracle acceptance 3 (issue 17), both at an 8,192-token budget; then
#          the whole op suite and golden
#   d    : (.devpack/dev89: main d204fe9 with the CUDA token budget of 8,192 and the workspace from it; *_smem: branch
#          next/sample-smem, the sampler's parts in shared memory) the sampler's op tests and kernel bench of both;
#          serving C1 / C64 with main's defaults, C64 with MTP k = 3 at oracle acceptance 3; offline at main's defaults; golden; the op suite
#   b    : main's whole op suite, golden, and ncu of every batch-1 decode kernel (4 layers, eager: each kernel's
#          duration alone)
mode=$1
source tools/device/call_lib.sh
source tools/device/offline_lib.sh
STEPS=${STEPS:-48}
cut=${LAYERS:+--synthetic-layers $LAYERS}
# One line a serving JSON: throughput, TPOT, step, host work and its sampling part.
serve_lines() {
    for f in "$OUT"/serve_c*.json; do
        python3 -c "import json,sys; l=json.load(open(sys.argv[1]))['levels'][0]; print(sys.argv[1].split('/')[-1], \
'tok/s %.1f tpot %.2f step %.2f ms host %.3f sample %.3f' % (l['output_throughput'], l['tpot']['mean_ms'], \
l['step_mean_ms'], l['host_ms_per_step'], l['sample_ms_per_step']))" "$f"
    done
}
case $mode in
a)
    sampler_checks
    run ksample 40 .devbin/dsv4 bench kernels --rows 1 --tokens 8 --filter sample --json "$OUT/ksample.json"
    run bench 120 .devbin/dsv4 "${fast[@]}" --batch 1,8,64,256 --context 1000 --prefill 2048,8192 --steps 4 \
        --json "$OUT/offline.json"
    run chunk8k 60 .devbin/dsv4 "${fast[@]}" --batch 1 --context 1000 --prefill 2048,8192 --prefill-chunk 8192 \
        --steps 2 --json "$OUT/chunk8k.json"
    run klin 60 .devbin/dsv4 bench kernels --rows 2048,8192 --tokens 8192 --json "$OUT/klin.json"
    oracle .devbin/dsv4 7 5.6
    oracle .devbin/dsv4 3 3
    grep -h "speedup" -A1 "$OUT"/dsv4*_k*.log | grep -v "^--" | sort -u
    run golden 60 .devbin/golden_cuda
    SERVER_FLAGS="$cut" run serve 200 tools/device/serve_bench.sh flash-160 "1 64"
    for f in "$OUT"/serve_c?.json "$OUT"/serve_c??.json; do mv "$f" "${f%.json}_budget2048.json"; done
    cp .devbin/dsv4 .devbin/dsv4_new && cp .devbin/dsv4_old .devbin/dsv4
    SERVER_FLAGS="$cut" run serve_old 200 tools/device/serve_bench.sh flash-160 "1 64"
    for f in "$OUT"/serve_c?.json "$OUT"/serve_c??.json; do mv "$f" "${f%.json}_old.json"; done
    cp .devbin/dsv4_new .devbin/dsv4
    SERVER_FLAGS="$cut --max-num-batched-tokens 8192 --long-prefill-token-threshold 8192 --cuda-workspace-mib 10240" \
        run serve8k 200 tools/device/serve_bench.sh flash-160 "1 64"
    serve_lines
    ;;
h)
    sampler_checks
    run ksample 40 .devbin/dsv4 bench kernels --rows 1 --tokens 8 --filter sample --json "$OUT/ksample.json"
    run golden 60 .devbin/golden_cuda
    serve_variants "$cut" new old new
    serve_lines
    ;;
c)
    SERVER_FLAGS="$cut --max-num-batched-tokens 8192 --long-prefill-token-threshold 8192 --cuda-workspace-mib 10240" \
        run serve_plain 150 tools/device/serve_bench.sh flash-160 64
    mv "$OUT/serve_c64.json" "$OUT/serve_c64_plain.json"
    SPEC_CONFIG='{"method":"mtp","num_speculative_tokens":3,"oracle_acceptance_length":3,"draft_sample_method":"greedy"}' \
        SERVER_FLAGS="$cut --max-num-batched-tokens 8192 --long-prefill-token-threshold 8192 --cuda-workspace-mib 10240" \
        run serve_spec 150 tools/device/serve_bench.sh flash-160 64
    mv "$OUT/serve_c64.json" "$OUT/serve_c64_spec.json"
    serve_lines
    run ops 330 .devbin/ops_cuda
    ;;
d)
    run sample_ops 60 .devbin/ops_cuda --gtest_filter='*Sample*:*Argmax*'
    run sample_ops_smem 60 .devbin/ops_cuda_smem --gtest_filter='*Sample*:*Argmax*'
    for b in dsv4 dsv4_smem; do
        run "ksample_$b" 40 ".devbin/$b" bench kernels --rows 1 --tokens 8 --filter sample --json "$OUT/ksample_$b.json"
    done
    SERVER_FLAGS="$cut" run serve 150 tools/device/serve_bench.sh flash-160 "1 64"
    for c in 1 64; do mv "$OUT/serve_c$c.json" "$OUT/serve_c${c}_default.json"; done
    SPEC_CONFIG='{"method":"mtp","num_speculative_tokens":3,"oracle_acceptance_length":3,"draft_sample_method":"greedy"}' \
        SERVER_FLAGS="$cut" run serve_spec 120 tools/device/serve_bench.sh flash-160 64
    mv "$OUT/serve_c64.json" "$OUT/serve_c64_spec.json"
    serve_lines
    run bench 90 .devbin/dsv4 "${fast[@]}" --batch 1,8,64,256 --context 1000 --prefill 2048,8192 --steps 4 \
        --json "$OUT/offline.json"
    run golden 60 .devbin/golden_cuda
    run ops 300 .devbin/ops_cuda
    ;;
b)
    run ops 400 .devbin/ops_cuda
    run golden 60 .devbin/golden_cuda
    run ncudecode 120 ncu --clock-control none --section SpeedOfLight --section LaunchStats --section Occupancy \
        --section WarpStateStats --csv --page details --kernel-name-base function \
        --kernel-name regex:'^(?!.*(fill_|expand_block))' --launch-count 400 .devbin/dsv4 bench offline \
        --preset flash-160 --numerics fast --layers 4 --batch 1 --context 1000 --prefill 0 --steps 1 --enforce-eager &&
        python3 tools/device/ncu_summary.py "$OUT/ncudecode.log" >"$OUT/ncudecode.txt"
    head -60 "$OUT/ncudecode.txt"
    ;;
esac
python3 tools/device/short_table.py "$OUT"
report "r57_$mode"
