#!/usr/bin/env bash
# Sourced after call_lib.sh by the device-call scripts that benchmark the synthetic model: `fast` (the offline bench of
# flash-160 in fast numerics, cut to LAYERS layers; 24 by default on a GPU under 100 GB, where 43 do not fit) and
#   oracle BIN K L   batch-1 speculative decode with K MTP drafts accepted at oracle length L, and the plain step, over
#                    STEPS (default 12) timed steps; log and JSON in $OUT as <bin>_k<K>.<seconds>;
#   main_offline_and_serving  main's golden, offline bench (B = 1 / 8 / 64 / 256, prefill 2K / 8K) and serving C1 /
#                    C64 (.devbin/; needs report_lines.sh);
#   main_figures     the figures each session owes for main: main_offline_and_serving and the 8K prefill per op.
fast=(bench offline --preset flash-160 --numerics fast)
mem=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits | head -1)
((mem < 100000)) && LAYERS=${LAYERS:-24}
[[ -n ${LAYERS:-} ]] && fast+=(--layers "$LAYERS") && echo "LAYERS=$LAYERS"
cut=${LAYERS:+--synthetic-layers $LAYERS}  # the same cut for `dsv4 serve` (SERVER_FLAGS)
oracle() {
    local bin=$1 k=$2 l=$3 tag
    tag=$(basename "$bin")_k$k.$SECONDS
    run "$tag" 60 "$bin" "${fast[@]}" --batch 1 --context 1000 --steps "${STEPS:-12}" --json "$OUT/$tag.json" \
        --speculative-config "{\"method\":\"mtp\",\"num_speculative_tokens\":$k}" --oracle-acceptance "$l"
}
main_offline_and_serving() {
    run golden 70 .devbin/golden_cuda
    run bench 130 .devbin/dsv4 "${fast[@]}" --batch 1,8,64,256 --context 1000 --prefill 2048,8192 --steps 4 \
        --json "$OUT/offline.json"
    grep -h "tok/s" "$OUT/bench.log" | head -12
    SERVER_FLAGS="$cut" run serve 200 tools/device/serve_bench.sh flash-160 "1 64"
    serve_lines
}
main_figures() {
    main_offline_and_serving
    DSV4_PROFILE_OPS=1 run prof8k 80 .devbin/dsv4 "${fast[@]}" --batch 1 --context 1000 --prefill 8192 --steps 1
    grep -h "breakdown" "$OUT/prof8k.log"
}
