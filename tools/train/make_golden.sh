#!/usr/bin/env bash
# Golden greedy continuations of the demo model by dsv4's CPU engine (exact numerics), for the CI check
# (tests/golden/demo/demo_golden_text_test.sh) and the GPU check (tools/device/demo_model_gpu.sh).
#
#   tools/train/make_golden.sh DSV4_BIN MODEL_DIR OUT_DIR
#
# Writes OUT_DIR/pN.prompt (the prompt text), pN.ids (BOS + its token ids, comma-separated) and pN.n48.txt /
# pN.n32.txt (what `dsv4 generate --prompt-tokens IDS -n 48 / -n 32` prints: greedy; stops early at EOS).
set -euo pipefail
dsv4=$1 model=$2 out=$3
prompts=(
  "The jury said that"
  "Once upon a time, there was a"
  "The President of the United States"
  "In the morning, she walked to the"
  "<｜User｜>Write a sentence about music.<｜Assistant｜></think>"
)
mkdir -p "$out"
for i in "${!prompts[@]}"; do
  n=$((i + 1))
  printf '%s' "${prompts[$i]}" >"$out/p$n.prompt"
  ids=$("$dsv4" tokenize --tokenizer "$model/tokenizer.json" --text "${prompts[$i]}" | tr -d '[] ')
  echo "0,$ids" >"$out/p$n.ids"
  for len in 48 32; do
    "$dsv4" generate --model "$model" --prompt-tokens "0,$ids" -n "$len" --threads 1 >"$out/p$n.n$len.txt" 2>/dev/null
  done
done
ls "$out"
