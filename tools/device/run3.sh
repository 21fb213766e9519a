set -uo pipefail
tar xJf .devpack/devbin.tar.xz && export LD_LIBRARY_PATH=$PWD/.devbin/lib DSV4_SOURCE_DIR=$PWD
S=$SECONDS
.devbin/ops_cuda > $OUT/ops.log 2>&1; echo "ops rc=$? $((SECONDS-S))s"; grep -E "FAILED|PASSED" $OUT/ops.log | tail -8
S=$SECONDS
.devbin/golden_cuda > $OUT/golden.log 2>&1; echo "golden rc=$? $((SECONDS-S))s"; grep -E "FAILED|PASSED" $OUT/golden.log | tail -5
S=$SECONDS
timeout 200 compute-sanitizer --tool memcheck --error-exitcode 3 .devbin/ops_cuda --gtest_filter='CudaMoeDecode*:CudaOps.MoeFlagsOutOfRangeExpertIds:*Fnuz*:*Dialect*' > $OUT/memcheck.log 2>&1; echo "memcheck rc=$? $((SECONDS-S))s"; grep -E "ERROR SUMMARY|PASSED|FAILED" $OUT/memcheck.log | tail -3
S=$SECONDS
.devbin/dsv4 bench offline --preset flash-160 --numerics fast --batch 1,8,64 --context 1000 --prefill 0 --steps 4 --json $OUT/bench.json 2>&1 | grep -A1 -E "^[0-9]+ +1000"; echo "bench $((SECONDS-S))s"
S=$SECONDS
.devbin/dsv4 bench kernels --rows 1 --tokens 1,8 --json $OUT/kernels.json > $OUT/kernels.txt 2>&1; grep -E "auto|fused|per_pair|copy" $OUT/kernels.txt | grep -v "^ " | head -30; echo "kernels $((SECONDS-S))s"
