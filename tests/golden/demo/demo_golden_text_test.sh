#!/usr/bin/env bash
# The demo model's greedy continuations through the CPU engine (`dsv4 generate`, exact numerics) must equal the
# committed golden text (tests/data/demo_golden, written by tools/train/make_golden.sh), and `dsv4 inspect` must
# report both drafter layouts.
#   demo_golden_text_test.sh DSV4_BIN REPO_DIR
set -uo pipefail
dsv4=$1 repo=$2
golden=$repo/tests/data/demo_golden
passed=0 failed=0
for ids_file in "$golden"/p*.ids; do
  name=$(basename "$ids_file" .ids)
  got=$("$dsv4" generate --model "$repo/models/demo" --prompt-tokens "$(cat "$ids_file")" -n 48 --threads 1 2>/dev/null)
  if [[ $got == "$(cat "$golden/$name.n48.txt")" ]]; then ((passed++)); else
    ((failed++)); echo "FAIL $name ($(cat "$golden/$name.prompt")): got '$got'"
  fi
done
for spec in "demo:drafts: mtp, 1 stage" "demo-dspark:drafts: dspark, 3 stage"; do
  dir=${spec%%:*} want=${spec#*:}
  out=$("$dsv4" inspect --model "$repo/models/$dir" 2>&1)
  if [[ $out == *"$want"* && $out == *"0 missing, 0 unexpected"* ]]; then ((passed++)); else
    ((failed++)); echo "FAIL inspect $dir: expected '$want'"
  fi
done
echo "$passed passed, $failed failed"
((failed == 0))
