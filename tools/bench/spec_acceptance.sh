#!/usr/bin/env bash
# Drafter acceptance of the engine on the trained demo models, in the setting of tools/train/speculative.py (the
# PyTorch measurement in docs/demo-model.md): the 6 held-out prompts it used (rows 0, 29, ..., 145 of
# tests/data/demo_heldout_tokens.npy, BOS + 64 tokens), 40 new tokens each, greedy and temperature 1, MTP k = 3 and
# DSpark k = 5. Prints accepted drafts per verify step and tokens per step for each setting.
#   tools/bench/spec_acceptance.sh [DSV4_BINARY] [EXTRA speculative-config keys, e.g. '"rejection_sample_method":"block"']
# Environment: SEED (sampling seed, default 7), SETTINGS (which of mtp0 mtp1 dspark0 dspark1 to run, default all).
set -euo pipefail
DSV4=${1:-build/release/dsv4}
EXTRA=${2:-}
SEED=${SEED:-7}
SETTINGS=${SETTINGS:-"mtp0 mtp1 dspark0 dspark1"}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
prompts=$(python3 - "$ROOT/tests/data/demo_heldout_tokens.npy" <<'PY'
import array, ast, struct, sys
data = open(sys.argv[1], "rb").read()
header_len = struct.unpack("<H", data[8:10])[0]
rows, cols = ast.literal_eval(data[10:10 + header_len].decode())["shape"]
values = array.array("i")
values.frombytes(data[10 + header_len:10 + header_len + rows * cols * 4])
stride = max(1, rows // 6)
for i in range(6):
    r = i * stride
    print(",".join(map(str, values[r * cols:r * cols + 65])))
PY
)
run() {  # model method k temperature
    local steps=0 accepted=0 line
    while read -r prompt; do
        local config="{\"method\":\"$2\",\"num_speculative_tokens\":$3${EXTRA:+,$EXTRA}}"
        line=$("$DSV4" generate --model "$ROOT/models/$1" --prompt-tokens "$prompt" -n 40 --ignore-eos --threads 1 \
            --temperature "$4" --seed "$SEED" --speculative-config "$config" 2>&1 >/dev/null | grep '^speculative:')
        steps=$((steps + $(sed -E 's/^speculative: ([0-9]+) verify steps.*/\1/' <<<"$line")))
        accepted=$((accepted + $(sed -E 's/.* ([0-9]+) accepted:.*/\1/' <<<"$line")))
    done <<<"$prompts"
    python3 -c "s, a = $steps, $accepted; print(f'$2 k=$3 temperature $4: {s} verify steps, {a/s:.3f} accepted drafts/step, {(a+s)/s:.3f} tokens/step')"
}
for s in $SETTINGS; do
    case $s in
        mtp0) run demo mtp 3 0 ;;
        mtp1) run demo mtp 3 1 ;;
        dspark0) run demo-dspark dspark 5 0 ;;
        dspark1) run demo-dspark dspark 5 1 ;;
        *) echo "unknown setting $s" >&2; exit 2 ;;
    esac
done
