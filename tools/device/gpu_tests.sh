#!/usr/bin/env bash
# Runs the GPU suites on the device machine from binaries built here (tools/device/stage.sh puts them and the shared
# libraries they need in .devbin/). Logs go to $OUT; a summary is printed last.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
export LD_LIBRARY_PATH="$PWD/.devbin/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export DSV4_SOURCE_DIR="$PWD"
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.mem --format=csv
summary=()
# tools/device/pack.sh's carry (or several packs, one a call, when the programs do not fit one carry together).
if [[ ! -d .devbin ]]; then for pack in .devpack/*.tar.xz; do tar xJf "$pack"; done; fi
fast=(.devbin/dsv4 bench offline --preset flash-160 --numerics fast)
# Runs argv and prints the child's peak resident memory.
max_rss='import resource, subprocess, sys; rc = subprocess.call(sys.argv[1:]); print("peak RSS %.2f GiB" % (resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 2**20)); sys.exit(rc)'
# DEVICE_BUDGET_S: seconds the whole script may take (a device command's limit); a suite that would start with less
# than 20 s left is skipped and said so, and each runs under what is left, so the logs of the suites run come back.
budget=${DEVICE_BUDGET_S:-0}
run() {  # name, command...
    local name=$1; shift
    local start=$SECONDS
    if ((budget > 0)); then
        local left=$((budget - SECONDS))
        ((left < 20)) && { summary+=("$name skipped: ${left} s of DEVICE_BUDGET_S left"); return 1; }
        set -- timeout "$left" "$@"
    fi
    "$@" >"$OUT/$name.log" 2>&1
    local rc=$?
    summary+=("$name rc=$rc $((SECONDS - start))s $(grep -E '^\[  (PASSED|FAILED|SKIPPED) +\]' "$OUT/$name.log" | sort | uniq -c | tr -s ' ' | tr '\n' ';')")
    return $rc
}
for suite in "$@"; do
    case $suite in
        ops) run ops .devbin/ops_cuda ;;
        ops_next) [[ -x .devbin/ops_cuda_next ]] && run ops_next .devbin/ops_cuda_next ;;  # the candidate's kernels
        golden) run golden .devbin/golden_cuda ;;
        sanitizer) run sanitizer timeout 280 compute-sanitizer --tool memcheck --error-exitcode 3 .devbin/ops_cuda \
                       --gtest_filter='-CudaOps.MoeFlashWidths' ;;
        tame) run tame python3 tools/fixtures/make_fixtures.py /tmp/fx_tame --variants tame_reference \
                  && tar czf "$OUT/tame_fixture.tar.gz" -C /tmp/fx_tame . ;;
        bench4ops) DSV4_PROFILE_OPS=1 run bench4ops .devbin/dsv4 bench offline --preset flash --layers 4 --batch 1,64 \
                    --context 7000 --prefill 0 --steps 2 ;;
        bench4) run bench4 .devbin/dsv4 bench offline --preset flash --layers 4 --batch 1,8,64 --context 2048,8192 \
                    --prefill 1024,8192 --steps 6 --json "$OUT/bench4.json" ;;
        bench43) run bench43 .devbin/dsv4 bench offline --preset flash-160 --batch 1,8,64 --context 1000,7000 \
                     --prefill 2048 --steps 8 --json "$OUT/bench43.json" ;;
        bench43fast) run bench43fast .devbin/dsv4 bench offline --preset flash-160 --numerics fast --batch 1,64 \
                         --context 1000 --prefill 2048,8192 --steps 4 --json "$OUT/bench43fast.json" ;;
        e2e) run e2e tools/device/e2e_cuda.sh ;;
        demo) run demo tools/device/demo_model_gpu.sh ;;
        hf) run hf python3 tools/bench/hf_baseline.py --layers 4 --prefill 1024,8192 --decode-batch 1,8 --context 2048 ;;
        # Main's validation after a merge (docs/gpu-validation.md, 2026-12-02): fast numerics, fp8 state, flash-160.
        bench) run bench timeout 240 "${fast[@]}" --batch 1,8,64 --context 1000 --prefill 2048,8192 --steps 4 \
                   --json "$OUT/offline.json" ;;
        # The warp-specialized W4A8 kernel (DSV4_EXPERT_WS=1) at the sizes it is for: decode B=64 and prefill 8K.
        benchws) DSV4_EXPERT_WS=1 run benchws timeout 120 "${fast[@]}" --batch 64 --context 1000 --prefill 8192 \
                     --steps 4 --json "$OUT/offline_ws.json" ;;
        # Serving, the seeds' protocol (issues 15 and 16: C1 TPOT, C64 aggregate with the host share of a step).
        serve) run serve timeout 200 tools/device/serve_bench.sh flash-160 "1 64" ;;
        # Issue 17: C64 without and with MTP drafts (oracle acceptance length 3, greedy drafts: verification on the
        # device), one server each.
        spec) run serve_plain timeout 220 tools/device/serve_bench.sh flash-160 "64" \
                  && mv "$OUT/serve_c64.json" "$OUT/plain_c64.json"
              SPEC_CONFIG='{"method":"mtp","num_speculative_tokens":3,"oracle_acceptance_length":3,"draft_sample_method":"greedy"}' \
                  run serve_spec timeout 250 tools/device/serve_bench.sh flash-160 "64" ;;
        # Issue 19: a 380K prompt cold into a 1.5 GiB device state, 50 x 8K prompts evict it to the host tier, then
        # the same prompt again (its TTFT from the host tier).
        ttft) EVICT_TOKENS=409600 FILLER_TOKENS=8192 run ttft timeout 570 tools/device/tier_ttft.sh 380000 flash-160 \
                  1610612736 16 ;;
        oracle) run oracle3 timeout 150 "${fast[@]}" --batch 1 --context 1000 --steps 8 --json "$OUT/oracle3.json" \
                    --speculative-config '{"method":"mtp","num_speculative_tokens":3}' --oracle-acceptance 3
                run oracle7 timeout 150 "${fast[@]}" --batch 1 --context 1000 --steps 8 --json "$OUT/oracle7.json" \
                    --speculative-config '{"method":"mtp","num_speculative_tokens":7}' --oracle-acceptance 5.6 ;;
        oracle64) run oracle64 timeout 150 "${fast[@]}" --batch 64 --context 1000 --steps 4 --json "$OUT/oracle64.json" \
                      --speculative-config '{"method":"mtp","num_speculative_tokens":3}' --oracle-acceptance 3 ;;
        fnuz) run fnuz timeout 150 "${fast[@]}" --fp8-dialect fnuz --batch 1,64 --context 1000 --prefill 2048 \
                  --steps 4 --json "$OUT/fnuz.json" ;;
        tiers8) run tiers8 timeout 200 python3 -c "$max_rss" "${fast[@]/flash-160/flash}" --layers 8 --gpu-experts 200 \
                    --batch 1,64 --context 1000 --prefill 0 --steps 4 --json "$OUT/tiers8.json" ;;
        tiers) run tiers timeout 300 "${fast[@]/flash-160/flash}" --gpu-experts 200 --batch 1,64 --context 1000 \
                   --prefill 0 --steps 4 --json "$OUT/tiers.json" ;;
        tierskew) run tierskew timeout 300 "${fast[@]/flash-160/flash}" --gpu-experts 200 --synthetic-routing-skew 1 \
                      --batch 1,64 --context 1000 --prefill 0 --steps 8 --json "$OUT/tierskew.json" ;;
        # Issue 19's batch-1 target: decode steps of up to 8 tokens read the host experts in place (graphs), batch
        # 64 is planned (fetches); the PCIe ceilings are measured in the same run.
        tierplace) run tierplace timeout 300 "${fast[@]/flash-160/flash}" --gpu-experts 200 --synthetic-routing-skew 1 \
                       --expert-read-in-place-tokens 8 --batch 1,8,64 --context 1000 --prefill 0 --steps 12 \
                       --json "$OUT/tierplace.json" ;;
        # A candidate build staged as .devbin/dsv4_next (stage.sh PATH/dsv4_next): decode A/B against main's dsv4, and
        # the fused MoE down kernel's pair groups (DSV4_MOE_DOWN_GROUP) in the kernel bench.
        ab) [[ -x .devbin/dsv4_next ]] && run ab timeout 420 tools/device/ab_bench.sh .devbin/dsv4 .devbin/dsv4_next 2 \
                --preset flash-160 --numerics fast --batch 1,8,64 --context 1000 --prefill 0 --steps 4 ;;
        moegroups) for g in 2 3 6; do
                       [[ -x .devbin/dsv4_next ]] && DSV4_MOE_DOWN_GROUP=$g run "moe$g" timeout 120 .devbin/dsv4_next \
                           bench kernels --rows 1,8 --tokens 1,8 --json "$OUT/kernels_next_moe$g.json"
                   done
                   [[ -x .devbin/dsv4_next ]] && DSV4_MOE_UP_ROWS=2 run moe6up2 timeout 120 .devbin/dsv4_next bench \
                       kernels --rows 1,8 --tokens 1,8 --json "$OUT/kernels_next_moe6up2.json"
                   run kernels_main timeout 120 .devbin/dsv4 bench kernels --rows 1,8 --tokens 1,8 \
                       --json "$OUT/kernels_main.json" ;;
        dist) LD_LIBRARY_PATH="$LD_LIBRARY_PATH:/usr/local/cuda/lib:/usr/local/cuda/lib64" \
                  run dist timeout 200 .devbin/golden_dist_cuda --gtest_filter='CudaExpertTier*' ;;
        oversize) run oversize timeout 120 .devbin/dsv4 serve --synthetic-weights flash --device cuda --numerics fast \
                      --port 0 ;;  # the full 256-expert preset: refused before any allocation, naming the flags
        # Where a decode step's time goes: per op at batch 1, 8 and 64 (eager, events between ops), then per kernel
        # under ncu at batch 1 (4 layers, clocks free). The filter keeps ncu off the model build's fill kernels
        # (profiled, they use up --launch-count and minutes) and off fp8_gemv_kernel, which ncu (CUDA 13.0) failed
        # to profile on 2026-12-03, ending the run.
        profile) DSV4_PROFILE_OPS=1 run profile timeout 120 "${fast[@]}" --batch 1,8,64 --context 1000 --prefill 0 \
                     --steps 2 --json "$OUT/profile.json" ;;
        ncudecode) run ncudecode timeout 240 ncu --clock-control none --section SpeedOfLight --section LaunchStats \
                       --section Occupancy --section WarpStateStats --csv --page details --kernel-name-base function \
                       --kernel-name regex:'^(?!.*(fill_|expand_block|nvjet|fp8_gemv))' --launch-count 300 \
                       "${fast[@]}" --layers 4 --batch 1 --context 1000 --prefill 0 --steps 1 --enforce-eager \
                       && python3 tools/device/ncu_summary.py "$OUT/ncudecode.log" >"$OUT/ncudecode.txt" ;;
        # SASS of the decode GEMVs with an opcode count (cuobjdump's -fun wants mangled names: cut by the header).
        sass) for kernel in expert_gemv_fp4_kernel fp8_gemv_kernel; do
                  cuobjdump -sass .devbin/dsv4 | awk -v k="$kernel" '/Function : /{on = index($0, k) > 0} on' \
                      >"$OUT/sass_$kernel.txt"
                  echo "== $kernel: $(grep -c '/\*[0-9a-f]*\*/' "$OUT/sass_$kernel.txt") instructions" >>"$OUT/sass.log"
                  grep -oE '/\*[0-9a-f]{4,}\*/ +(@!?U?P[0-9T] +)?[A-Z0-9_]+' "$OUT/sass_$kernel.txt" | awk '{print $NF}' \
                      | sort | uniq -c | sort -rn | head -25 >>"$OUT/sass.log"
              done ;;
        # Where the per-pair W4A8 GEMV's instructions go: SASS lines with their executed counts (ncu SourceCounters)
        # for the W1+W3 and W2 launches at one token, summarised (opcode mix, loop body vs prologue).
        ncusource) run ncusource timeout 120 ncu --clock-control none --section SourceCounters \
                       --kernel-name regex:expert_gemv_fp4 --launch-count 2 --page source --print-source sass --csv \
                       .devbin/dsv4 bench kernels --rows 1 --tokens 1 --filter experts \
                       && python3 tools/device/ncu_source_summary.py "$OUT/ncusource.log" >"$OUT/ncusource.txt" ;;
        e2e_spec) E2E_MODEL=models/demo E2E_EXTRA_FLAGS='--speculative-config={"method":"mtp","num_speculative_tokens":3}' \
                      run e2e_spec timeout 200 tools/device/e2e_cuda.sh concurrency ;;
    esac
