#!/usr/bin/env bash
# CTest driver for check_tokenizer_reference.js: run_tokenizer_reference.sh DSV4_BIN TOKENIZER_JSON WORK_DIR
# Exits 77 (CTest "skipped") when the npm packages are not installed, except under CI (CI set), where that fails.
set -euo pipefail
node_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
dsv4_bin=$1 tokenizer_json=$2 work_dir=$3

missing=""
command -v node >/dev/null 2>&1 || missing="node is not installed"
[[ -z $missing && ! -d $node_dir/node_modules/@huggingface/tokenizers ]] && missing="$node_dir/node_modules is absent"
[[ -z $missing && ! -f $tokenizer_json ]] && missing="$tokenizer_json does not exist (re-run cmake after npm ci)"
if [[ -n $missing ]]; then
  if [[ -n ${CI:-} ]]; then
    echo "tokenizer reference check cannot run under CI: $missing (scripts/install-deps.sh installs it)" >&2
    exit 1
  fi
  echo "SKIPPED tokenizer reference check: $missing; run scripts/install-deps.sh to enable it"
  exit 77
fi
exec node "$node_dir/scripts/check_tokenizer_reference.js" --dsv4 "$dsv4_bin" --tokenizer "$tokenizer_json" \
  --work "$work_dir"
