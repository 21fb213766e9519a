// Whole models on the GPU with FNUZ (MI300X's FP8 dialect): the weights converted at load and decoded in software,
// the activation quantisation and the fp8 caches in FNUZ. Exact numerics give the OCP run's logits bit for bit and
// match the HF reference; reference numerics match the CPU backend's FNUZ reference numerics; fast numerics (kept off
// the OCP FP8 tensor cores) stay within the reference numerics' own error. Skipped without a GPU.
#include <gtest/gtest.h>

#include "../../ops/cuda/require_gpu.h"
#include "backend/cuda/cuda_factory.h"
#include "golden_support.h"

namespace dsv4::golden {
namespace {

std::unique_ptr<Backend> gpu_backend(Numerics numerics, Fp8Dialect dialect) {
    CudaOptions options = cuda_options_from_env({});
    options.fp8_dialect = dialect;
    return make_cuda_backend(numerics, options);
}

Fixture open_gpu(const std::string& name, Numerics numerics, Fp8Dialect dialect,
                 const std::string& logits = "logits.npy", StateDtype kv_dtype = StateDtype::kF32) {
    return open_fixture(name, numerics, logits, gpu_backend(numerics, dialect), kv_dtype);
}

size_t differing(const std::vector<float>& a, const std::vector<float>& b) {
    size_t n = 0;
    for (size_t i = 0; i < a.size(); ++i) n += a[i] != b[i] || !std::isfinite(a[i]);
    return n;
}

TEST(CudaFp8DialectGolden, FnuzExactIsBitIdenticalToOcp) {
    DSV4_REQUIRE_GPU();
    for (const auto& name : fixture_names()) {
        for (auto [chunk, decode_from] : {std::pair<int64_t, int64_t>{0, -1}, {37, 250}}) {
            Fixture ocp = open_gpu(name, Numerics::kExact, Fp8Dialect::kOcp);
            Fixture fnuz = open_gpu(name, Numerics::kExact, Fp8Dialect::kFnuz);
            const std::vector<float> a = run_logits(ocp, chunk, decode_from), b = run_logits(fnuz, chunk, decode_from);
            const double err = relative_max_error(b, fnuz.reference.values);
            std::printf("[ golden-cuda ] %s exact FNUZ (chunk %lld): %zu logits differ from OCP; vs HF %.3e\n",
                        name.c_str(), static_cast<long long>(chunk), differing(a, b), err);
            EXPECT_EQ(differing(a, b), 0u) << name;
            EXPECT_LE(err, 1e-4) << name;
        }
    }
}

// The FNUZ activation quantisation (max 240), K=V rows (240) and indexer keys (224) on the device against the host.
TEST(CudaFp8DialectGolden, FnuzReferenceNumericsMatchTheCpu) {
    DSV4_REQUIRE_GPU();
    for (const auto& name : fixture_names()) {
        Fixture cpu = open_fixture(name, Numerics::kReference, "logits_reference.npy",
                                   make_cpu_backend(Numerics::kReference, 0, Fp8Dialect::kFnuz), StateDtype::kFp8);
        Fixture gpu = open_gpu(name, Numerics::kReference, Fp8Dialect::kFnuz, "logits_reference.npy", StateDtype::kFp8);
        const std::vector<float> c = run_logits(cpu, 0, -1), g = run_logits(gpu, 0, -1);
        const double err = relative_max_error(g, c);
        std::printf("[ golden-cuda ] %s reference numerics FNUZ, fp8 state: vs CPU %.3e (%zu of %zu logits differ)\n",
                    name.c_str(), err, differing(g, c), g.size());
        EXPECT_LE(err, 1e-2) << name;  // the bound of the OCP comparison (golden_cuda_test.cpp)
    }
}

TEST(CudaFp8DialectGolden, FnuzFastNumericsErrorBelowReference) {
    DSV4_REQUIRE_GPU();
    for (const auto& name : fixture_names()) {
        Fixture fast = open_gpu(name, Numerics::kFast, Fp8Dialect::kFnuz);
        const std::vector<float> hf_reference =
            read_npy_f32((fixture_dir(name) / "logits_reference.npy").string()).values;
        const std::vector<float> got = run_logits(fast, 0, -1);
        const double err = relative_max_error(got, fast.reference.values);
        const double reference_err = relative_max_error(hf_reference, fast.reference.values);
        std::printf("[ golden-cuda ] %s fast numerics FNUZ: vs exact %.3e; reference numerics vs exact %.3e\n",
                    name.c_str(), err, reference_err);
        EXPECT_LE(err, 2.0 * reference_err) << name;
    }
}

}  // namespace
}  // namespace dsv4::golden
