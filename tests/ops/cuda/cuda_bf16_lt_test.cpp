// The bf16-weight linears of fast numerics (the compressors' projections, the indexer's head weights, the router's
// gate) on cuBLASLt's bf16 GEMM (LinearPath::kBf16Lt, cuda_bf16_gemm.h), on our mma.sync GEMM (kGemmBf16) and on the
// bf16 GEMV (kBf16Gemv, decode sizes: batch invariance, one launch for several targets), against
// a host model of their roundings on fresh random inputs: activations rounded to bf16, the weight's bf16 values, sums
// in double (host_linear). Row counts from 1 to 9,000 (odd ones, and the Flash shapes), a NaN input row, the targets of
// one `linears` call sharing one bf16 copy of x, and the chooser. Outputs start as NaN, so an unwritten element fails.
// The GPU cases skip without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <span>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/linear_plan.h"
#include "core/error.h"
#include "core/float_formats.h"
#include "op_test_support.h"

namespace dsv4::ops_test {
namespace {

std::vector<float> bf16_values(const HostWeight& w) {
    std::vector<float> v(w.rows * w.cols);
    for (size_t i = 0; i < v.size(); ++i) {
        uint16_t bits = 0;
        std::memcpy(&bits, &w.data[2 * i], 2);
        v[i] = decode_bf16(bits);
    }
    return v;
}

// x rounded to bf16, as both paths round their activations.
std::vector<float> bf16_rounded(std::vector<float> x) {
    for (float& v : x) v = round_to_bf16(v);
    return x;
}

constexpr double kBf16PathTol = 1e-4;  // float32 sums against double ones, K up to 4096

// A bf16 weight's shape, for the choosers (no data).
WeightRef bf16_shape(int64_t rows, int64_t cols) {
    WeightRef w;
    w.format = WeightFormat::kBF16;
    w.rows = rows;
    w.cols = cols;
    return w;
}

// The targets of one `linears` call on `path` (chosen for m rows of k inputs) give the bits of each linear alone.
void expect_linears_give_each_linears_bits(int64_t m, int64_t k, std::span<const int64_t> widths, cuda::LinearPath path,
                                           const cuda::LinearTuning& tuning = {}) {
    auto gpu = make_cuda_backend(Numerics::kFast);
    std::vector<WeightRef> weights;
    std::vector<Tensor> together, alone;
    for (int64_t n : widths) {
        weights.push_back(upload(*gpu, make_weight(WeightFormat::kBF16, n, k)));
        together.push_back(make_tensor(*gpu, {m, n}, std::vector<float>(m * n, NAN)));
        alone.push_back(make_tensor(*gpu, {m, n}, std::vector<float>(m * n, NAN)));
    }
    ASSERT_EQ(cuda::choose_linear_path({Numerics::kFast, weights[0], m, k}, tuning, ""), path);
    Tensor x = make_tensor(*gpu, {m, k}, random_floats(m * k, 1.5f));
    std::vector<LinearTarget> targets;
    for (size_t i = 0; i < weights.size(); ++i) targets.push_back({&weights[i], LinearKind::kF32Out, together[i]});
    gpu->linears(x, targets);
    for (size_t i = 0; i < weights.size(); ++i) {
        gpu->linear(x, weights[i], LinearKind::kF32Out, alone[i]);
        const std::vector<float> got = read(*gpu, together[i]), want = read(*gpu, alone[i]);
        ASSERT_EQ(got.size(), want.size());
        for (size_t e = 0; e < got.size(); ++e) {
            ASSERT_TRUE(std::isfinite(got[e])) << "target " << i << " element " << e;
            ASSERT_EQ(std::bit_cast<uint32_t>(got[e]), std::bit_cast<uint32_t>(want[e]))
                << "target " << i << " element " << e;
        }
    }
}

struct Bf16LinearCase {
    int64_t rows, cols, m;
};

class CudaBf16Linear : public ::testing::TestWithParam<std::tuple<std::string, Bf16LinearCase>> {};

TEST_P(CudaBf16Linear, MatchesTheHostModel) {
    DSV4_REQUIRE_GPU();
    const auto& [path, c] = GetParam();
    ScopedEnv force("DSV4_LINEAR_PATH", path);
    auto gpu = make_cuda_backend(Numerics::kFast);
    const HostWeight w = make_weight(WeightFormat::kBF16, c.rows, c.cols);
    const WeightRef wg = upload(*gpu, w);
    auto x = random_floats(c.m * c.cols, 2.0f);
    if (c.m > 3) x[2 * c.cols + 5] = NAN;  // row 2 must come out non-finite, the others unaffected
    Tensor xg = make_tensor(*gpu, {c.m, c.cols}, x);
    Tensor yg = make_tensor(*gpu, {c.m, c.rows}, std::vector<float>(c.m * c.rows, NAN));
    gpu->linear(xg, wg, LinearKind::kF32Out, yg);
    std::vector<float> got = read(*gpu, yg);
    std::vector<float> want = host_linear(bf16_rounded(x), bf16_values(w), c.m, c.rows, c.cols);
    if (c.m > 3) {
        for (int64_t r = 0; r < c.rows; ++r) {
            EXPECT_FALSE(std::isfinite(got[2 * c.rows + r])) << "NaN input row, column " << r;
            got[2 * c.rows + r] = want[2 * c.rows + r] = 0.0f;
        }
    }
    EXPECT_TRUE(std::all_of(got.begin(), got.end(), [](float v) { return std::isfinite(v); })) << "unwritten or NaN";
    EXPECT_LE(rel_l2(got, want), kBf16PathTol) << path << " [" << c.rows << " x " << c.cols << "] m " << c.m;
}

const Bf16LinearCase kBf16LinearCases[] = {
    {256, 512, 1},    {256, 512, 7},    {160, 4096, 256},  {1024, 4096, 511},  {512, 4096, 2051},
    {64, 4096, 1000}, {256, 4096, 257}, {130, 1024, 9000}, {1024, 4096, 8192},
};

INSTANTIATE_TEST_SUITE_P(Paths, CudaBf16Linear,
                         ::testing::Combine(::testing::Values(std::string("bf16_lt"), std::string("gemm_bf16")),
                                            ::testing::ValuesIn(kBf16LinearCases)));

// The bf16 GEMV (decode sizes, 1..8 rows): weights whose rows are not a multiple of its 16-row tiles, K from 64 up.
const Bf16LinearCase kBf16GemvCases[] = {
    {256, 512, 1}, {256, 512, 7}, {1024, 4096, 8}, {64, 4096, 5}, {130, 1024, 8}, {160, 4096, 2}, {1000, 64, 4},
};
INSTANTIATE_TEST_SUITE_P(Gemv, CudaBf16Linear,
                         ::testing::Combine(::testing::Values(std::string("bf16_gemv")),
                                            ::testing::ValuesIn(kBf16GemvCases)));

std::vector<uint32_t> bits_of(const std::vector<float>& v) {
    std::vector<uint32_t> b(v.size());
    std::transform(v.begin(), v.end(), b.begin(), [](float f) { return std::bit_cast<uint32_t>(f); });
    return b;
}

// A token's outputs on the bf16 GEMV do not depend on the other tokens of the step: each of 8 tokens alone gives the
// bits it has among all 8 (the router's gate and a compressor's shape).
TEST(CudaBf16Gemv, TokensDoNotDependOnTheBatch) {
    DSV4_REQUIRE_GPU();
    ScopedEnv from_one("DSV4_MIN_BF16_GEMV_ROWS", "1");
    auto gpu = make_cuda_backend(Numerics::kFast);
    const int64_t m = 8, k = 4096;
    for (int64_t rows : {160, 1024}) {
        const WeightRef w = upload(*gpu, make_weight(WeightFormat::kBF16, rows, k));
        const std::vector<float> x = random_floats(m * k, 2.0f);
        Tensor all = make_tensor(*gpu, {m, rows}, std::vector<float>(m * rows, NAN));
        gpu->linear(make_tensor(*gpu, {m, k}, x), w, LinearKind::kF32Out, all);
        const std::vector<uint32_t> together = bits_of(read(*gpu, all));
        for (int64_t t = 0; t < m; ++t) {
            Tensor one = make_tensor(*gpu, {1, rows}, std::vector<float>(rows, NAN));
            gpu->linear(make_tensor(*gpu, {1, k}, std::vector<float>(x.begin() + t * k, x.begin() + (t + 1) * k)), w,
                        LinearKind::kF32Out, one);
            const std::vector<uint32_t> alone = bits_of(read(*gpu, one));
            ASSERT_TRUE(std::equal(alone.begin(), alone.end(), together.begin() + t * rows))
                << "token " << t << " of " << rows << "-row weight";
        }
    }
}

// The targets of one `linears` call on the bf16 GEMV (the compressors' wkv / wgate and the indexer's, at batch 8) go
// out in one launch and give the bits of each linear alone.
TEST(CudaBf16Gemv, LinearsInOneLaunchGiveEachLinearsBits) {
    DSV4_REQUIRE_GPU();
    ScopedEnv on("DSV4_MIN_BF16_GEMV_ROWS", "2");
    cuda::LinearTuning tuning;
    tuning.min_bf16_gemv_rows = 2;
    const int64_t widths[] = {1024, 1024, 256, 256, 48};
    expect_linears_give_each_linears_bits(8, 4096, widths, cuda::LinearPath::kBf16Gemv, tuning);
}

// The chooser: bf16 weights on the bf16 GEMV from min_bf16_gemv_rows to 8 rows in fast numerics (off by default),
// never in exact numerics, for grouped projections or with the threshold out of reach (batch-invariant mode); forced
// past 8 rows it names the limit.
TEST(CudaBf16Gemv, ChooserTakesTwoToEightRows) {
    WeightRef w = bf16_shape(1024, 4096);
    EXPECT_EQ(cuda::choose_linear_path({Numerics::kFast, w, 8, 4096}, cuda::LinearTuning{}, ""),
              cuda::LinearPath::kGemv);
    cuda::LinearTuning tuning;
    tuning.min_bf16_gemv_rows = 2;
    EXPECT_EQ(cuda::choose_linear_path({Numerics::kFast, w, 1, 4096}, tuning, ""), cuda::LinearPath::kGemv);
    for (int64_t m : {2, 5, 8}) {
        EXPECT_EQ(cuda::choose_linear_path({Numerics::kFast, w, m, 4096}, tuning, ""), cuda::LinearPath::kBf16Gemv);
    }
    EXPECT_EQ(cuda::choose_linear_path({Numerics::kFast, w, 9, 4096}, tuning, ""), cuda::LinearPath::kGemv);
    EXPECT_EQ(cuda::choose_linear_path({Numerics::kExact, w, 8, 4096}, tuning, ""), cuda::LinearPath::kGemv);
    EXPECT_NE(cuda::choose_linear_path({Numerics::kFast, w, 8, 4096, true}, tuning, ""), cuda::LinearPath::kBf16Gemv);
    cuda::LinearTuning invariant;
    invariant.min_bf16_gemv_rows = std::numeric_limits<int64_t>::max();
    EXPECT_EQ(cuda::choose_linear_path({Numerics::kFast, w, 8, 4096}, invariant, ""), cuda::LinearPath::kGemv);
    try {
        cuda::choose_linear_path({Numerics::kFast, w, 9, 4096}, tuning, "bf16_gemv");
        ADD_FAILURE() << "no error";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("at most 8 activation rows"), std::string::npos) << e.what();
    }
}

// The compressors' four projections in one `linears` call (one bf16 copy of x for all, the default path at prefill
// sizes) give the bits of each linear alone.
TEST(CudaBf16Lt, LinearsShareOneCopyOfTheInput) {
    DSV4_REQUIRE_GPU();
    const int64_t widths[] = {1024, 1024, 256, 256};
    expect_linears_give_each_linears_bits(600, 4096, widths, cuda::LinearPath::kBf16Lt);
}

// The chooser: bf16 weights on cuBLASLt from min_bf16_lt_rows rows in fast numerics, the mma.sync GEMM below it, for
// grouped projections and with the threshold out of reach (batch-invariant mode); a forced bf16_lt path names what a
// weight lacks.
TEST(CudaBf16Lt, ChooserTakesBf16WeightsFromTheThreshold) {
    WeightRef w = bf16_shape(1024, 4096);
    const cuda::LinearTuning tuning;
    const int64_t at = tuning.min_bf16_lt_rows;
    EXPECT_EQ(cuda::choose_linear_path({Numerics::kFast, w, at, 4096}, tuning, ""), cuda::LinearPath::kBf16Lt);
    EXPECT_EQ(cuda::choose_linear_path({Numerics::kFast, w, at - 1, 4096}, tuning, ""), cuda::LinearPath::kGemmBf16);
    EXPECT_EQ(cuda::choose_linear_path({Numerics::kFast, w, 8192, 4096, true}, tuning, ""),
              cuda::LinearPath::kGemmBf16);
    EXPECT_NE(cuda::choose_linear_path({Numerics::kExact, w, 8192, 4096}, tuning, ""), cuda::LinearPath::kBf16Lt);
    cuda::LinearTuning invariant;
    invariant.min_bf16_lt_rows = std::numeric_limits<int64_t>::max();
    EXPECT_EQ(cuda::choose_linear_path({Numerics::kFast, w, 8192, 4096}, invariant, ""), cuda::LinearPath::kGemmBf16);
    w.format = WeightFormat::kFp8Block;
    w.block_rows = w.block_cols = 128;
    try {
        cuda::choose_linear_path({Numerics::kFast, w, 8192, 4096}, tuning, "bf16_lt");
        ADD_FAILURE() << "no error";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("a bf16 weight"), std::string::npos) << e.what();
    }
}

}  // namespace
}  // namespace dsv4::ops_test
