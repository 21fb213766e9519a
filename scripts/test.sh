#!/usr/bin/env bash
# Runs every test dsv4 has on this machine; this is what CI runs (.ci/run).
#   1. installs missing dependencies (scripts/install-deps.sh)
#   2. dev build (Debug + ASan + UBSan), the format and lint checks (scripts/lint.sh), and every CTest suite (unit,
#      golden, e2e, the layering check; GPU suites skip without a GPU)
#   3. libFuzzer targets, each for a bounded time
#   4. compile check of the CUDA backend when nvcc is present (no GPU needed)
set -euo pipefail
repo_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo_root"
jobs=${DSV4_JOBS:-$(nproc)}
stage() { echo "== $* ($(date -u +%H:%M:%S), ${SECONDS}s elapsed)"; }
fuzz_seconds=${DSV4_FUZZ_SECONDS:-12}

scripts/install-deps.sh

stage "dev build (ASan + UBSan)"
cmake --preset dev >/dev/null
cmake --build --preset dev -j "$jobs"

stage "format and lint"
scripts/lint.sh build/dev

stage "tests"
# (the dev test preset sets OMP_WAIT_POLICY=PASSIVE: tests run side by side on few cores, and spinning OpenMP workers
# would steal the other tests' cores)
ctest --preset dev -j "$jobs" --timeout 900

if [[ ${DSV4_SKIP_FUZZ:-0} != 1 ]]; then
  stage "fuzz targets (${fuzz_seconds}s each)"
  cmake --preset fuzz >/dev/null
  fuzz_targets=$(cd tests/fuzz && ls fuzz_*.cpp | sed 's/\.cpp$//')
  # shellcheck disable=SC2086
  cmake --build --preset fuzz -j "$jobs" --target $fuzz_targets
  for fuzzer in build/fuzz/tests/fuzz/fuzz_*; do
    [[ -x $fuzzer ]] || continue
    name=$(basename "$fuzzer")
    corpus="tests/fuzz/corpus/${name#fuzz_}"
    mkdir -p "build/fuzz/corpus/$name"
    echo "-- $name"
    "$fuzzer" -max_total_time="$fuzz_seconds" -print_final_stats=0 "build/fuzz/corpus/$name" \
      $( [[ -d $corpus ]] && echo "$corpus" ) 2>&1 | tail -n 3
  done
fi

if [[ ${DSV4_SKIP_CUDA:-0} != 1 ]] && { command -v nvcc >/dev/null 2>&1 || [[ -x /usr/local/cuda/bin/nvcc ]]; }; then
  stage "CUDA backend compile check (sm_90a)"
  # CMAKE_OPTIMIZE_DEPENDENCIES: a static library's objects then do not wait for the libraries it links, so the
  # object files below build without the rest of the tree.
  cmake --preset cuda -DCMAKE_OPTIMIZE_DEPENDENCIES=ON >/dev/null
  # Object files only: the CUDA backend, the NCCL transport, the GPU test programs and every other source compiled
  # differently with CUDA on. The rest of the code is the dev build's, compiled and tested above; compiling it again in
  # Release would double this stage's time for nothing. Linking is checked where the binaries are built for the
  # device machine (docs/gpu-validation.md).
  cuda_dirs='/(dsv4_backend_cuda|dsv4_dist_nccl|ops_cuda|golden_cuda|golden_dist_cuda)[.]dir/'
  cuda_files=$(grep -rlE 'DSV4_WITH_(CUDA|NCCL)' src apps tests --include='*.cpp' | xargs -r -n1 basename \
    | sed 's/[.]cpp$//' | paste -sd'|' -)
  mapfile -t cuda_objects < <(ninja -C build/cuda -t targets all | sed -n 's/^\([^:]*[.]o\): .*/\1/p' \
    | grep -E "${cuda_dirs}|/(${cuda_files:-none})[.]cpp[.]o\$")
  echo "${#cuda_objects[@]} object files"
  cmake --build --preset cuda -j "$jobs" --target "${cuda_objects[@]}"
fi
stage "all tests passed"
