// Batch invariance of the multi-vector dot products: out[v] must be bit-identical whatever n_vec is and wherever the
// vector sits in the batch. The engine relies on it (a sequence's logits are the same alone or batched with others,
// and a prefix-cache hit reproduces a cold run exactly), so every SIMD path this CPU has is checked bit for bit.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/block_dequant.h"
#include "core/float_formats.h"

namespace dsv4 {
namespace {

class BatchInvariance : public ::testing::TestWithParam<SimdIsa> {
  protected:
    void SetUp() override {
        if (!simd_isa_supported(GetParam())) GTEST_SKIP() << simd_isa_name(GetParam()) << " not supported here";
        previous_ = active_simd_isa();
        set_simd_isa(GetParam());
    }
    void TearDown() override { set_simd_isa(previous_); }
    SimdIsa previous_ = SimdIsa::kScalar;
};

bool same_bits(float a, float b) {
    return std::memcmp(&a, &b, sizeof(float)) == 0;
}

TEST_P(BatchInvariance, MultiDotsDoNotDependOnBatchShape) {
    std::mt19937 rng(1234);
    std::uniform_real_distribution<float> value(-2.0f, 2.0f);
    std::uniform_int_distribution<int> byte(0, 255), scale(118, 130);
    for (int64_t k : {int64_t{30}, int64_t{128}, int64_t{1000}, int64_t{2050}}) {
        constexpr int kMaxVec = 11;
        const int64_t stride = k + 5;
        std::vector<float> x(stride * kMaxVec), wf(k);
        for (auto& v : x) v = value(rng);
        for (auto& v : wf) v = value(rng);
        std::vector<uint16_t> wb(k);
        for (int64_t j = 0; j < k; ++j) wb[j] = encode_bf16(wf[j]);
        std::vector<uint8_t> codes(k), packed(k / 2), scales8((k + 127) / 128), scales4((k + 31) / 32);
        for (auto& c : codes) c = static_cast<uint8_t>(byte(rng) & 0x7E);  // finite e4m3 (no 0x7F / 0xFF NaN)
        for (auto& c : packed) c = static_cast<uint8_t>(byte(rng));
        for (auto& s : scales8) s = static_cast<uint8_t>(scale(rng));
        for (auto& s : scales4) s = static_cast<uint8_t>(scale(rng));

        auto run = [&](int kind, const float* xs, int n_vec, float* out) {
            switch (kind) {
                case 0:
                    dot_f32_multi(wf.data(), xs, stride, k, n_vec, out);
                    break;
                case 1:
                    dot_bf16_row_multi(wb.data(), xs, stride, k, n_vec, out);
                    break;
                case 2:
                    dot_fp8_row_multi(codes.data(), scales8.data(), 128, Fp8Dialect::kOcp, xs, stride, k, n_vec, out);
                    break;
                default:
                    dot_fp4_row_multi(packed.data(), scales4.data(), 32, xs, stride, k, n_vec, out);
                    break;
            }
        };
        for (int kind = 0; kind < 4; ++kind) {
            // Each vector alone is the reference; then every batch size and every offset inside the batch.
            std::vector<float> alone(kMaxVec);
            for (int v = 0; v < kMaxVec; ++v) run(kind, x.data() + v * stride, 1, &alone[v]);
            for (int first = 0; first < kMaxVec; ++first) {
                for (int n_vec = 1; first + n_vec <= kMaxVec; ++n_vec) {
                    std::vector<float> out(n_vec);
                    run(kind, x.data() + first * stride, n_vec, out.data());
                    for (int v = 0; v < n_vec; ++v) {
                        ASSERT_TRUE(same_bits(out[v], alone[first + v]))
                            << "kind " << kind << " k " << k << " batch [" << first << ", " << first + n_vec
                            << ") vector " << first + v << ": " << out[v] << " vs alone " << alone[first + v];
                    }
                }
            }
        }
    }
}

INSTANTIATE_TEST_SUITE_P(AllIsas, BatchInvariance,
                         ::testing::Values(SimdIsa::kScalar, SimdIsa::kAvx2, SimdIsa::kAvx512),
                         [](const ::testing::TestParamInfo<SimdIsa>& param_info) {
                             return std::string(simd_isa_name(param_info.param));
                         });

}  // namespace
}  // namespace dsv4
