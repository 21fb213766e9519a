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
# Runs argv and prints the child's peak resident memory.
max_rss='import resource, subprocess, sys; rc = subprocess.call(sys.argv[1:]); print("peak RSS %.2f GiB" % (resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 2**20)); sys.exit(rc)'
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
        demo) run demo 200 tools/device/demo_model_gpu.sh ;;
        oracle64) run oracle64 150 "${bench[@]}" --batch 64 --context 1000 --steps 4 --json "$OUT/oracle64.json" \
                      --speculative-config '{"method":"mtp","num_speculative_tokens":3}' --oracle-acceptance 3 ;;
        fnuz) run fnuz 150 "${bench[@]}" --fp8-dialect fnuz --batch 1,64 --context 1000 --prefill 2048 --steps 4 \
                  --json "$OUT/fnuz.json" ;;
        tiers8) run tiers8 200 python3 -c "$max_rss" "${bench[@]/flash-160/flash}" --layers 8 --gpu-experts 200 \
                    --batch 1,64 --context 1000 --prefill 0 --steps 4 --json "$OUT/tiers8.json" ;;
        sanitizer) run sanitizer 280 compute-sanitizer --tool memcheck --error-exitcode 3 .devbin/ops_cuda \
                       --gtest_filter='-CudaOps.MoeFlashWidths' ;;
        e2e) run e2e 300 tools/device/e2e_cuda.sh ;;
        e2e_spec) E2E_MODEL=models/demo E2E_EXTRA_FLAGS='--speculative-config={"method":"mtp","num_speculative_tokens":3}' \
                      run e2e_spec 200 tools/device/e2e_cuda.sh concurrency ;;
        tiers) run tiers 300 "${bench[@]/flash-160/flash}" --gpu-experts 200 --batch 1,64 --context 1000 --prefill 0 \
                   --steps 4 --json "$OUT/tiers.json" ;;
    esac
done
for f in "$OUT"/ops.log "$OUT"/golden.log "$OUT"/sanitizer.log; do
    [[ -f $f ]] && grep -h -B2 -A8 "Failure\|FAILED \|ERROR SUMMARY" "$f" | head -60
done
for f in bench oracle3 oracle7 oracle64 fnuz tiers8 demo dist oversize e2e e2e_spec tiers; do
    [[ -f $OUT/$f.log ]] && { echo "== $f"; grep -v '^$' "$OUT/$f.log" | tail -28; }
done
printf '%s\n' "${summary[@]}"
