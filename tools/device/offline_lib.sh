#!/usr/bin/env bash
# Sourced after call_lib.sh by the device-call scripts that benchmark the synthetic model: `fast` (the offline bench of
# flash-160 in fast numerics, cut to LAYERS layers; 24 by default on a GPU under 100 GB, where 43 do not fit) and
#   oracle BIN K L   batch-1 speculative decode with K MTP drafts accepted at oracle length L, and the plain step, over
#                    STEPS (default 12) timed steps; log and JSON in $OUT as <bin>_k<K>.<seconds>.
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
