// The FP8 dialects end to end at the byte level: every code round-trips through both dialects' codecs and through the
// exact block conversion, conversion preserves every value (moving block scales where needed) and reports what it
// cannot represent, the site quantisers' maxima, and the census that tells OCP bytes from FNUZ bytes.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "core/block_dequant.h"
#include "core/error.h"
#include "core/float_formats.h"
#include "core/fp8_census.h"
#include "core/fp8_convert.h"
#include "core/quant_sim.h"
#include "format_test_util.h"

namespace dsv4 {
namespace {

Fp8Dialect other(Fp8Dialect d) {
    return d == Fp8Dialect::kOcp ? Fp8Dialect::kFnuz : Fp8Dialect::kOcp;
}

// Dequantised values of a converted matrix, for value-by-value comparison.
std::vector<float> dequantise(const std::vector<uint8_t>& codes, const std::vector<uint8_t>& scales,
                              const Fp8BlockGrid& g, Fp8Dialect dialect) {
    std::vector<float> out(codes.size());
    for (int64_t r = 0; r < g.rows; ++r) {
        const uint8_t* s = scales.data() + (r / g.block_rows) * g.scale_cols();
        dequant_fp8_row(codes.data() + r * g.cols, s, g.cols, g.block_cols, dialect, out.data() + r * g.cols);
    }
    return out;
}

TEST(Fp8Dialect, NamesParseAndSiteMaxima) {
    for (Fp8Dialect d : {Fp8Dialect::kOcp, Fp8Dialect::kFnuz}) EXPECT_EQ(parse_fp8_dialect(fp8_dialect_name(d)), d);
    EXPECT_THROW(parse_fp8_dialect("e4m3"), Error);
    EXPECT_EQ(activation_fp8_quant(Fp8Dialect::kOcp).qmax, 448.0f);
    EXPECT_EQ(activation_fp8_quant(Fp8Dialect::kFnuz).qmax, 240.0f);
    EXPECT_EQ(kv_record_fp8_quant(Fp8Dialect::kFnuz).qmax, 240.0f);
    EXPECT_EQ(index_key_fp8_quant(Fp8Dialect::kOcp).qmax, 448.0f);
    EXPECT_EQ(index_key_fp8_quant(Fp8Dialect::kFnuz).qmax, 224.0f);
}

// Every code of each dialect decodes and re-encodes to itself (NaN to a NaN code), and the
// conversion OCP -> FNUZ -> OCP and FNUZ -> OCP -> FNUZ of a one-element block returns the same value.
TEST(Fp8Dialect, EveryCodeRoundTripsThroughBothDialects) {
    for (Fp8Dialect d : {Fp8Dialect::kOcp, Fp8Dialect::kFnuz}) {
        for (int code = 0; code < 256; ++code) {
            const auto c = static_cast<uint8_t>(code);
            const float v = decode_e4m3(c, d);
            if (std::isnan(v)) {
                EXPECT_TRUE(std::isnan(decode_e4m3(encode_e4m3(v, d), d))) << "NaN stays NaN, code " << code;
            } else {
                EXPECT_EQ(encode_e4m3(v, d), c) << fp8_dialect_name(d) << " code " << code;
            }
            for (uint8_t scale : {uint8_t{1}, uint8_t{127}, uint8_t{200}}) {
                const Fp8BlockGrid g{1, 1, 128, 128};
                uint8_t there = 0, there_scale = 0, back = 0, back_scale = 0;
                const Fp8ConversionReport r1 = convert_fp8_blocks(&c, &scale, g, d, other(d), &there, &there_scale);
                const Fp8ConversionReport r2 =
                    convert_fp8_blocks(&there, &there_scale, g, other(d), d, &back, &back_scale);
                const float original = v * decode_ue8m0(scale);
                const float converted = decode_e4m3(there, other(d)) * decode_ue8m0(there_scale);
                const float returned = decode_e4m3(back, d) * decode_ue8m0(back_scale);
                EXPECT_TRUE(r1.exact() && r2.exact()) << fp8_dialect_name(d) << " code " << code;
                EXPECT_EQ(std::isnan(original), std::isnan(converted)) << code;
                EXPECT_EQ(std::isnan(original), std::isnan(returned)) << code;
                if (!std::isnan(original)) {
                    EXPECT_EQ(original, converted) << fp8_dialect_name(d) << " code " << code;
                    EXPECT_EQ(original, returned) << fp8_dialect_name(d) << " code " << code;
                }
            }
        }
    }
}

// The dialect trap (design.md principle 3): every finite, non-zero OCP code read as FNUZ is exactly half its value;
// only 0x80 (OCP -0, FNUZ NaN) and 0x7F / 0xFF (OCP NaN, FNUZ 240) break the rule.
TEST(Fp8Dialect, TheSameByteIsHalfTheValue) {
    for (int code = 0; code < 256; ++code) {
        const auto c = static_cast<uint8_t>(code);
        if (c == 0x80 || (c & 0x7F) == 0x7F) continue;
        EXPECT_EQ(decode_e4m3(c, Fp8Dialect::kFnuz) * 2.0f, decode_e4m3(c, Fp8Dialect::kOcp)) << code;
    }
    EXPECT_TRUE(std::isnan(decode_e4m3(0x80, Fp8Dialect::kFnuz)));
    EXPECT_EQ(decode_e4m3(0x7F, Fp8Dialect::kFnuz), 240.0f);
    EXPECT_TRUE(std::isnan(decode_e4m3(0x7F, Fp8Dialect::kOcp)));
}

// Random block-scaled matrices with ragged edges: the converted matrix holds exactly the same values, and the
// scale moves exactly in the blocks that need it.
TEST(Fp8Convert, ConversionPreservesEveryValue) {
    const uint32_t seed = testing::fresh_seed();
    SCOPED_TRACE(testing::seed_note(seed));
    std::mt19937 rng(seed);
    for (Fp8Dialect from : {Fp8Dialect::kOcp, Fp8Dialect::kFnuz}) {
        const Fp8BlockGrid g{300, 200, 128, 64};
        std::vector<float> values(static_cast<size_t>(g.rows * g.cols));
        std::normal_distribution<float> normal(0.0f, 0.02f);
        for (float& v : values) v = normal(rng);
        std::vector<uint8_t> codes(values.size()), scales(static_cast<size_t>(g.scale_rows() * g.scale_cols()));
        // Quantise every block with the dialect's own quantiser (rows of one block share one scale).
        for (int64_t br = 0; br < g.scale_rows(); ++br) {
            for (int64_t bc = 0; bc < g.scale_cols(); ++bc) {
                float amax = 0.0f;
                for (int64_t r = br * 128; r < std::min<int64_t>(g.rows, br * 128 + 128); ++r) {
                    for (int64_t c = bc * 64; c < std::min<int64_t>(g.cols, bc * 64 + 64); ++c) {
                        amax = std::max(amax, std::fabs(values[r * g.cols + c]));
                    }
                }
                const int e = pow2_scale_exponent(amax, 0.0f, fp8_max(e4m3_format(from)));
                scales[br * g.scale_cols() + bc] = static_cast<uint8_t>(e + 127);
                for (int64_t r = br * 128; r < std::min<int64_t>(g.rows, br * 128 + 128); ++r) {
                    for (int64_t c = bc * 64; c < std::min<int64_t>(g.cols, bc * 64 + 64); ++c) {
                        codes[r * g.cols + c] = encode_e4m3(std::ldexp(values[r * g.cols + c], -e), from);
                    }
                }
            }
        }
        std::vector<uint8_t> out_codes(codes.size()), out_scales(scales.size());
        const Fp8ConversionReport report =
            convert_fp8_blocks(codes.data(), scales.data(), g, from, other(from), out_codes.data(), out_scales.data());
        std::printf("[ fp8 ] %s -> %s: %s\n", std::string(fp8_dialect_name(from)).c_str(),
                    std::string(fp8_dialect_name(other(from))).c_str(), report.describe().c_str());
        EXPECT_EQ(report.blocks, g.scale_rows() * g.scale_cols());
        EXPECT_EQ(report.codes, g.rows * g.cols);
        if (from == Fp8Dialect::kOcp) {
            EXPECT_TRUE(report.exact()) << report.describe();
            EXPECT_GT(report.blocks_rescaled, 0) << "an OCP quantiser puts most block maxima above 240";
        }
        const std::vector<float> before = dequantise(codes, scales, g, from);
        const std::vector<float> after = dequantise(out_codes, out_scales, g, other(from));
        int64_t differ = 0;
        for (size_t i = 0; i < before.size(); ++i) differ += before[i] != after[i];
        EXPECT_EQ(differ, report.inexact_codes) << "exactly the reported codes change";
        for (uint8_t c : out_codes) {
            ASSERT_FALSE(std::isnan(decode_e4m3(c, other(from)))) << "no NaN out of finite input";
            if (other(from) == Fp8Dialect::kFnuz) {
                ASSERT_NE(c, 0x80);
            }
        }
    }
}

TEST(Fp8Convert, OcpNeedsTheExponentRaisedOnlyAbove240) {
    const Fp8BlockGrid g{1, 4, 1, 4};
    const uint8_t small[4] = {0x77, 0xF7, 0x01, 0x80};  // 240, -240, 2^-9, -0
    const uint8_t large[4] = {0x7E, 0x01, 0x81, 0x00};  // 448, 2^-9, -2^-9, 0
    const uint8_t scale = 127;
    uint8_t out[4], out_scale = 0;
    Fp8ConversionReport r = convert_fp8_blocks(small, &scale, g, Fp8Dialect::kOcp, Fp8Dialect::kFnuz, out, &out_scale);
    EXPECT_EQ(out_scale, 127);
    EXPECT_EQ(r.blocks_rescaled, 0);
    EXPECT_EQ(out[0], 0x7F) << "240 is FNUZ's largest code";
    EXPECT_EQ(out[3], 0x00) << "-0 becomes +0";
    r = convert_fp8_blocks(large, &scale, g, Fp8Dialect::kOcp, Fp8Dialect::kFnuz, out, &out_scale);
    EXPECT_EQ(out_scale, 128);
    EXPECT_EQ(r.blocks_rescaled, 1);
    for (int i = 0; i < 4; ++i) EXPECT_EQ(out[i], large[i]) << "raised: the same bytes (" << i << ")";
    EXPECT_TRUE(r.exact());
}

TEST(Fp8Convert, UnrepresentableAndNanCodesAreReported) {
    const Fp8BlockGrid g{1, 3, 1, 3};
    // OCP 448 under the largest scale: cannot be raised -> saturates to 240, counted.
    const uint8_t top[3] = {0x7E, 0x10, 0x7F};  // 448, 2^-5, NaN
    const uint8_t max_scale = 0xFE;
    uint8_t out[3], out_scale = 0;
    Fp8ConversionReport r =
        convert_fp8_blocks(top, &max_scale, g, Fp8Dialect::kOcp, Fp8Dialect::kFnuz, out, &out_scale);
    EXPECT_FALSE(r.exact());
    EXPECT_EQ(r.inexact_codes, 1);
    EXPECT_EQ(r.first_inexact_col, 0);
    EXPECT_EQ(r.first_inexact_code, 0x7E);
    EXPECT_EQ(r.nan_codes, 1);
    EXPECT_EQ(out[2], 0x80) << "OCP NaN becomes the FNUZ NaN";
    EXPECT_NE(r.describe().find("NOT representable"), std::string::npos) << r.describe();
    // FNUZ: an odd subnormal (needs the exponent lowered) next to 240 (cannot be doubled).
    const uint8_t both[3] = {0x01, 0x7F, 0x80};
    const uint8_t scale = 127;
    r = convert_fp8_blocks(both, &scale, g, Fp8Dialect::kFnuz, Fp8Dialect::kOcp, out, &out_scale);
    EXPECT_EQ(r.inexact_codes, 1);
    EXPECT_EQ(r.nan_codes, 1);
    EXPECT_EQ(out[2], 0x7F);
    // A lone odd subnormal converts by lowering the exponent.
    const uint8_t odd[3] = {0x01, 0x03, 0x40};
    r = convert_fp8_blocks(odd, &scale, g, Fp8Dialect::kFnuz, Fp8Dialect::kOcp, out, &out_scale);
    EXPECT_TRUE(r.exact());
    EXPECT_EQ(out_scale, 126);
    // A NaN scale stays NaN.
    const uint8_t nan_scale = 0xFF;
    r = convert_fp8_blocks(top, &nan_scale, g, Fp8Dialect::kOcp, Fp8Dialect::kFnuz, out, &out_scale);
    EXPECT_EQ(out_scale, 0xFF);
    EXPECT_EQ(r.nan_scales, 1);
}

// Why the FNUZ indexer keys use 224 (core/fp8_dialect.h): a FNUZ quantiser with qmax 224 writes exactly the OCP
// quantiser's bytes (-0 flushed) with the scale one binade up; with qmax 240 a block changes only where
// amax / 2^k lies in (224, 240] (finer FNUZ grid, one binade lower scale).
TEST(Fp8Quant, FnuzAt224IsOcpBytesWithTheScaleDoubled) {
    const uint32_t seed = testing::fresh_seed();
    SCOPED_TRACE(testing::seed_note(seed));
    std::mt19937 rng(seed);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    const int64_t n = 128 * 64;
    std::vector<float> x(static_cast<size_t>(n));
    for (float& v : x) v = normal(rng) * std::exp2(static_cast<float>(rng() % 20) - 10.0f);
    std::vector<uint8_t> ocp(x.size()), fnuz224(x.size()), fnuz240(x.size());
    std::vector<uint8_t> s_ocp(64), s_224(64), s_240(64);
    act_quant_fp8(x.data(), n, 128, kOcpQuant, ocp.data(), s_ocp.data());
    act_quant_fp8(x.data(), n, 128, index_key_fp8_quant(Fp8Dialect::kFnuz), fnuz224.data(), s_224.data());
    act_quant_fp8(x.data(), n, 128, activation_fp8_quant(Fp8Dialect::kFnuz), fnuz240.data(), s_240.data());
    int64_t blocks_240_differ = 0;
    for (int b = 0; b < 64; ++b) {
        EXPECT_EQ(s_224[b], s_ocp[b] + 1) << b;
        for (int j = b * 128; j < b * 128 + 128; ++j) {
            ASSERT_EQ(fnuz224[j], ocp[j] == 0x80 ? 0x00 : ocp[j]) << j;
        }
        if (s_240[b] != s_224[b]) {
            EXPECT_EQ(s_240[b], s_224[b] - 1) << b;
            ++blocks_240_differ;
        }
    }
    std::printf("[ fp8 ] FNUZ qmax 240 picks a finer scale than 224 in %lld of 64 blocks\n",
                static_cast<long long>(blocks_240_differ));
    // The finer scale changes values only in the subnormal range: amax 230 (in (224, 240]) keeps the OCP scale 1 with
    // 240, where 2^-10 is a FNUZ subnormal; OCP (and FNUZ 224, scale 2) round it to 0 as a tie.
    float block[2] = {230.0f, 0x1p-10f};
    float ocp_block[2] = {230.0f, 0x1p-10f};
    act_quant_fp8_sim(block, 2, 2, activation_fp8_quant(Fp8Dialect::kFnuz));
    act_quant_fp8_sim(ocp_block, 2, 2, kOcpQuant);
    EXPECT_EQ(block[0], 224.0f);
    EXPECT_EQ(ocp_block[0], 224.0f);
    EXPECT_EQ(block[1], 0x1p-10f);
    EXPECT_EQ(ocp_block[1], 0.0f);
}

TEST(Fp8Census, CountsCodesAndBlockMaxima) {
    const Fp8BlockGrid g{3, 5, 2, 2};
    std::vector<uint8_t> codes(15, 0x10);
    codes[0] = 0x80;
    codes[6] = 0xFF;
    codes[14] = 0x7E;
    const Fp8CodeCensus c = census_fp8_blocks(codes.data(), g);
    EXPECT_EQ(c.codes, 15);
    EXPECT_EQ(c.code_80, 1);
    EXPECT_EQ(c.code_7f, 1);
    EXPECT_EQ(c.blocks, 6);
    EXPECT_EQ(c.block_max[0x7F], 1);  // block (0, 0) holds 0xFF at row 1 col 1
    EXPECT_EQ(c.block_max[0x7E], 1);
    EXPECT_EQ(c.block_max[0x10], 4);
    EXPECT_EQ(fp8_evidence(c), Fp8Evidence::kContradictory);
    const Fp8CodeCensus fast = census_fp8_codes(codes.data(), 15);
    EXPECT_EQ(fast.code_80, 1);
    EXPECT_EQ(fast.blocks, 0);
}

TEST(Fp8Census, EvidenceDecidesOnlyOnNanCodes) {
    Fp8CodeCensus c;
    EXPECT_EQ(fp8_evidence(c), Fp8Evidence::kNone);
    EXPECT_FALSE(contradicts(Fp8Evidence::kNone, Fp8Dialect::kFnuz));
    c.code_80 = 3;
    EXPECT_EQ(fp8_evidence(c), Fp8Evidence::kOcp);
    EXPECT_TRUE(contradicts(fp8_evidence(c), Fp8Dialect::kFnuz));
    EXPECT_FALSE(contradicts(fp8_evidence(c), Fp8Dialect::kOcp));
    c.code_80 = 0;
    c.code_7f = 2;
    EXPECT_EQ(fp8_evidence(c), Fp8Evidence::kFnuz);
    EXPECT_TRUE(contradicts(fp8_evidence(c), Fp8Dialect::kOcp));
    EXPECT_TRUE(contradicts(Fp8Evidence::kContradictory, Fp8Dialect::kOcp));
    EXPECT_TRUE(contradicts(Fp8Evidence::kContradictory, Fp8Dialect::kFnuz));
}

// The converter's output carries the evidence for its own dialect: converted OCP bytes lose every 0x80 and gain
// 0x7F wherever a block's largest value was exactly 240.
TEST(Fp8Census, ConvertedBytesShowTheirDialect) {
    const Fp8BlockGrid g{1, 4, 1, 4};
    const uint8_t ocp[4] = {0x77, 0x80, 0x01, 0x02};  // block max 240, a -0
    const uint8_t scale = 120;
    uint8_t out[4], out_scale = 0;
    convert_fp8_blocks(ocp, &scale, g, Fp8Dialect::kOcp, Fp8Dialect::kFnuz, out, &out_scale);
    EXPECT_EQ(fp8_evidence(census_fp8_codes(ocp, 4)), Fp8Evidence::kOcp);
    EXPECT_EQ(fp8_evidence(census_fp8_codes(out, 4)), Fp8Evidence::kFnuz);
}

}  // namespace
}  // namespace dsv4
