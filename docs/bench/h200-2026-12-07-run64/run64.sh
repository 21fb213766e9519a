#!/usr/bin/env bash
# Device calls of 2026-12-07 (thirteenth session), second set. Usage: BUDGET=S bash docs/bench/h200-2026-12-07-run64/run64.sh MODE
# .devbin (.devpack/dev120, 9cc4e0c): dsv4, ops_cuda, golden_cuda with the bf16-weight linears on cuBLASLt from 256 rows (LinearPath::kBf16Lt;
# DSV4_MIN_BF16_LT_ROWS=1000000000 gives main's mma.sync GEMM for them).
#   v : the whole op suite and golden; the kernel bench of the bf16-weight shapes (both paths); prefill 2K / 8K and
#       decode B=256, alternated without (base) and with (new) the cuBLASLt path
#   x : one H200 call for both: the bf16 and wide kernels' tests, golden, main's offline figures (bf16 linears on
#       cuBLASLt), the same prefill 2K / 8K and B=256 with them on the mma.sync GEMM, serving C1 / C64
#   m : main's owed figures (as run63 m): golden, the wide kernels' tests, offline figures, serving C1 / C64, the 8K
#       prefill per op
mode=$1
source tools/device/call_lib.sh
source tools/device/offline_lib.sh
source tools/device/report_lines.sh
off=1000000000
case $mode in
v)
    run ops 420 .devbin/ops_cuda
    run golden 70 .devbin/golden_cuda
    for f in compressor router weights_proj; do
        run "k_$f" 40 .devbin/dsv4 bench kernels --rows 256,2048,8192 --filter "$f" --json "$OUT/k_$f.json"
        grep -hE "bf16_lt|gemm_bf16" "$OUT/k_$f.log" | head -20
    done
    run k_head 40 .devbin/dsv4 bench kernels --rows 256 --filter "lm head" --json "$OUT/k_head.json"
    grep -hE "bf16_lt|gemm_bf16" "$OUT/k_head.log"
    for v in base new base new; do
        rows=256
        [[ $v == base ]] && rows=$off
        DSV4_MIN_BF16_LT_ROWS=$rows run "ab_$v.$SECONDS" 80 .devbin/dsv4 "${fast[@]}" --batch 256 --context 1000 \
            --prefill 2048,8192 --steps 4 --json "$OUT/ab_$v.$SECONDS.json"
    done
    for f in "$OUT"/ab_*.log; do echo "$(basename "$f") $(grep -hE "^256 |^prefill" "$f" | tr -s ' ' | tr '\n' ' ')"; done
    ;;
x)
    run wide 100 .devbin/ops_cuda --gtest_filter='CudaAttentionWide.*:CudaState.NormedQueries*:*CudaBf16*:*CudaLinear*'
    run golden 70 .devbin/golden_cuda
    run bench 130 .devbin/dsv4 "${fast[@]}" --batch 1,8,64,256 --context 1000 --prefill 2048,8192 --steps 4 \
        --json "$OUT/offline.json"
    grep -h "tok/s" "$OUT/bench.log" | head -12
    DSV4_MIN_BF16_LT_ROWS=$off run ab_base 80 .devbin/dsv4 "${fast[@]}" --batch 256 --context 1000 \
        --prefill 2048,8192 --steps 4 --json "$OUT/ab_base.json"
    grep -hE "^256 |^prefill" "$OUT/ab_base.log"
    SERVER_FLAGS="$cut" run serve 200 tools/device/serve_bench.sh flash-160 "1 64"
    serve_lines
    ;;
m)
    run wide 100 .devbin/ops_cuda --gtest_filter='CudaAttentionWide.*:CudaState.NormedQueries*:*CudaBf16*:*CudaLinear*'
    main_figures
    ;;
esac
python3 tools/device/short_table.py "$OUT"
report "r64_$mode"
