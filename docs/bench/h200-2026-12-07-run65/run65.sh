#!/usr/bin/env bash
# Device calls of 2026-12-07 (fourteenth session). Usage: BUDGET=S bash docs/bench/h200-2026-12-07-run65/run65.sh MODE
#   m : main's owed figures (binaries of main 5cc7795 in .devbin): golden, offline figures (B = 1 / 8 / 64 / 256,
#       prefill 2K / 8K), serving C1 / C64, the 8K prefill per op
#   n : the branch binaries (.devpack/dev124: next/b14 at e8605b9 = main + next/bf16-lt-narrow + next/attn-fp8-out) with
#       main's dsv4 as .devbin/dsv4_main: the new and touched tests, golden, the narrow bf16 shapes at 256 / 2,048
#       rows, then prefill 2K / 8K and decode B=64 / 256 alternated: main, new, new with DSV4_ATTENTION_FP8_OUT=0
#   q : n in a short window (the FP8 outputs' and wide tests, golden, one A/B round at B=256 and prefill 2K / 8K)
#   o : the whole op suite
#   k : the kernel bench of issue 15's targets: FP8 linears and the grouped experts at 2,048 / 8,192 rows with the
#       run's ceilings
mode=$1
source tools/device/call_lib.sh
source tools/device/offline_lib.sh
source tools/device/report_lines.sh
case $mode in
m)
    main_figures
    ;;
n)
    run tests 150 .devbin/ops_cuda --gtest_filter='CudaState.AttentionOutputs*:CudaState.NormedQueries*:CudaAttentionWide.*:*CudaBf16*:CudaFp8*'
    run golden 70 .devbin/golden_cuda
    for v in main new main new fp8off fp8off; do
        bin=.devbin/dsv4
        [[ $v == main ]] && bin=.devbin/dsv4_main
        off=1
        [[ $v == fp8off ]] && off=0
        DSV4_ATTENTION_FP8_OUT=$off run "ab_$v.$SECONDS" 80 "$bin" "${fast[@]}" --batch 64,256 --context 1000 \
            --prefill 2048,8192 --steps 4 --json "$OUT/ab_$v.$SECONDS.json"
    done
    for f in "$OUT"/ab_*.log; do echo "$(basename "$f") $(grep -hE "^(64|256) |^prefill" "$f" | tr -s ' ' | tr '\n' ' ')"; done
    for f in router weights_proj compressor; do
        run "k_$f" 30 .devbin/dsv4 bench kernels --rows 256,2048 --filter "$f" --json "$OUT/k_$f.json"
        grep -hE "auto:" "$OUT/k_$f.log" | head -12
    done
    ;;
q)  # n in a short window: the FP8 outputs' test and the wide suite, golden, one A/B round
    run tests 90 .devbin/ops_cuda --gtest_filter='CudaState.AttentionOutputs*:CudaState.NormedQueries*:CudaAttentionWide.*:CudaBf16Lt.*'
    run golden 70 .devbin/golden_cuda
    for v in fp8off new main; do
        bin=.devbin/dsv4
        [[ $v == main ]] && bin=.devbin/dsv4_main
        off=1
        [[ $v == fp8off ]] && off=0
        DSV4_ATTENTION_FP8_OUT=$off run "ab_$v.$SECONDS" 70 "$bin" "${fast[@]}" --batch 256 --context 1000 \
            --prefill 2048,8192 --steps 4 --json "$OUT/ab_$v.$SECONDS.json"
    done
    for f in "$OUT"/ab_*.log; do echo "$(basename "$f") $(grep -hE "^256 |^prefill" "$f" | tr -s ' ' | tr '\n' ' ')"; done
    ;;
o)
    run ops 560 .devbin/ops_cuda
    ;;
k)
    run kern 200 .devbin/dsv4 bench kernels --rows 2048,8192 --tokens 2048,8192 --json "$OUT/kern.json"
    lin_lines "$OUT/kern.json"
    ;;
esac
python3 tools/device/short_table.py "$OUT"
report "r65_$mode"
