// Every bulk converter, dequantiser and dot product of block_dequant.h, on every SIMD path this CPU has, against a
// reference built here from the scalar decoders (fresh random inputs; the seed is printed on failure).
#include "core/block_dequant.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <limits>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "core/dot_f64.h"
#include "core/error.h"
#include "core/float_formats.h"
#include "format_test_util.h"

namespace dsv4 {

// Readable parameter names in gtest output.
void PrintTo(SimdIsa isa, std::ostream* os) {
    *os << simd_isa_name(isa);
}

namespace {

using testing::close_no_nan;
using testing::same_float_or_both_nan;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

class BlockDequantTest : public ::testing::TestWithParam<SimdIsa> {
  protected:
    void SetUp() override {
        if (!simd_isa_supported(GetParam())) GTEST_SKIP() << simd_isa_name(GetParam()) << " not supported here";
        set_simd_isa(GetParam());
        seed_ = testing::fresh_seed();
        rng_.seed(seed_);
    }
    void TearDown() override { set_simd_isa(detected_simd_isa()); }

    std::vector<float> random_floats(int64_t n) {
        std::normal_distribution<float> dist(0.0f, 1.0f);
        std::vector<float> v(static_cast<size_t>(n));
        for (float& f : v) f = dist(rng_);
        return v;
    }
    std::vector<uint8_t> random_bytes(int64_t n, int lo = 0, int hi = 255) {
        std::uniform_int_distribution<int> dist(lo, hi);
        std::vector<uint8_t> v(static_cast<size_t>(n));
        for (uint8_t& b : v) b = static_cast<uint8_t>(dist(rng_));
        return v;
    }
    // e4m3 codes that are not NaN in the dialect.
    std::vector<uint8_t> random_finite_e4m3(int64_t n, Fp8Dialect dialect = Fp8Dialect::kOcp) {
        std::vector<uint8_t> v = random_bytes(n);
        for (uint8_t& b : v) {
            if (dialect == Fp8Dialect::kOcp && (b & 0x7F) == 0x7F) b = static_cast<uint8_t>(b ^ 0x01);
            if (dialect == Fp8Dialect::kFnuz && b == 0x80) b = 0x81;
        }
        return v;
    }

