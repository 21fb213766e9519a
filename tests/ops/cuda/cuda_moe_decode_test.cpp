// The fused MoE decode path (two launches: gate/up + SwiGLU, down + combine) against the unfused per-pair GEMVs it
// replaces (bit for bit: same row arithmetic, same SwiGLU, same combine order) and against the CPU backend, on fresh
// random inputs: FP4 and FP8 experts, with and without a shared expert, 1 to 9 tokens, odd widths. Skipped without a
// GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <deque>
#include <random>
#include <string>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/linear_plan.h"
#include "op_test_support.h"

namespace dsv4::ops_test {
namespace {

struct MoeDecodeCase {
    WeightFormat format;
    int64_t d, inter, tokens;
    bool shared;
};

struct MoeInputs {
    std::deque<HostWeight> host;  // the CPU backend reads weights in place: keep them alive
    MoeWeights cpu, gpu;
};

MoeInputs make_moe(Pair& p, const MoeDecodeCase& mc, int experts) {
    MoeInputs in;
    for (int e = 0; e < experts; ++e) {
        const HostWeight& w1 = in.host.emplace_back(make_weight(mc.format, mc.inter, mc.d));
        const HostWeight& w2 = in.host.emplace_back(make_weight(mc.format, mc.d, mc.inter));
        const HostWeight& w3 = in.host.emplace_back(make_weight(mc.format, mc.inter, mc.d));
        in.cpu.experts.push_back({upload(*p.cpu, w1), upload(*p.cpu, w2), upload(*p.cpu, w3)});
        in.gpu.experts.push_back({upload(*p.gpu, w1), upload(*p.gpu, w2), upload(*p.gpu, w3)});
    }
    if (mc.shared) {
        const HostWeight& s1 = in.host.emplace_back(make_weight(WeightFormat::kFp8Block, mc.inter, mc.d));
        const HostWeight& s2 = in.host.emplace_back(make_weight(WeightFormat::kFp8Block, mc.d, mc.inter));
        const HostWeight& s3 = in.host.emplace_back(make_weight(WeightFormat::kFp8Block, mc.inter, mc.d));
        in.cpu.shared = ExpertWeights{upload(*p.cpu, s1), upload(*p.cpu, s2), upload(*p.cpu, s3)};
        in.gpu.shared = ExpertWeights{upload(*p.gpu, s1), upload(*p.gpu, s2), upload(*p.gpu, s3)};
    }
    return in;
}

// Distinct random experts per token and random positive routing weights.
void random_routing(int64_t tokens, int k, int experts, std::vector<float>& ids, std::vector<float>& weights) {
    std::mt19937 gen(static_cast<unsigned>(tokens * 7919 + experts));
    std::vector<int32_t> all(experts);
    ids.assign(tokens * k, 0.0f);
    weights.assign(tokens * k, 0.0f);
    for (int64_t t = 0; t < tokens; ++t) {
        for (int e = 0; e < experts; ++e) all[e] = e;
        std::shuffle(all.begin(), all.end(), gen);
        for (int j = 0; j < k; ++j) {
            int32_t id = all[j];
            std::memcpy(&ids[t * k + j], &id, sizeof(id));
            weights[t * k + j] = std::uniform_real_distribution<float>(0.05f, 1.0f)(gen);
        }
    }
}

class CudaMoeDecode : public ::testing::TestWithParam<MoeDecodeCase> {};

TEST_P(CudaMoeDecode, FusedMatchesUnfusedAndCpu) {
    DSV4_REQUIRE_GPU();
    const MoeDecodeCase mc = GetParam();
    const int experts = 8, k = 6;
    Pair p(Numerics::kFast);
    p.step(simple_batch(mc.tokens));
    MoeInputs in = make_moe(p, mc, experts);
    std::vector<float> ids_bits, weights;
    random_routing(mc.tokens, k, experts, ids_bits, weights);
    const auto h = random_floats(mc.tokens * mc.d);
    const int64_t n = mc.tokens, d = mc.d;
    Tensor hc = make_tensor(*p.cpu, {n, d}, h), hg = make_tensor(*p.gpu, {n, d}, h);
    Tensor wc = make_tensor(*p.cpu, {n, k}, weights), wg = make_tensor(*p.gpu, {n, k}, weights);
    Tensor ic = p.cpu->alloc(DType::kI32, {n, k}), ig = p.gpu->alloc(DType::kI32, {n, k});
    std::memcpy(ic.data, ids_bits.data(), ids_bits.size() * sizeof(float));
    p.gpu->from_host(ig, ids_bits.data());
    auto* cuda = dynamic_cast<cuda::CudaBackend*>(p.gpu.get());
    ASSERT_NE(cuda, nullptr);
    auto run = [&](const char* path) {
        cuda->force_paths("", path);
        Tensor y = make_tensor(*p.gpu, {n, d});  // NaN-poisoned
        p.gpu->moe(hg, in.gpu, wg, ig, 7.0f, y);
        return read(*p.gpu, y);
    };
    const std::vector<float> unfused = run("per_pair_gemv"), fused = run("fused_gemv");
    cuda->force_paths("", "");
    Tensor yc = make_tensor(*p.cpu, {n, d});
    p.cpu->moe(hc, in.cpu, wc, ic, 7.0f, yc);
    const std::vector<float> cpu = read(*p.cpu, yc);
    ASSERT_EQ(fused.size(), unfused.size());
    for (size_t i = 0; i < fused.size(); ++i) {
        ASSERT_TRUE(std::isfinite(fused[i])) << "element " << i;
        ASSERT_EQ(std::memcmp(&fused[i], &unfused[i], sizeof(float)), 0)
            << "element " << i << ": fused " << fused[i] << " unfused " << unfused[i];
    }
    // The shared expert's FP8 linears run on FP8 tensor cores (the FP8 GEMV up to 8 tokens, cuBLASLt above) with
    // activations quantized per 128 to e4m3 (the CPU's exact numerics do not round them): a few percent, as in
    // CudaOps.MoeFlashWidths. The routed part alone is float32 against float32.
    const cuda::LinearProblem shared_problem{Numerics::kFast, in.gpu.shared ? in.gpu.shared->w1 : WeightRef{}, n, d};
    const cuda::LinearPath shared_path =
        mc.shared ? cuda::choose_linear_path(shared_problem, cuda->linear_tuning(), "") : cuda::LinearPath::kGemv;
    const bool shared_fp8 = shared_path == cuda::LinearPath::kFp8Lt || shared_path == cuda::LinearPath::kFp8Wgmma ||
                            shared_path == cuda::LinearPath::kFp8Gemv;
    EXPECT_LE(rel_l2(fused, cpu), shared_fp8 ? 5e-2 : 1e-5);
}

const MoeDecodeCase kMoeDecodeCases[] = {
    {WeightFormat::kFp4Row, 4096, 2048, 1, true},  // flash, batch 1
    {WeightFormat::kFp4Row, 4096, 2048, 5, true},  // flash, batch 5
    {WeightFormat::kFp4Row, 288, 160, 9, false},   // odd widths (multiples of 32), no shared expert
    {WeightFormat::kFp8Block, 384, 256, 3, true},  // FP8 routed experts
};

INSTANTIATE_TEST_SUITE_P(Shapes, CudaMoeDecode, ::testing::ValuesIn(kMoeDecodeCases));

// An expert id outside the table is skipped by both fused launches and by the per-pair W4A8 GEMVs, and raises the
// step's error flag.
TEST(CudaMoeDecodeErrors, OutOfRangeExpertIdRaisesTheFlag) {
    DSV4_REQUIRE_GPU();
    for (const char* path : {"fused_gemv", "per_pair_mma"}) {
        const MoeDecodeCase mc{WeightFormat::kFp4Row, 256, 128, 2, false};
        Pair p(Numerics::kFast);
        p.step(simple_batch(mc.tokens));
        MoeInputs in = make_moe(p, mc, 8);
        std::vector<float> ids_bits, weights;
        random_routing(mc.tokens, 6, 8, ids_bits, weights);
        const int32_t bad = 8;
        std::memcpy(&ids_bits[3], &bad, sizeof(bad));
        Tensor hg = make_tensor(*p.gpu, {2, 256}, random_floats(2 * 256)), wg = make_tensor(*p.gpu, {2, 6}, weights);
        Tensor ig = p.gpu->alloc(DType::kI32, {2, 6});
        p.gpu->from_host(ig, ids_bits.data());
        auto* cuda = dynamic_cast<cuda::CudaBackend*>(p.gpu.get());
        ASSERT_NE(cuda, nullptr);
        cuda->force_paths("", path);
        Tensor y = make_tensor(*p.gpu, {2, 256});
        p.gpu->moe(hg, in.gpu, wg, ig, 7.0f, y);
        try {
            p.gpu->synchronize();
            ADD_FAILURE() << path << ": no error for expert id " << bad;
        } catch (const Error& e) {
            EXPECT_NE(std::string(e.what()).find("flags 0x2"), std::string::npos) << path << ": " << e.what();
        }
        cuda->force_paths("", "");
    }
}

}  // namespace
}  // namespace dsv4::ops_test
