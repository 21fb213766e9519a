#!/usr/bin/env bash
# `dsv4 tokenize` end to end: ids for --text and --jsonl, and clear errors for bad input.
#   cmd_tokenize_test.sh DSV4_BIN TOKENIZER_JSON WORK_DIR      (exit 77 = skipped: tokenizer file absent)
set -uo pipefail
dsv4=$1 tokenizer=$2 work=$3
if [[ ! -f $tokenizer ]]; then
  [[ -n ${CI:-} ]] && { echo "missing $tokenizer under CI (scripts/install-deps.sh installs it)" >&2; exit 1; }
  echo "SKIPPED: $tokenizer is absent; run scripts/install-deps.sh"
  exit 77
fi
mkdir -p "$work"
passed=0 failed=0

expect_output() {  # name expected command...
  local name=$1 expected=$2; shift 2
  local got
  got=$("$@" 2>&1)
  if [[ $? -eq 0 && $got == "$expected" ]]; then ((passed++)); else ((failed++)); echo "FAIL $name: got '$got'"; fi
}
expect_error() {  # name message-fragment command...
  local name=$1 fragment=$2; shift 2
  local got
  got=$("$@" 2>&1)
  if [[ $? -eq 1 && $got == *"$fragment"* ]]; then ((passed++)); else ((failed++)); echo "FAIL $name: got '$got'"; fi
}

expect_output text '[19923,14,2058,3]' "$dsv4" tokenize --tokenizer "$tokenizer" --text 'Hello, world!'
expect_output special '[128803,6366]' "$dsv4" tokenize --tokenizer "$tokenizer" --text '<｜User｜>hi'
no_special=$("$dsv4" tokenize --tokenizer "$tokenizer" --no-special --text '<｜User｜>hi')
if [[ $no_special != *128803* && $no_special == \[*\] ]]; then ((passed++)); else ((failed++)); echo "FAIL no-special: $no_special"; fi

printf '%s\n' '"Hello, world!"' '""' '"line\nbreak \u4e2d"' > "$work/ok.jsonl"
expect_output jsonl $'[19923,14,2058,3]\n[]\n'"$("$dsv4" tokenize --tokenizer "$tokenizer" --text $'line\nbreak 中')" \
  "$dsv4" tokenize --tokenizer "$tokenizer" --jsonl "$work/ok.jsonl"
expect_output stdin '[19923,14,2058,3]' bash -c "echo '\"Hello, world!\"' | '$dsv4' tokenize --tokenizer '$tokenizer' --jsonl -"

printf '%s\n' '"fine"' '{not json' > "$work/bad.jsonl"
expect_error bad-json-line 'line 2: not valid JSON' "$dsv4" tokenize --tokenizer "$tokenizer" --jsonl "$work/bad.jsonl"
printf '%s\n' '"fine"' '"fine"' '[1, 2]' > "$work/array.jsonl"
expect_error non-string-line 'line 3: expected a JSON string' "$dsv4" tokenize --tokenizer "$tokenizer" --jsonl "$work/array.jsonl"
expect_error missing-jsonl "cannot open '$work/nope.jsonl'" "$dsv4" tokenize --tokenizer "$tokenizer" --jsonl "$work/nope.jsonl"
expect_error missing-tokenizer "cannot open '$work/nope.json'" "$dsv4" tokenize --tokenizer "$work/nope.json" --text hi
echo '{"model": {}}' > "$work/broken_tokenizer.json"
expect_error broken-tokenizer 'broken_tokenizer.json' "$dsv4" tokenize --tokenizer "$work/broken_tokenizer.json" --text hi
expect_error no-input 'give --text or --jsonl' "$dsv4" tokenize --tokenizer "$tokenizer"

echo "$passed passed, $failed failed"
[[ $failed -eq 0 ]]
