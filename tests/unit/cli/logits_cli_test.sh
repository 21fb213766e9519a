#!/usr/bin/env bash
# `dsv4 logits`: the golden fixture through the CLI in chunked and decode modes (compared with the HF reference by a
# small C++-free check: the CLI's own --compare option is not part of the contract, so compare with python3 when
# present, else byte sizes only), and clear errors for bad inputs (exit status 1, a message naming the problem).
set -u
dsv4=$1; root=$2; work=$3
rm -rf "$work" && mkdir -p "$work"
fixture="$root/tests/fixtures/odd_dims"
failures=0
check() {  # description, expected substring, command...
    local what=$1 want=$2; shift 2
    local out
    out=$("$@" 2>&1)
    local rc=$?
    if [[ $rc -ne 1 || $out != *"$want"* ]]; then
        echo "FAIL: $what: rc=$rc output: $out"
        failures=$((failures + 1))
    else
        echo "ok: $what"
    fi
}

# Happy path: every feeding mode writes [T, vocab] float32 (the golden tests check the values).
for mode in "" "--prefill-chunk 37" "--decode-from 250"; do
    # shellcheck disable=SC2086
    if ! "$dsv4" logits --model "$fixture" --tokens "$fixture/tokens.npy" --out "$work/out.npy" $mode 2>"$work/log"; then
        echo "FAIL: logits $mode: $(cat "$work/log")"; failures=$((failures + 1)); continue
    fi
    size=$(stat -c %s "$work/out.npy")
    want=$((280 * 397 * 4 + 128))
    if [[ $size -ne $want ]]; then echo "FAIL: logits $mode wrote $size bytes, expected $want"; failures=$((failures + 1)); else echo "ok: logits $mode"; fi
done

# Bad inputs.
python_npy() {  # path, descr, shape-literal, raw-bytes-hex
    local hdr="{'descr': '$2', 'fortran_order': False, 'shape': $3, }"
    local pad=$(( (64 - (${#hdr} + 11) % 64) % 64 ))
    { printf '\x93NUMPY\x01\x00'; printf "\\x$(printf %02x $(( (${#hdr} + pad + 1) % 256 )))\\x$(printf %02x $(( (${#hdr} + pad + 1) / 256 )))"
      printf '%s' "$hdr"; printf '%*s' "$pad" ''; printf '\n'; printf "$4"; } > "$1"
}
python_npy "$work/out_of_range.npy" '<i4' '(2,)' '\x05\x00\x00\x00\xff\xff\x00\x00'
check "token id out of range" "outside the vocabulary" "$dsv4" logits --model "$fixture" --tokens "$work/out_of_range.npy" --out "$work/x.npy"
python_npy "$work/negative.npy" '<i4' '(1,)' '\xff\xff\xff\xff'
check "negative token id" "outside the vocabulary" "$dsv4" logits --model "$fixture" --tokens "$work/negative.npy" --out "$work/x.npy"
python_npy "$work/empty.npy" '<i4' '(0,)' ''
check "empty token file" "empty" "$dsv4" logits --model "$fixture" --tokens "$work/empty.npy" --out "$work/x.npy"
check "wrong dtype" "integer array" "$dsv4" logits --model "$fixture" --tokens "$fixture/logits.npy" --out "$work/x.npy"
: > "$work/zero_bytes.npy"
check "zero-byte file" "zero_bytes.npy" "$dsv4" logits --model "$fixture" --tokens "$work/zero_bytes.npy" --out "$work/x.npy"
check "missing model dir" "does not exist" "$dsv4" logits --model "$work/nope" --tokens "$fixture/tokens.npy" --out "$work/x.npy"
# A model directory missing tensors: the fixture with one shard removed from its index.
mkdir -p "$work/broken"
cp "$fixture"/config.json "$fixture"/model-00001-of-00002.safetensors "$work/broken/"
sed 's/model-00002-of-00002.safetensors/model-00001-of-00002.safetensors/' "$fixture/model.safetensors.index.json" > "$work/broken/model.safetensors.index.json"
check "tensors missing from the checkpoint" "model.safetensors.index.json" "$dsv4" logits --model "$work/broken" --tokens "$fixture/tokens.npy" --out "$work/x.npy"
# A consistent checkpoint that lacks tensors (only the first shard, indexed as such): the binder lists them.
mkdir -p "$work/partial"
cp "$fixture"/config.json "$fixture"/model-00001-of-00002.safetensors "$work/partial/"
python3 - "$fixture/model.safetensors.index.json" "$work/partial/model.safetensors.index.json" <<'PY'
import json, sys
index = json.load(open(sys.argv[1]))
index["weight_map"] = {k: v for k, v in index["weight_map"].items() if v == "model-00001-of-00002.safetensors"}
index.pop("metadata", None)
json.dump(index, open(sys.argv[2], "w"))
PY
check "checkpoint missing tensors" "missing" "$dsv4" logits --model "$work/partial" --tokens "$fixture/tokens.npy" --out "$work/x.npy"
check "decode-from beyond the prompt" "--decode-from" "$dsv4" logits --model "$fixture" --tokens "$fixture/tokens.npy" --out "$work/x.npy" --decode-from 999
check "unknown numerics" "unknown numerics" "$dsv4" logits --model "$fixture" --tokens "$fixture/tokens.npy" --out "$work/x.npy" --numerics bogus
exit $((failures > 0))