    uint32_t seed_ = 0;
    std::mt19937 rng_;
};

// Sizes that exercise empty rows, partial vectors and multi-vector unrolls.
const std::vector<int64_t> kSizes{0,  1,  2,  3,   7,   8,   9,   15,  16,  17,   31,   32,   33,
                                  63, 64, 65, 100, 127, 128, 129, 255, 256, 1000, 1030, 4096, 4098};
const std::vector<int> kBlockSizes{128, 32, 1, 3, 7, 8, 16, 24, 64};

double reference_fp8_weight(const std::vector<uint8_t>& codes, const std::vector<uint8_t>& scales, int block_k,
                            int64_t j, Fp8Dialect dialect = Fp8Dialect::kOcp) {
    return static_cast<double>(decode_e4m3(codes[j], dialect) * decode_ue8m0(scales[j / block_k]));
}

constexpr Fp8Dialect kDialects[] = {Fp8Dialect::kOcp, Fp8Dialect::kFnuz};

double reference_fp4_weight(const std::vector<uint8_t>& packed, const std::vector<uint8_t>& scales, int block_k,
                            int64_t j) {
    const uint8_t byte = packed[j / 2];
    const uint8_t code = (j % 2 == 0) ? (byte & 0x0F) : (byte >> 4);
    return static_cast<double>(decode_e2m1(code) * decode_ue8m0(scales[j / block_k]));
}

// Tolerance for an fp32-accumulated dot product whose exact terms have absolute sum `magnitude`.
double dot_tolerance(int64_t k, double magnitude) {
    return 2.5e-7 * (std::sqrt(static_cast<double>(k)) + 4.0) * magnitude + 1e-30;
}

TEST_P(BlockDequantTest, Bf16ToF32EveryCodeAndTails) {
    std::vector<uint16_t> all(65536 + 13);
    for (size_t i = 0; i < all.size(); ++i)
        all[i] = static_cast<uint16_t>(i * 40503u);  // odd multiplier: a permutation
    for (int64_t n : kSizes) {
        std::vector<float> out(static_cast<size_t>(n) + 1, 12345.0f);
        bf16_to_f32(all.data(), out.data(), static_cast<size_t>(n));
        for (int64_t i = 0; i < n; ++i) ASSERT_TRUE(same_float_or_both_nan(decode_bf16(all[i]), out[i])) << i;
        EXPECT_EQ(out[static_cast<size_t>(n)], 12345.0f) << "wrote past the end";
    }
    std::vector<float> out(all.size());
    bf16_to_f32(all.data(), out.data(), all.size());
    for (size_t i = 0; i < all.size(); ++i) ASSERT_TRUE(same_float_or_both_nan(decode_bf16(all[i]), out[i])) << i;
}

TEST_P(BlockDequantTest, F32ToBf16MatchesScalarRne) {
    SCOPED_TRACE(testing::seed_note(seed_));
    for (int64_t n : kSizes) {
        std::vector<float> in(static_cast<size_t>(n));
        for (float& f : in)
            f = std::bit_cast<float>(static_cast<uint32_t>(rng_()));  // any bit pattern: NaN, inf, subnormal
        if (n > 3) {
            in[0] = kNaN;
            in[1] = std::bit_cast<float>(0x7F800001u);  // NaN with payload only in the low bits
            in[2] = std::bit_cast<float>(0x3F808000u);  // exact tie, even -> down
        }
        std::vector<uint16_t> out(static_cast<size_t>(n) + 1, 0xABCD);
        f32_to_bf16(in.data(), out.data(), static_cast<size_t>(n));
        for (int64_t i = 0; i < n; ++i) {
            ASSERT_EQ(out[i], encode_bf16(in[i])) << "index " << i << " bits " << std::bit_cast<uint32_t>(in[i]);
            if (std::isnan(in[i])) {
                ASSERT_TRUE(std::isnan(decode_bf16(out[i])));
            }
        }
        EXPECT_EQ(out[static_cast<size_t>(n)], 0xABCD) << "wrote past the end";
    }
}

TEST_P(BlockDequantTest, Fp8ToF32EveryDialect) {
    SCOPED_TRACE(testing::seed_note(seed_));
    for (Fp8Format dialect : {Fp8Format::kE4M3Ocp, Fp8Format::kE4M3Fnuz, Fp8Format::kE5M2Ocp, Fp8Format::kE5M2Fnuz}) {
        for (int64_t n : kSizes) {
            std::vector<uint8_t> codes = random_bytes(std::max<int64_t>(n, 256));
            for (int c = 0; c < 256; ++c) codes[static_cast<size_t>(c)] = static_cast<uint8_t>(c);  // every code
            std::shuffle(codes.begin(), codes.end(), rng_);
            std::vector<float> out(codes.size() + 1, 777.0f);
            const size_t count = n < 256 ? static_cast<size_t>(n) : codes.size();
            fp8_to_f32(codes.data(), out.data(), count, dialect);
            for (size_t i = 0; i < count; ++i) {
                ASSERT_TRUE(same_float_or_both_nan(decode_fp8(codes[i], dialect), out[i]))
                    << "dialect " << static_cast<int>(dialect) << " code " << int{codes[i]};
            }
            EXPECT_EQ(out[count], 777.0f) << "wrote past the end";
        }
    }
}

TEST_P(BlockDequantTest, DequantFp8RowIsExact) {
    SCOPED_TRACE(testing::seed_note(seed_));
    for (Fp8Dialect dialect : kDialects) {
        for (int block_k : kBlockSizes) {
            for (int64_t k : kSizes) {
                const std::vector<uint8_t> codes = random_bytes(k);  // includes NaN codes
                const std::vector<uint8_t> scales = random_bytes((k + block_k - 1) / block_k + 1, 100, 150);
                std::vector<float> out(static_cast<size_t>(k) + 1, 99.0f);
                dequant_fp8_row(codes.data(), scales.data(), k, block_k, dialect, out.data());
                for (int64_t j = 0; j < k; ++j) {
                    const auto expected = static_cast<float>(reference_fp8_weight(codes, scales, block_k, j, dialect));
                    ASSERT_TRUE(same_float_or_both_nan(expected, out[j]))
                        << fp8_dialect_name(dialect) << " k " << k << " block " << block_k << " j " << j;
                }
                EXPECT_EQ(out[static_cast<size_t>(k)], 99.0f) << "wrote past the end";
            }
        }
    }
}

TEST_P(BlockDequantTest, DequantFp4RowIsExact) {
    SCOPED_TRACE(testing::seed_note(seed_));
    for (int block_k : kBlockSizes) {
        for (int64_t k : kSizes) {
            if (k % 2 != 0) continue;
            const std::vector<uint8_t> packed = random_bytes(k / 2);
            const std::vector<uint8_t> scales = random_bytes((k + block_k - 1) / block_k + 1, 100, 150);
            std::vector<float> out(static_cast<size_t>(k) + 1, 99.0f);
            dequant_fp4_row(packed.data(), scales.data(), k, block_k, out.data());
            for (int64_t j = 0; j < k; ++j) {
                const auto expected = static_cast<float>(reference_fp4_weight(packed, scales, block_k, j));
                ASSERT_TRUE(same_float_or_both_nan(expected, out[j]))
                    << "k " << k << " block " << block_k << " j " << j;
            }
            EXPECT_EQ(out[static_cast<size_t>(k)], 99.0f) << "wrote past the end";
        }
    }
}

// Scale bytes at the ends of the UE8M0 range (subnormal 2^-127, the largest scales that take the vector kernels'
// fallback, the NaN byte) decode exactly as the scalar reference.
TEST_P(BlockDequantTest, ExtremeScalesAreExact) {
    SCOPED_TRACE(testing::seed_note(seed_));
    const std::vector<uint8_t> scales{0, 1, 2, 119, 120, 245, 246, 247, 250, 253, 254, 255};
    const int block_k = 32;
    const int64_t k = block_k * static_cast<int64_t>(scales.size());
    const std::vector<uint8_t> codes = random_bytes(k);
    std::vector<float> out(static_cast<size_t>(k));
    for (Fp8Dialect dialect : kDialects) {
        dequant_fp8_row(codes.data(), scales.data(), k, block_k, dialect, out.data());
        for (int64_t j = 0; j < k; ++j) {
            const auto expected = static_cast<float>(reference_fp8_weight(codes, scales, block_k, j, dialect));
            ASSERT_TRUE(same_float_or_both_nan(expected, out[j]))
                << fp8_dialect_name(dialect) << " j " << j << " scale " << int{scales[j / block_k]};
        }
    }
    const std::vector<uint8_t> packed = random_bytes(k / 2);
    dequant_fp4_row(packed.data(), scales.data(), k, block_k, out.data());
    for (int64_t j = 0; j < k; ++j) {
        const auto expected = static_cast<float>(reference_fp4_weight(packed, scales, block_k, j));
        ASSERT_TRUE(same_float_or_both_nan(expected, out[j])) << "j " << j << " scale " << int{scales[j / block_k]};
    }
}

TEST_P(BlockDequantTest, DotF32AndBf16MatchReference) {
    SCOPED_TRACE(testing::seed_note(seed_));
    for (int64_t k : kSizes) {
        const std::vector<float> a = random_floats(k);
        const std::vector<float> b = random_floats(k);
        std::vector<uint16_t> w(static_cast<size_t>(k));
        for (int64_t j = 0; j < k; ++j) w[j] = encode_bf16(a[j]);
        double exact = 0.0, magnitude = 0.0, exact_bf16 = 0.0, magnitude_bf16 = 0.0;
        for (int64_t j = 0; j < k; ++j) {
            exact += static_cast<double>(a[j]) * b[j];
            magnitude += std::fabs(static_cast<double>(a[j]) * b[j]);
            exact_bf16 += static_cast<double>(decode_bf16(w[j])) * b[j];
            magnitude_bf16 += std::fabs(static_cast<double>(decode_bf16(w[j])) * b[j]);
        }
        EXPECT_TRUE(close_no_nan(exact, dot_f32(a.data(), b.data(), k), dot_tolerance(k, magnitude))) << "k " << k;
        EXPECT_TRUE(close_no_nan(exact_bf16, dot_bf16_row(w.data(), b.data(), k), dot_tolerance(k, magnitude_bf16)))
            << "k " << k;
    }
}

// Double-accumulated dots (reference numerics): within k units of 2^-53 of the exact sum on every ISA, whatever its
// order of additions (so all round to the same float except where the exact sum sits that close to a rounding
// boundary: core/dot_f64.h); NaN propagates.
TEST_P(BlockDequantTest, DotF64RoundsTheExactSum) {
    SCOPED_TRACE(testing::seed_note(seed_));
    for (int64_t k : kSizes) {
        const std::vector<float> a = random_floats(k);
        const std::vector<float> b = random_floats(k);
        long double exact = 0.0L, magnitude = 0.0L;
        for (int64_t j = 0; j < k; ++j) {
            exact += static_cast<long double>(a[j]) * b[j];
            magnitude += std::fabs(static_cast<long double>(a[j]) * b[j]);
        }
        const double got = dot_f64(a.data(), b.data(), k);
        // A double sum of k exact products is within k units of 2^-53 of the magnitude.
        EXPECT_LE(std::fabs(static_cast<long double>(got) - exact), static_cast<long double>(k) * 0x1p-52L * magnitude)
            << "k " << k;
        if (k > 0) {
            std::vector<float> poisoned = a;
            poisoned[k / 2] = std::numeric_limits<float>::quiet_NaN();
            EXPECT_TRUE(std::isnan(dot_f64(poisoned.data(), b.data(), k))) << "k " << k;
        }
    }
}

TEST_P(BlockDequantTest, DotFp8RowMatchesReference) {
    SCOPED_TRACE(testing::seed_note(seed_));
    for (Fp8Dialect dialect : kDialects) {
        for (int block_k : kBlockSizes) {
            for (int64_t k : kSizes) {
                const std::vector<uint8_t> codes = random_finite_e4m3(k, dialect);
                const std::vector<uint8_t> scales = random_bytes((k + block_k - 1) / block_k, 110, 135);
                const std::vector<float> x = random_floats(k);
                double exact = 0.0, magnitude = 0.0;
                for (int64_t j = 0; j < k; ++j) {
                    const double term = reference_fp8_weight(codes, scales, block_k, j, dialect) * x[j];
                    exact += term;
                    magnitude += std::fabs(term);
                }
                const float got = dot_fp8_row(codes.data(), scales.data(), block_k, dialect, x.data(), k);
                EXPECT_TRUE(close_no_nan(exact, got, dot_tolerance(k, magnitude)))
                    << fp8_dialect_name(dialect) << " k " << k << " block " << block_k;
            }
        }
    }
}

TEST_P(BlockDequantTest, DotFp4RowMatchesReference) {
    SCOPED_TRACE(testing::seed_note(seed_));
    for (int block_k : kBlockSizes) {
        for (int64_t k : kSizes) {
            if (k % 2 != 0) continue;
            const std::vector<uint8_t> packed = random_bytes(k / 2);
            const std::vector<uint8_t> scales = random_bytes((k + block_k - 1) / block_k, 110, 135);
            const std::vector<float> x = random_floats(k);
            double exact = 0.0, magnitude = 0.0;
            for (int64_t j = 0; j < k; ++j) {
                const double term = reference_fp4_weight(packed, scales, block_k, j) * x[j];
                exact += term;
                magnitude += std::fabs(term);
            }
            const float got = dot_fp4_row(packed.data(), scales.data(), block_k, x.data(), k);
            EXPECT_TRUE(close_no_nan(exact, got, dot_tolerance(k, magnitude))) << "k " << k << " block " << block_k;
        }
    }
}

TEST_P(BlockDequantTest, MultiVectorDotsMatchReference) {
    SCOPED_TRACE(testing::seed_note(seed_));
    for (int64_t k : {int64_t{0}, int64_t{2}, int64_t{30}, int64_t{128}, int64_t{1000}, int64_t{2050}, int64_t{4096}}) {
        for (int n_vec : {0, 1, 2, 3, 4, 5, 9}) {
            const int64_t stride = k + 3;
            const std::vector<float> x = random_floats(stride * std::max(n_vec, 1));
            const int block_fp8 = 128;
            const int block_fp4 = 32;
            const Fp8Dialect dialect = kDialects[n_vec % 2];  // both dialects through the batched and fused paths
            const std::vector<uint8_t> codes = random_finite_e4m3(k, dialect);
            const std::vector<uint8_t> scales8 = random_bytes((k + block_fp8 - 1) / block_fp8, 110, 135);
            const std::vector<uint8_t> packed = random_bytes(k / 2);
            const std::vector<uint8_t> scales4 = random_bytes((k + block_fp4 - 1) / block_fp4, 110, 135);
            const std::vector<float> wf = random_floats(k);
            std::vector<uint16_t> wb(static_cast<size_t>(k));
            for (int64_t j = 0; j < k; ++j) wb[j] = encode_bf16(wf[j]);

            std::vector<float> out_f32(static_cast<size_t>(n_vec) + 1, -1.0f), out_bf16 = out_f32, out_fp8 = out_f32,
                                                                               out_fp4 = out_f32;
            dot_f32_multi(wf.data(), x.data(), stride, k, n_vec, out_f32.data());
            dot_bf16_row_multi(wb.data(), x.data(), stride, k, n_vec, out_bf16.data());
            dot_fp8_row_multi(codes.data(), scales8.data(), block_fp8, dialect, x.data(), stride, k, n_vec,
                              out_fp8.data());
            dot_fp4_row_multi(packed.data(), scales4.data(), block_fp4, x.data(), stride, k, n_vec, out_fp4.data());
            for (int v = 0; v < n_vec; ++v) {
                const float* xv = x.data() + v * stride;
                double e[4] = {0, 0, 0, 0}, m[4] = {0, 0, 0, 0};
                for (int64_t j = 0; j < k; ++j) {
                    const double terms[4] = {static_cast<double>(wf[j]) * xv[j],
                                             static_cast<double>(decode_bf16(wb[j])) * xv[j],
                                             reference_fp8_weight(codes, scales8, block_fp8, j, dialect) * xv[j],
                                             reference_fp4_weight(packed, scales4, block_fp4, j) * xv[j]};
                    for (int t = 0; t < 4; ++t) {
                        e[t] += terms[t];
                        m[t] += std::fabs(terms[t]);
                    }
                }
                const std::string where =
                    "k " + std::to_string(k) + " n_vec " + std::to_string(n_vec) + " v " + std::to_string(v);
                EXPECT_TRUE(close_no_nan(e[0], out_f32[v], dot_tolerance(k, m[0]))) << "f32 " << where;
                EXPECT_TRUE(close_no_nan(e[1], out_bf16[v], dot_tolerance(k, m[1]))) << "bf16 " << where;
                EXPECT_TRUE(close_no_nan(e[2], out_fp8[v], dot_tolerance(k, m[2]))) << "fp8 " << where;
                EXPECT_TRUE(close_no_nan(e[3], out_fp4[v], dot_tolerance(k, m[3]))) << "fp4 " << where;
            }
            for (const auto* out : {&out_f32, &out_bf16, &out_fp8, &out_fp4}) {
                EXPECT_EQ((*out)[static_cast<size_t>(n_vec)], -1.0f) << "wrote past n_vec";
            }
        }
    }
}

TEST_P(BlockDequantTest, NanWeightsAndScalesPropagate) {
    SCOPED_TRACE(testing::seed_note(seed_));
    for (int64_t k : {int64_t{2}, int64_t{16}, int64_t{33 * 2}, int64_t{256}, int64_t{1000}}) {
        for (int64_t where : {int64_t{0}, k / 2, k - 1}) {
            const std::vector<float> x = random_floats(k);
            std::vector<uint8_t> codes = random_finite_e4m3(k);
            std::replace(codes.begin(), codes.end(), uint8_t{0x80}, uint8_t{0x00});  // finite in both dialects
            std::vector<uint8_t> scales = random_bytes((k + 127) / 128, 110, 135);
            codes[where] = 0x7F;  // OCP e4m3 NaN
            EXPECT_TRUE(std::isnan(dot_fp8_row(codes.data(), scales.data(), 128, Fp8Dialect::kOcp, x.data(), k)))
                << k << " " << where;
            EXPECT_FALSE(std::isnan(dot_fp8_row(codes.data(), scales.data(), 128, Fp8Dialect::kFnuz, x.data(), k)))
                << "0x7F is 240 in FNUZ " << k << " " << where;
            codes[where] = 0x80;  // FNUZ NaN (OCP -0)
            EXPECT_TRUE(std::isnan(dot_fp8_row(codes.data(), scales.data(), 128, Fp8Dialect::kFnuz, x.data(), k)))
                << k << " " << where;
            codes[where] = 0x00;
            scales[where / 128] = 0xFF;  // UE8M0 NaN
            EXPECT_TRUE(std::isnan(dot_fp8_row(codes.data(), scales.data(), 128, Fp8Dialect::kOcp, x.data(), k)))
                << k << " " << where;

            std::vector<uint8_t> packed = random_bytes(k / 2);
            std::vector<uint8_t> scales4 = random_bytes((k + 31) / 32, 110, 135);
            scales4[where / 32] = 0xFF;
            EXPECT_TRUE(std::isnan(dot_fp4_row(packed.data(), scales4.data(), 32, x.data(), k))) << k << " " << where;

            std::vector<uint16_t> w(static_cast<size_t>(k), encode_bf16(1.0f));
            w[where] = 0x7FC0;
            EXPECT_TRUE(std::isnan(dot_bf16_row(w.data(), x.data(), k))) << k << " " << where;
            std::vector<float> wf(static_cast<size_t>(k), 1.0f);
            wf[where] = kNaN;
            EXPECT_TRUE(std::isnan(dot_f32(wf.data(), x.data(), k))) << k << " " << where;
        }
    }
}

INSTANTIATE_TEST_SUITE_P(AllIsas, BlockDequantTest,
                         ::testing::Values(SimdIsa::kScalar, SimdIsa::kAvx2, SimdIsa::kAvx512),
                         [](const ::testing::TestParamInfo<SimdIsa>& param_info) {
                             return std::string(simd_isa_name(param_info.param));
                         });

TEST(BlockDequantDispatch, DetectedIsaIsSupportedAndSettable) {
    EXPECT_TRUE(simd_isa_supported(SimdIsa::kScalar));
    const SimdIsa best = detected_simd_isa();
    EXPECT_TRUE(simd_isa_supported(best));
    EXPECT_EQ(active_simd_isa(), best);
    set_simd_isa(SimdIsa::kScalar);
    EXPECT_EQ(active_simd_isa(), SimdIsa::kScalar);
    set_simd_isa(best);
    EXPECT_EQ(active_simd_isa(), best);
    for (SimdIsa isa : {SimdIsa::kAvx2, SimdIsa::kAvx512}) {
        if (!simd_isa_supported(isa)) {
            EXPECT_THROW(set_simd_isa(isa), Error);
        }
    }
    std::printf("SIMD kernels on this machine: %s\n", std::string(simd_isa_name(best)).c_str());
}

TEST(BlockDequantDispatch, BadArgumentsAreErrors) {
    const uint8_t bytes[4] = {0, 0, 0, 0};
    const float x[4] = {0, 0, 0, 0};
    float out[4] = {};
    EXPECT_THROW(dequant_fp8_row(bytes, bytes, -1, 128, Fp8Dialect::kOcp, out), Error);
    EXPECT_THROW(dequant_fp8_row(bytes, bytes, 4, 0, Fp8Dialect::kOcp, out), Error);
    EXPECT_THROW(dequant_fp4_row(bytes, bytes, 3, 32, out), Error);
    EXPECT_THROW(dot_fp4_row(bytes, bytes, 32, x, 3), Error);
    EXPECT_THROW(dot_fp8_row(bytes, bytes, -5, Fp8Dialect::kOcp, x, 4), Error);
    EXPECT_THROW(dot_f32(x, x, -1), Error);
    EXPECT_THROW(dot_f32_multi(x, x, 2, 4, 2, out), Error);  // stride shorter than k
    EXPECT_THROW(dot_fp8_row_multi(bytes, bytes, 128, Fp8Dialect::kOcp, x, 4, 4, -1, out), Error);
}

}  // namespace
}  // namespace dsv4
