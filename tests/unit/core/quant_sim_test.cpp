// The reference-numerics roundings: hand-computed blocks, scale exponents vs an independent double computation,
// codes vs simulation, idempotence, NaN handling and the Hadamard rotation.
#include "core/quant_sim.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <functional>
#include <limits>
#include <random>
#include <vector>

#include "core/block_dequant.h"
#include "core/error.h"
#include "core/float_formats.h"
#include "format_test_util.h"

namespace dsv4 {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

std::vector<float> random_normal(std::mt19937& rng, int64_t n, float sigma) {
    std::normal_distribution<float> dist(0.0f, sigma);
    std::vector<float> v(static_cast<size_t>(n));
    for (float& f : v) f = dist(rng);
    return v;
}

void expect_same_floats(const std::vector<float>& expected, const std::vector<float>& actual) {
    ASSERT_EQ(expected.size(), actual.size());
    for (size_t i = 0; i < expected.size(); ++i) {
        EXPECT_TRUE(testing::same_float_or_both_nan(expected[i], actual[i])) << "index " << i;
    }
}

TEST(QuantSim, ScaleExponentHandCases) {
    for (int k = -10; k <= 10; ++k) {
        EXPECT_EQ(pow2_scale_exponent(std::ldexp(448.0f, k), kFp8AmaxFloor, 448.0f), k) << k;  // exact multiple
        EXPECT_EQ(pow2_scale_exponent(std::ldexp(6.0f, k), kFp4AmaxFloor, 6.0f), k) << k;
    }
    EXPECT_EQ(pow2_scale_exponent(std::nextafter(448.0f, kInf), kFp8AmaxFloor, 448.0f), 1);
    EXPECT_EQ(pow2_scale_exponent(447.0f, kFp8AmaxFloor, 448.0f), 0);
    EXPECT_EQ(pow2_scale_exponent(224.5f, kFp8AmaxFloor, 448.0f), 0);
    EXPECT_EQ(pow2_scale_exponent(1.0f, kFp8AmaxFloor, 448.0f), -8);  // 1/448 = 2^-8.8
    // Floors: 1e-4 / 448 = 2^-22.09 -> -22; 6 * 2^-126 / 6 -> -126.
    EXPECT_EQ(pow2_scale_exponent(0.0f, kFp8AmaxFloor, 448.0f), -22);
    EXPECT_EQ(pow2_scale_exponent(1e-30f, kFp8AmaxFloor, 448.0f), -22);
    EXPECT_EQ(pow2_scale_exponent(0.0f, kFp4AmaxFloor, 6.0f), -126);
    EXPECT_EQ(pow2_scale_exponent(7.0f, kFp4AmaxFloor, 6.0f), 1);
    EXPECT_EQ(pow2_scale_exponent(3.0f, kFp4AmaxFloor, 6.0f), -1);
    // Clamped at the top, and the stored byte never becomes the UE8M0 NaN.
    EXPECT_EQ(pow2_scale_exponent(kInf, kFp8AmaxFloor, 448.0f), 127);
    EXPECT_EQ(pow2_scale_exponent(std::numeric_limits<float>::max(), kFp8AmaxFloor, 448.0f), 120);
}

// The bit-level computation agrees with ceil(log2(max(amax, floor) / qmax)) computed in double.
TEST(QuantSim, ScaleExponentMatchesIndependentCeilLog2) {
    const uint32_t seed = testing::fresh_seed();
    SCOPED_TRACE(testing::seed_note(seed));
    std::mt19937 rng(seed);
    std::uniform_int_distribution<int> exponent(-40, 40);
    std::uniform_real_distribution<float> mantissa(1.0f, 2.0f);
    for (int trial = 0; trial < 100000; ++trial) {
        const float amax = std::ldexp(mantissa(rng), exponent(rng));
        for (auto [qmax, floor] : {std::pair{448.0f, kFp8AmaxFloor}, std::pair{6.0f, kFp4AmaxFloor}}) {
            const double ratio = std::max(static_cast<double>(amax), static_cast<double>(floor)) / qmax;
            const auto expected = static_cast<int>(std::ceil(std::log2(ratio)));
            // log2 in double can be off right at powers of two; check the defining inequalities instead.
            const int got = pow2_scale_exponent(amax, floor, qmax);
            ASSERT_GE(std::ldexp(1.0, got), ratio) << amax << " " << qmax;
            ASSERT_LT(std::ldexp(1.0, got - 1), ratio) << amax << " " << qmax;
            ASSERT_NEAR(got, expected, 1);
        }
    }
}

TEST(QuantSim, Fp8SimHandComputedBlocks) {
    // amax = 4 * 448 -> s = 4: [448, 0.25, -0.75, 0.025 -> 1.625 * 2^-6] * 4.
    std::vector<float> x{1792.0f, 1.0f, -3.0f, 0.1f};
    fp8_sim(x.data(), 4, 4, kOcpQuant);
    expect_same_floats({1792.0f, 1.0f, -3.0f, 0.1015625f}, x);

    // s = 1; ties: 17 lies between 16 and 18 -> 16 (even mantissa), 19 between 18 and 20 -> 20, 0.5 + 2^-5 between
    // 0.5 and 0.5625 -> 0.5, -(1 + 2^-4) between 1 and 1.125 -> -1.
    x = {448.0f, 17.0f, 19.0f, 0.53125f, -1.0625f};
    fp8_sim(x.data(), 5, 5, kOcpQuant);
    expect_same_floats({448.0f, 16.0f, 20.0f, 0.5f, -1.0f}, x);

    // Tiny block: the floor 1e-4 gives s = 2^-22; 1e-6 * 2^22 = 4.19 -> 4, -2e-6 * 2^22 = -8.39 -> -8.
    x = {1e-6f, -2e-6f};
    fp8_sim(x.data(), 2, 2, kOcpQuant);
    expect_same_floats({std::ldexp(4.0f, -22), std::ldexp(-8.0f, -22)}, x);

    // An all-zero block stays zero; blocks are independent of each other.
    x = {0.0f, 0.0f, 896.0f, 3.0f};
    fp8_sim(x.data(), 4, 2, kOcpQuant);
    expect_same_floats({0.0f, 0.0f, 896.0f, 3.0f}, x);

    // A short last block.
    x = {448.0f, 1.0f, 0.3f};
    fp8_sim(x.data(), 3, 2, kOcpQuant);
    expect_same_floats({448.0f, 1.0f, 0.3125f}, x);  // s = 2^-10: 307.2 -> 320 (quantum 32)
}

TEST(QuantSim, Fp8SimBf16InputRoundsBeforeTheAmax) {
    // 448 * (1 + 2^-20) rounds to 448 in bf16: with the bf16 input the block scale is 1, without it 2; the small
    // element shows the difference (0.01 -> 5 * 2^-9 at s = 1, 3 * 2^-9 * 2 at s = 2).
    const float big = 448.0f * (1.0f + std::ldexp(1.0f, -20));
    std::vector<float> plain{big, 0.01f};
    std::vector<float> rounded = plain;
    fp8_sim(plain.data(), 2, 2, kOcpQuant);
    fp8_sim_bf16_input(rounded.data(), 2, 2, kOcpQuant);
    expect_same_floats({448.0f, std::ldexp(6.0f, -9)}, plain);
    expect_same_floats({448.0f, std::ldexp(5.0f, -9)}, rounded);
}

TEST(QuantSim, Fp4SimHandComputedBlocks) {
    // s = 1; ties go to the even code: 1.25 -> 1, -0.75 -> -1, 5 -> 4; 2.4 -> 2.
    std::vector<float> x{6.0f, 1.25f, -0.75f, 5.0f, 2.4f};
    fp4_sim(x.data(), 5, 5);
    expect_same_floats({6.0f, 1.0f, -1.0f, 4.0f, 2.0f}, x);
    // amax 12 -> s = 2; 7 -> 3.5 -> tie 3/4 -> 4 -> 8.
    x = {12.0f, 7.0f, -0.4f};
    fp4_sim(x.data(), 3, 3);
    expect_same_floats({12.0f, 8.0f, -0.0f}, x);  // -0.2 rounds to -0 (e2m1 keeps the sign)
    // Below the floor: s = 2^-126, 1e-40 / 2^-126 = 0.0085 -> 0.
    x = {1e-40f, 0.0f};
    fp4_sim(x.data(), 2, 2);
    expect_same_floats({0.0f, 0.0f}, x);
    // Smallest reachable nonzero output: 0.5 * 2^-126 (bf16-representable).
    x = {std::ldexp(6.0f, -126), std::ldexp(0.5f, -126)};
    fp4_sim(x.data(), 2, 2);
    expect_same_floats({std::ldexp(6.0f, -126), std::ldexp(0.5f, -126)}, x);
}

TEST(QuantSim, NanStaysNanAndDoesNotMoveTheScale) {
    std::vector<float> x{kNaN, 448.0f, 17.0f, 1.0f};
    fp8_sim(x.data(), 4, 4, kOcpQuant);
    EXPECT_TRUE(std::isnan(x[0]));
    EXPECT_EQ(x[1], 448.0f);
    EXPECT_EQ(x[2], 16.0f);
    x = {kNaN, 6.0f, 1.25f, 1.0f};
    fp4_sim(x.data(), 4, 4);
    EXPECT_TRUE(std::isnan(x[0]));
    EXPECT_EQ(x[2], 1.0f);
    x = {kInf, 1.0f};
    fp8_sim(x.data(), 2, 2, kOcpQuant);
    EXPECT_EQ(x[0], kInf);
    EXPECT_FALSE(std::isnan(x[1]));
}

// act_quant_* codes and scales, dequantised by block_dequant, reproduce the in-place simulation exactly, in every
// site's dialect and maximum (OCP 448, FNUZ 240, FNUZ 224).
TEST(QuantSim, CodesDequantiseToTheSimulation) {
    const uint32_t seed = testing::fresh_seed();
    SCOPED_TRACE(testing::seed_note(seed));
    std::mt19937 rng(seed);
    for (Fp8Quant q : {kOcpQuant, activation_fp8_quant(Fp8Dialect::kFnuz), index_key_fp8_quant(Fp8Dialect::kFnuz)}) {
        for (int64_t n : {int64_t{2}, int64_t{64}, int64_t{448}, int64_t{1000}}) {
            for (float sigma : {1e-7f, 1e-3f, 1.0f, 1e4f}) {
                const std::vector<float> x = random_normal(rng, n, sigma);
                std::vector<uint8_t> codes(static_cast<size_t>(n));
                std::vector<uint8_t> scales(static_cast<size_t>((n + 127) / 128));
                act_quant_fp8(x.data(), n, 128, q, codes.data(), scales.data());
                std::vector<float> dequantised(static_cast<size_t>(n));
                dequant_fp8_row(codes.data(), scales.data(), n, 128, q.dialect, dequantised.data());
                std::vector<float> simulated = x;
                act_quant_fp8_sim(simulated.data(), n, 128, q);
                expect_same_floats(simulated, dequantised);
                std::vector<float> sim_bf16 = x;
                fp8_sim(sim_bf16.data(), n, 128, q);
                expect_same_floats(simulated, sim_bf16);  // the bf16 rounding is a no-op on these values
                for (size_t b = 0; b < scales.size(); ++b) {
                    float amax = 0.0f;
                    for (int64_t j = static_cast<int64_t>(b) * 128; j < std::min<int64_t>(n, (b + 1) * 128); ++j) {
                        amax = std::max(amax, std::fabs(x[j]));
                    }
                    EXPECT_EQ(scales[b], pow2_scale_exponent(amax, kFp8AmaxFloor, q.qmax) + 127);
                }
                for (uint8_t c : codes) ASSERT_LE(std::fabs(decode_e4m3(c, q.dialect)), q.qmax) << int{c};
            }
        }
    }
}

TEST(QuantSim, Fp4CodesDequantiseToTheSimulation) {
    const uint32_t seed = testing::fresh_seed();
    SCOPED_TRACE(testing::seed_note(seed));
    std::mt19937 rng(seed);
    for (int64_t n : {int64_t{2}, int64_t{64}, int64_t{128}, int64_t{448}, int64_t{1000}, int64_t{4096}}) {
        for (float sigma : {1e-7f, 1e-3f, 1.0f, 1e4f}) {
            const std::vector<float> x = random_normal(rng, n, sigma);
            std::vector<float> dequantised(static_cast<size_t>(n));
            std::vector<uint8_t> packed(static_cast<size_t>(n / 2));
            std::vector<uint8_t> scales4(static_cast<size_t>((n + 31) / 32));
            act_quant_fp4(x.data(), n, 32, packed.data(), scales4.data());
            dequant_fp4_row(packed.data(), scales4.data(), n, 32, dequantised.data());
            std::vector<float> simulated = x;
            fp4_sim(simulated.data(), n, 32);
            expect_same_floats(simulated, dequantised);
        }
    }
}

TEST(QuantSim, SimulationsAreIdempotent) {
    const uint32_t seed = testing::fresh_seed();
    SCOPED_TRACE(testing::seed_note(seed));
    std::mt19937 rng(seed);
    using Sim = std::function<void(float*, int64_t, int)>;
    std::vector<Sim> sims{[](float* x, int64_t n, int b) { fp4_sim(x, n, b); }};
    for (Fp8Quant q : {kOcpQuant, activation_fp8_quant(Fp8Dialect::kFnuz), index_key_fp8_quant(Fp8Dialect::kFnuz)}) {
        sims.emplace_back([q](float* x, int64_t n, int b) { fp8_sim(x, n, b, q); });
        sims.emplace_back([q](float* x, int64_t n, int b) { fp8_sim_bf16_input(x, n, b, q); });
        sims.emplace_back([q](float* x, int64_t n, int b) { act_quant_fp8_sim(x, n, b, q); });
    }
    for (const Sim& sim : sims) {
        for (int block : {1, 2, 32, 64, 128}) {
            for (float sigma : {1e-6f, 1e-2f, 1.0f, 300.0f}) {
                std::vector<float> once = random_normal(rng, 1024 + 7, sigma);
                sim(once.data(), static_cast<int64_t>(once.size()), block);
                std::vector<float> twice = once;
                sim(twice.data(), static_cast<int64_t>(twice.size()), block);
                expect_same_floats(once, twice);
            }
        }
    }
}

TEST(QuantSim, BadArgumentsAreErrors) {
    float x[4] = {1, 2, 3, 4};
    uint8_t codes[4] = {};
    EXPECT_THROW(fp8_sim(x, 4, 0, kOcpQuant), Error);
    EXPECT_THROW(fp4_sim(x, -1, 32), Error);
    EXPECT_THROW(act_quant_fp4(x, 3, 32, codes, codes), Error);
    EXPECT_THROW(act_quant_fp8(x, 4, -2, kOcpQuant, codes, codes), Error);
    EXPECT_THROW(fp8_sim(x, 4, 4, Fp8Quant{Fp8Dialect::kFnuz, 448.0f}), Error) << "FNUZ cannot hold 448";
}

TEST(Hadamard, MatchesTheSylvesterMatrix) {
    const uint32_t seed = testing::fresh_seed();
    SCOPED_TRACE(testing::seed_note(seed));
    std::mt19937 rng(seed);
    for (int n = 1; n <= 256; n *= 2) {
        const std::vector<float> x = random_normal(rng, n, 1.0f);
        std::vector<float> y = x;
        hadamard_inplace(y.data(), n);
        for (int i = 0; i < n; ++i) {
            double expected = 0.0;
            for (int j = 0; j < n; ++j) {
                const int sign = (std::popcount(static_cast<unsigned>(i & j)) % 2 == 0) ? 1 : -1;
                expected += sign * static_cast<double>(x[j]);
            }
            expected /= std::sqrt(static_cast<double>(n));
            EXPECT_TRUE(testing::close_no_nan(expected, y[i], 1e-5)) << "n " << n << " i " << i;
        }
    }
    // Hand case: H_2 [1, 2] / sqrt 2 = [3, -1] / sqrt 2; H_4 e_1 = [1, -1, 1, -1] / 2.
    float two[2] = {1.0f, 2.0f};
    hadamard_inplace(two, 2);
    EXPECT_FLOAT_EQ(two[0], 3.0f / std::sqrt(2.0f));
    EXPECT_FLOAT_EQ(two[1], -1.0f / std::sqrt(2.0f));
    float four[4] = {0.0f, 1.0f, 0.0f, 0.0f};
    hadamard_inplace(four, 4);
    EXPECT_EQ(four[0], 0.5f);
    EXPECT_EQ(four[1], -0.5f);
    EXPECT_EQ(four[2], 0.5f);
    EXPECT_EQ(four[3], -0.5f);
}

TEST(Hadamard, TwiceIsIdentityAndPreservesDotProducts) {
    const uint32_t seed = testing::fresh_seed();
    SCOPED_TRACE(testing::seed_note(seed));
    std::mt19937 rng(seed);
    const int n = 128;
    const int rows = 16;
    const std::vector<float> x = random_normal(rng, int64_t{n} * rows, 1.0f);
    const std::vector<float> y = random_normal(rng, int64_t{n} * rows, 1.0f);
    std::vector<float> hx = x;
    std::vector<float> hy = y;
    hadamard_rows_inplace(hx.data(), rows, n);
    hadamard_rows_inplace(hy.data(), rows, n);
    for (int r = 0; r < rows; ++r) {
        double dot = 0.0, hdot = 0.0, norm = 0.0;
        for (int j = 0; j < n; ++j) {
            const size_t i = static_cast<size_t>(r * n + j);
            dot += static_cast<double>(x[i]) * y[i];
            hdot += static_cast<double>(hx[i]) * hy[i];
            norm += std::fabs(static_cast<double>(x[i]) * y[i]);
        }
        EXPECT_TRUE(testing::close_no_nan(dot, hdot, 1e-5 * norm)) << "row " << r;
    }
    std::vector<float> back = hx;
    hadamard_rows_inplace(back.data(), rows, n);
    for (size_t i = 0; i < x.size(); ++i) EXPECT_TRUE(testing::close_no_nan(x[i], back[i], 1e-6)) << i;
}

TEST(Hadamard, RejectsLengthsThatAreNotPowersOfTwo) {
    std::vector<float> x(100, 1.0f);
    for (int n : {0, -4, 3, 6, 100}) EXPECT_THROW(hadamard_inplace(x.data(), n), Error) << n;
    EXPECT_THROW(hadamard_rows_inplace(x.data(), 0, 12), Error);
    EXPECT_THROW(hadamard_rows_inplace(x.data(), -1, 4), Error);
}

}  // namespace
}  // namespace dsv4
