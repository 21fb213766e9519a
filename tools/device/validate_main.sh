#!/usr/bin/env bash
# One device call that validates main on the H200: the GPU op and golden suites, then the offline benchmarks behind
# the open performance issues (fast numerics, fp8 state, synthetic flash-160), with the speculative oracle points.
# Carry .devpack/devbin.tar.xz (tools/device/stage.sh + pack.sh). Logs and JSON go to $OUT; a summary table is last.
#   tools/device/validate_main.sh [suite...]   (default: ops golden bench oracle)
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
[[ -d .devbin ]] || tar xJf .devpack/devbin.tar.xz
export LD_LIBRARY_PATH="$PWD/.devbin/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export DSV4_SOURCE_DIR="$PWD"
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
summary=()
run() {  # name, seconds, command...
    local name=$1 limit=$2
    shift 2
    local start=$SECONDS
    timeout "$limit" "$@" >"$OUT/$name.log" 2>&1
    local rc=$?
    summary+=("$(printf '%-12s rc=%-3s %4ss  %s' "$name" "$rc" "$((SECONDS - start))" \
        "$(grep -E '^\[  (PASSED|FAILED|SKIPPED) +\]' "$OUT/$name.log" | tr -s ' ' | tr '\n' ' ')")")
}
bench=(.devbin/dsv4 bench offline --preset flash-160 --numerics fast)
suites=("$@")
((${#suites[@]})) || suites=(ops golden bench oracle)
for suite in "${suites[@]}"; do
    case $suite in
        ops) run ops 300 .devbin/ops_cuda ;;
        golden) run golden 200 .devbin/golden_cuda ;;
        bench) run bench 240 "${bench[@]}" --batch 1,8,64 --context 1000 --prefill 2048,8192 --steps 4 \
                   --json "$OUT/offline.json" ;;
        oracle) run oracle3 150 "${bench[@]}" --batch 1 --context 1000 --steps 8 --json "$OUT/oracle3.json" \
                    --speculative-config '{"method":"mtp","num_speculative_tokens":3}' --oracle-acceptance 3
                run oracle7 150 "${bench[@]}" --batch 1 --context 1000 --steps 8 --json "$OUT/oracle7.json" \
                    --speculative-config '{"method":"mtp","num_speculative_tokens":7}' --oracle-acceptance 5.6 ;;
        dist) LD_LIBRARY_PATH="$LD_LIBRARY_PATH:/usr/local/cuda/lib:/usr/local/cuda/lib64" \
                  run dist 200 .devbin/golden_dist_cuda --gtest_filter='CudaExpertTier*' ;;
        oversize) run oversize 120 .devbin/dsv4 serve --synthetic-weights flash --device cuda --numerics fast \
                      --port 0 ;;  # the full 256-expert preset: refused before any allocation, naming the flags
        sanitizer) run sanitizer 280 compute-sanitizer --tool memcheck --error-exitcode 3 .devbin/ops_cuda \
                       --gtest_filter='-CudaOps.MoeFlashWidths' ;;
        e2e) run e2e 400 tools/device/e2e_cuda.sh ;;
    esac
done
for f in "$OUT"/ops.log "$OUT"/golden.log "$OUT"/sanitizer.log; do
    [[ -f $f ]] && grep -h -B2 -A8 "Failure\|FAILED \|ERROR SUMMARY" "$f" | head -60
done
for f in bench oracle3 oracle7 dist oversize e2e; do
    [[ -f $OUT/$f.log ]] && { echo "== $f"; grep -v '^$' "$OUT/$f.log" | tail -28; }
done
printf '%s\n' "${summary[@]}"
