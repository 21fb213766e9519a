#!/usr/bin/env bash
# CLI usage: an unknown command is named (not "A subcommand is required"), and `serve --help` shows the defaults an
# operator needs to read (issue 22); bench offline's oracle mode plans its capacity.
set -u
dsv4=$1
failures=0
expect() {  # description, text the output must contain, output
    if [[ $3 != *"$2"* ]]; then
        echo "FAIL: $1: no '$2' in: $3"
        failures=$((failures + 1))
    else
        echo "ok: $1"
    fi
}

out=$("$dsv4" bogus 2>&1)
rc=$?
[[ $rc -ne 0 ]] || { echo "FAIL: dsv4 bogus exited 0"; failures=$((failures + 1)); }
expect "unknown command named" "unknown command 'bogus'" "$out"
expect "commands listed" "serve" "$out"

help=$("$dsv4" serve --help 2>&1)
expect "port default" "=8000" "$help"
expect "host default" "=127.0.0.1" "$help"
expect "max-num-seqs default" "=64" "$help"
expect "max-num-queued-reqs default" "=1024" "$help"
expect "request-read-timeout default" "3600]=30" "$help"
expect "max-request-bytes default" "=8388608" "$help"
expect "keep-alive default" "=10" "$help"
expect "n is capped by max-num-seqs" "most completions (n)" "$help"
for flag in --protect-health --public-metrics --allowed-origins --no-webui; do
    expect "$flag listed" "$flag" "$help"
done

# bench offline's oracle mode plans the capacity (the draft stage's layer included) before anything is allocated, as
# the plain mode does: on a GPU a model that cannot fit is refused with its bytes and flags (not in cudaMalloc).
oracle=$("$dsv4" bench offline --device cpu --preset flash --numerics exact --batch 1 --context 256 --steps 1 \
    --speculative-config '{"method":"mtp","num_speculative_tokens":3}' 2>&1)
expect "oracle mode plans its capacity" "capacity plan (host memory)" "$oracle"
expect "the draft stage's experts counted (44 layers, not 43: 137.06)" "routed experts 140.25 GiB" "$oracle"

if ((failures)); then
    echo "$failures failure(s)"
    exit 1
fi
echo "all usage checks passed"