done
grep -h "golden-cuda\|Failure\|error" "$OUT"/golden.log 2>/dev/null | head -40
grep -h -B2 -A6 "Failure" "$OUT"/ops.log "$OUT"/ops_next.log 2>/dev/null | head -60
grep -h "ERROR SUMMARY\|========= " "$OUT"/sanitizer.log 2>/dev/null | head -20
tail -5 "$OUT"/tame.log 2>/dev/null
grep -h "e2e \|FAILED\|SKIPPED\|passed\|failed" "$OUT"/e2e.log 2>/dev/null | tail -30
cat "$OUT"/demo.log 2>/dev/null
grep -h "" "$OUT"/dist.log "$OUT"/oversize.log 2>/dev/null | tail -8
cat "$OUT"/ncudecode.txt "$OUT"/ncusource.txt "$OUT"/sass.log 2>/dev/null | head -80
cat "$OUT"/tier_ttft.json 2>/dev/null
for f in profile bench4ops bench4 bench43 bench43fast hf bench benchws serve serve_plain serve_spec oracle3 oracle7 oracle64 fnuz tiers8 tiers tierskew tierplace e2e_spec \
    kernels_main moe2 moe3 moe6 moe6up2 ab; do [[ -f $OUT/$f.log ]] && { echo "== $f"; grep -v "^$" "$OUT/$f.log" | tail -30; }; done
# Every log and JSON in one archive as well: a device call may bring back only some of $OUT's files.
tar czf /tmp/gpu_tests_results.tgz -C "$OUT" . && mv /tmp/gpu_tests_results.tgz "$OUT/results.tgz"
printf '%s\n' "${summary[@]}"
