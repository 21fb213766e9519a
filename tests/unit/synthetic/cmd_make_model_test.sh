#!/usr/bin/env bash
# `dsv4 make-model` end to end: a valid model directory, refusal to overwrite without --force, a clean replacement with
# --force (no stale shards), the tokenizer copy, and clear errors for bad arguments.
#   cmd_make_model_test.sh DSV4_BIN WORK_DIR
set -uo pipefail
dsv4=$1 work=$2
rm -rf "$work" && mkdir -p "$work"
passed=0 failed=0
check() {  # name condition-exit-status
  if [[ $2 -eq 0 ]]; then ((passed++)); else ((failed++)); echo "FAIL $1"; fi
}
expect_error() {  # name message-fragment command...
  local name=$1 fragment=$2; shift 2
  local got
  got=$("$@" 2>&1)
  if [[ $? -eq 1 && $got == *"$fragment"* ]]; then ((passed++)); else ((failed++)); echo "FAIL $name: got '$got'"; fi
}

out=$work/tiny
"$dsv4" make-model --preset tiny --out "$out" --seed 3 >/dev/null 2>&1
check "tiny written" $?
[[ -f $out/model.safetensors.index.json && -f $out/config.json && -f $out/synthetic.json ]]
check "tiny files" $?
"$dsv4" inspect --model "$out" >/dev/null 2>&1
check "tiny inspects clean" $?
grep -q '"preset": "tiny"' "$out/synthetic.json"
check "provenance names the preset" $?

expect_error "no silent overwrite" "--force" "$dsv4" make-model --preset tiny --out "$out"
"$dsv4" make-model --preset tiny --out "$out" --force --shards 3 >/dev/null 2>&1
check "--force replaces" $?
shards=$(ls "$out" | grep -c '\.safetensors$')
[[ $shards -eq 3 && -z $(ls "$out" | grep -e '-of-00002' -e '\.partial$') ]]
check "no stale shards after --force (found $shards)" $?
"$dsv4" inspect --model "$out" >/dev/null 2>&1
check "replaced model inspects clean" $?

echo '{"fake": "tokenizer"}' >"$work/tok.json"
"$dsv4" make-model --preset random-v4 --layers 2 --experts 2 --out "$work/b" --tokenizer "$work/tok.json" >/dev/null 2>&1
check "random-v4 truncated" $?
"$dsv4" make-model --preset bundled --layers 1 --experts 2 --out "$work/old-name" --tokenizer "$work/tok.json" >/dev/null 2>&1
check "bundled (old name of random-v4) still accepted" $?
cmp -s "$work/tok.json" "$work/b/tokenizer.json"
check "tokenizer copied" $?
grep -q '"num_hidden_layers": 2' "$work/b/config.json"
check "truncated config" $?

expect_error "unknown preset" "unknown preset 'huge'" "$dsv4" make-model --preset huge --out "$work/x"
expect_error "layers range" "--layers 0" "$dsv4" make-model --preset tiny --layers 0 --out "$work/x"
expect_error "experts range" "--experts 9" "$dsv4" make-model --preset tiny --experts 9 --out "$work/x"
expect_error "shards" "--shards 100000: must be in" "$dsv4" make-model --preset tiny --shards 100000 --out "$work/y"
expect_error "missing tokenizer" "no such file" "$dsv4" make-model --preset tiny --tokenizer "$work/none.json" --out "$work/z"
[[ ! -e $work/y ]]
check "a rejected run writes nothing" $?

echo "make-model CLI: $passed passed, $failed failed"
[[ $failed -eq 0 ]]
