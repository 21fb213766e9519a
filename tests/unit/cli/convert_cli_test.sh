#!/usr/bin/env bash
# `dsv4 convert-checkpoint` and `--fp8-dialect` through the CLI: a fixture converted to FNUZ verifies, inspects as
# FNUZ and gives the same logits bytes as the OCP original (exact numerics, either dialect in memory); bad inputs get
# exit status 1 and a message naming the problem; a mislabelled checkpoint is refused by logits and inspect.
set -u
dsv4=$1; root=$2; work=$3
rm -rf "$work" && mkdir -p "$work"
fixture="$root/tests/fixtures/odd_dims"
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
check() {  # description, expected substring, command...
    local what=$1 want=$2; shift 2
    local out
    out=$("$@" 2>&1)
    local rc=$?
    if [[ $rc -ne 1 || $out != *"$want"* ]]; then fail "$what: rc=$rc output: $out"; else echo "ok: $what"; fi
}

# Happy path.
if ! "$dsv4" convert-checkpoint --model "$fixture" --out "$work/fnuz" --fp8 fnuz >"$work/log" 2>&1; then
    fail "convert: $(cat "$work/log")"
fi
grep -q '"fmt": "e4m3_fnuz"' "$work/fnuz/config.json" || fail "config.json does not record e4m3_fnuz"
[[ -f "$work/fnuz/SHA256SUMS" && ! -e "$work/fnuz.partial" ]] || fail "SHA256SUMS missing or partial output left"
"$dsv4" verify-checkpoint --model "$work/fnuz" >"$work/log" 2>&1 || fail "verify-checkpoint: $(cat "$work/log")"
cmp -s "$fixture/tokens.npy" "$work/fnuz/tokens.npy" || fail "tokens.npy not copied byte for byte"
"$dsv4" inspect --model "$work/fnuz" >"$work/inspect" 2>&1 || fail "inspect of the converted checkpoint failed"
grep -q "FNUZ e4m3 (e4m3fnuz) per config.json.*consistent" "$work/inspect" || fail "inspect does not report FNUZ"
echo "ok: convert to FNUZ, verify, inspect"

# Same logits bytes: OCP original, FNUZ copy read natively, OCP converted to FNUZ at load (the golden tests cover the
# other combinations).
"$dsv4" logits --model "$fixture" --tokens "$fixture/tokens.npy" --out "$work/ocp.npy" 2>/dev/null || fail "logits ocp"
for run in "$work/fnuz fnuz" "$fixture fnuz"; do
    set -- $run
    "$dsv4" logits --model "$1" --tokens "$fixture/tokens.npy" --out "$work/x.npy" --fp8-dialect "$2" 2>/dev/null ||
        fail "logits $run"
    cmp -s "$work/ocp.npy" "$work/x.npy" && echo "ok: logits $run bit-identical" || fail "logits $run differ"
done

# Bad inputs.
check "missing input" "is not a directory" "$dsv4" convert-checkpoint --model "$work/nope" --out "$work/o1" --fp8 fnuz
mkdir -p "$work/empty"
check "not a checkpoint" "is not a checkpoint" "$dsv4" convert-checkpoint --model "$work/empty" --out "$work/o2" --fp8 fnuz
check "output exists" "already exists" "$dsv4" convert-checkpoint --model "$fixture" --out "$work/fnuz" --fp8 fnuz
check "already FNUZ" "nothing to convert" "$dsv4" convert-checkpoint --model "$work/fnuz" --out "$work/o3" --fp8 fnuz
check "output inside the input" "inside the input" "$dsv4" convert-checkpoint --model "$work/fnuz" --out "$work/fnuz/sub" --fp8 ocp
cp -r "$work/fnuz" "$work/corrupt"
printf '\x01' | dd of="$work/corrupt/model-00002-of-00002.safetensors" bs=1 seek=5000 conv=notrunc 2>/dev/null
check "input does not match its SHA256SUMS" "does not match its SHA256SUMS" "$dsv4" convert-checkpoint --model "$work/corrupt" --out "$work/o4" --fp8 ocp
[[ ! -e "$work/o4" && ! -e "$work/o4.partial" ]] || fail "a failed conversion left output behind"
out=$("$dsv4" convert-checkpoint --model "$fixture" --out "$work/o5" --fp8 e5m2 2>&1)
[[ $? -ne 0 && $out == *"fp8"* ]] && echo "ok: unknown dialect" || fail "unknown dialect: $out"

# Mislabelled: OCP bytes claimed FNUZ, FNUZ bytes claimed OCP.
mkdir -p "$work/ocp_as_fnuz" "$work/fnuz_as_ocp"
cp "$fixture"/*.safetensors "$fixture"/model.safetensors.index.json "$work/ocp_as_fnuz/"
sed 's/"fmt": "e4m3"/"fmt": "e4m3_fnuz"/' "$fixture/config.json" >"$work/ocp_as_fnuz/config.json"
cp "$work/fnuz"/*.safetensors "$work/fnuz"/model.safetensors.index.json "$work/fnuz_as_ocp/"
sed 's/"fmt": "e4m3_fnuz"/"fmt": "e4m3"/' "$work/fnuz/config.json" >"$work/fnuz_as_ocp/config.json"
grep -q '"fmt": "e4m3_fnuz"' "$work/ocp_as_fnuz/config.json" || fail "the fixture's config.json has no fmt to relabel"
check "OCP bytes claimed FNUZ" "but the bytes are OCP e4m3" "$dsv4" logits --model "$work/ocp_as_fnuz" --tokens "$fixture/tokens.npy" --out "$work/x.npy"
check "FNUZ bytes claimed OCP" "but the bytes are FNUZ e4m3" "$dsv4" logits --model "$work/fnuz_as_ocp" --tokens "$fixture/tokens.npy" --out "$work/x.npy"
check "inspect refuses the mislabel" "contradict" "$dsv4" inspect --model "$work/ocp_as_fnuz"
check "convert refuses the mislabel" "but the bytes are OCP e4m3" "$dsv4" convert-checkpoint --model "$work/ocp_as_fnuz" --out "$work/o6" --fp8 ocp

if [[ $failures -ne 0 ]]; then echo "$failures failure(s)"; exit 1; fi
echo "all convert-checkpoint CLI checks passed"
