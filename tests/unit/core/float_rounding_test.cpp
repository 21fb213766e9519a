// Encoding: round trips, ties to even, saturation, subnormals, NaN/inf policy and a brute-force nearest-code check.
#include <gtest/gtest.h>

#include <array>
#include <bit>
#include <cmath>
#include <functional>
#include <limits>
#include <random>
#include <vector>

#include "core/float_formats.h"
#include "format_test_util.h"

namespace dsv4 {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

// A format under test: its codec plus the number of codes.
struct Codec {
    const char* name;
    uint32_t n_codes;
    std::function<float(uint32_t)> decode;
    std::function<uint32_t(float)> encode;
    bool saturating;                // satfinite (no inf produced from finite input)
    bool no_negative_zero = false;  // FNUZ: -0 encodes as +0
};

std::vector<Codec> all_codecs() {
    std::vector<Codec> codecs;
    codecs.push_back({"bf16", 65536, [](uint32_t c) { return decode_bf16(static_cast<uint16_t>(c)); },
                      [](float v) { return uint32_t{encode_bf16(v)}; }, false});
    codecs.push_back({"fp16", 65536, [](uint32_t c) { return decode_fp16(static_cast<uint16_t>(c)); },
                      [](float v) { return uint32_t{encode_fp16(v)}; }, false});
    for (Fp8Format d : {Fp8Format::kE4M3Ocp, Fp8Format::kE4M3Fnuz, Fp8Format::kE5M2Ocp, Fp8Format::kE5M2Fnuz}) {
        static constexpr const char* kNames[] = {"e4m3", "e4m3fnuz", "e5m2", "e5m2fnuz"};
        codecs.push_back({kNames[static_cast<int>(d)], 256,
                          [d](uint32_t c) { return decode_fp8(static_cast<uint8_t>(c), d); },
                          [d](float v) { return uint32_t{encode_fp8(v, d)}; }, true,
                          d == Fp8Format::kE4M3Fnuz || d == Fp8Format::kE5M2Fnuz});
    }
    codecs.push_back({"e2m1", 16, [](uint32_t c) { return decode_e2m1(static_cast<uint8_t>(c)); },
                      [](float v) { return uint32_t{encode_e2m1(v)}; }, true});
    return codecs;
}

TEST(FloatFormatsEncode, EveryFiniteCodeRoundTrips) {
    for (const Codec& codec : all_codecs()) {
        int finite = 0;
        for (uint32_t code = 0; code < codec.n_codes; ++code) {
            const float v = codec.decode(code);
            if (std::isnan(v)) continue;
            if (std::isinf(v)) {
                if (!codec.saturating) {
                    EXPECT_EQ(codec.encode(v), code) << codec.name;
                }
                continue;
            }
            ASSERT_EQ(codec.encode(v), code) << codec.name << " value " << v;
            ++finite;
        }
        EXPECT_GT(finite, 0) << codec.name;
    }
}

// Positive finite codes in increasing value order, each with the next larger code; for formats with inf the
// last pair is (max, inf).
TEST(FloatFormatsEncode, MidpointsRoundToEven) {
    for (const Codec& codec : all_codecs()) {
        std::vector<uint32_t> ascending;
        const uint32_t sign_bit = codec.n_codes / 2;
        for (uint32_t code = 0; code < sign_bit; ++code) {
            const float v = codec.decode(code);
            if (std::isnan(v)) continue;
            if (std::isinf(v) && codec.saturating) continue;
            ascending.push_back(code);
        }
        for (size_t i = 0; i + 1 < ascending.size(); ++i) {
            const uint32_t lo = ascending[i];
            const uint32_t hi = ascending[i + 1];
            const float lo_v = codec.decode(lo);
            const float hi_v = codec.decode(hi);
            ASSERT_LT(lo_v, hi_v) << codec.name;
            const float mid = std::isinf(hi_v) ? static_cast<float>(lo_v + (lo_v - codec.decode(lo - 1)) / 2)
                                               : static_cast<float>((static_cast<double>(lo_v) + hi_v) / 2);
            ASSERT_GT(mid, lo_v);
            ASSERT_LT(mid, hi_v);
            // Adjacent codes differ in the last mantissa bit; "even" is the code whose last bit is 0.
            const uint32_t even = (lo % 2 == 0) ? lo : hi;
            EXPECT_EQ(codec.encode(mid), even) << codec.name << " midpoint " << mid;
            const uint32_t negative_even = (even == 0 && codec.no_negative_zero) ? 0 : (even | sign_bit);
            EXPECT_EQ(codec.encode(-mid), negative_even) << codec.name << " midpoint " << -mid;
            EXPECT_EQ(codec.encode(std::nextafter(mid, 0.0f)), lo) << codec.name << " below " << mid;
            EXPECT_EQ(codec.encode(std::nextafter(mid, kInf)), hi) << codec.name << " above " << mid;
        }
    }
}

TEST(FloatFormatsEncode, BeyondLargestFiniteSaturates) {
    // e4m3 OCP: 448 is the max; 480 would be the next code (it is the NaN pattern).
    for (float v : {448.0f, 449.0f, 464.0f, 479.0f, 480.0f, 1e6f, 3e38f, kInf}) {
        EXPECT_EQ(encode_e4m3(v), 0x7E) << v;
        EXPECT_EQ(encode_e4m3(-v), 0xFE) << v;
    }
    // e4m3 FNUZ: 240 max, 256 would be next.
    for (float v : {240.0f, 241.0f, 248.0f, 255.0f, 256.0f, 448.0f, kInf}) {
        EXPECT_EQ(encode_e4m3_fnuz(v), 0x7F) << v;
        EXPECT_EQ(encode_e4m3_fnuz(-v), 0xFF) << v;
    }
    // e5m2 OCP: 57344 max, 61440 would be the tie with the next binade (inf); satfinite keeps it finite.
    for (float v : {57344.0f, 60000.0f, 61440.0f, 65536.0f, kInf}) {
        EXPECT_EQ(encode_e5m2(v), 0x7B) << v;
        EXPECT_EQ(encode_e5m2(-v), 0xFB) << v;
    }
    for (float v : {57344.0f, 61440.0f, 1e9f, kInf}) {
        EXPECT_EQ(encode_e5m2_fnuz(v), 0x7F) << v;
        EXPECT_EQ(encode_e5m2_fnuz(-v), 0xFF) << v;
    }
    for (float v : {6.0f, 6.5f, 7.0f, 8.0f, 1e30f, kInf}) {
        EXPECT_EQ(encode_e2m1(v), 0x7) << v;
        EXPECT_EQ(encode_e2m1(-v), 0xF) << v;
    }
    // IEEE formats round to inf once at or past max + half an ulp.
    EXPECT_EQ(encode_fp16(65519.0f), 0x7BFF);
    EXPECT_EQ(encode_fp16(65520.0f), 0x7C00);
    EXPECT_EQ(encode_fp16(-1e9f), 0xFC00);
    EXPECT_EQ(encode_bf16(std::numeric_limits<float>::max()), 0x7F80);  // max float is past bf16 max + half ulp
    EXPECT_EQ(encode_bf16(decode_bf16(0x7F7F)), 0x7F7F);
}

TEST(FloatFormatsEncode, SubnormalsAndUnderflow) {
    EXPECT_EQ(encode_e4m3(std::ldexp(1.0f, -9)), 0x01);
    EXPECT_EQ(encode_e4m3(std::ldexp(1.0f, -10)), 0x00);        // tie between 0 and 2^-9 -> even (0)
    EXPECT_EQ(encode_e4m3(std::ldexp(3.0f, -11)), 0x01);        // 0.75 * 2^-9
    EXPECT_EQ(encode_e4m3(std::ldexp(7.5f, -9)), 0x08);         // tie 7 vs 8 (smallest normal) -> 8
    EXPECT_EQ(encode_e4m3(-std::ldexp(1.0f, -11)), 0x80);       // underflows to -0 in OCP
    EXPECT_EQ(encode_e4m3_fnuz(-std::ldexp(1.0f, -12)), 0x00);  // FNUZ has no -0
    EXPECT_EQ(encode_e4m3_fnuz(std::ldexp(1.0f, -10)), 0x01);
    EXPECT_EQ(encode_e4m3_fnuz(-0.0f), 0x00);
    EXPECT_EQ(encode_e5m2_fnuz(-0.0f), 0x00);
    EXPECT_EQ(encode_e4m3(-0.0f), 0x80);
    EXPECT_EQ(encode_e5m2(std::ldexp(1.0f, -16)), 0x01);
    EXPECT_EQ(encode_e5m2_fnuz(std::ldexp(1.0f, -17)), 0x01);
    EXPECT_EQ(encode_fp16(std::ldexp(1.0f, -24)), 0x0001);
    EXPECT_EQ(encode_fp16(std::ldexp(1.0f, -25)), 0x0000);
    EXPECT_EQ(encode_fp16(std::ldexp(3.0f, -26)), 0x0001);
    EXPECT_EQ(encode_e2m1(0.25f), 0x0);  // tie 0 vs 0.5 -> 0
    EXPECT_EQ(encode_e2m1(0.26f), 0x1);
    EXPECT_EQ(encode_e2m1(-0.25f), 0x8);  // e2m1 keeps -0
    // Float subnormal inputs.
    const float tiny = std::numeric_limits<float>::denorm_min();
    EXPECT_EQ(encode_e4m3(tiny), 0x00);
    EXPECT_EQ(encode_bf16(tiny), 0x0000);
    EXPECT_EQ(encode_bf16(std::ldexp(1.0f, -133)), 0x0001);  // smallest bf16 subnormal
    EXPECT_EQ(encode_bf16(std::ldexp(3.0f, -135)), 0x0001);  // 0.75 ulp rounds up
}

TEST(FloatFormatsEncode, NanAndInfinityPolicy) {
    EXPECT_EQ(encode_e4m3(kNaN), 0x7F);
    EXPECT_EQ(encode_e4m3(-kNaN), 0xFF);
    EXPECT_EQ(encode_e4m3_fnuz(kNaN), 0x80);
    EXPECT_EQ(encode_e4m3_fnuz(-kNaN), 0x80);
    EXPECT_TRUE(std::isnan(decode_e5m2(encode_e5m2(kNaN))));
    EXPECT_TRUE(std::isnan(decode_e5m2(encode_e5m2(-kNaN))));
    EXPECT_EQ(encode_e5m2_fnuz(kNaN), 0x80);
    EXPECT_EQ(encode_e2m1(kNaN), 0x7);  // no NaN in e2m1: documented as +6
    EXPECT_TRUE(std::isnan(decode_bf16(encode_bf16(kNaN))));
    EXPECT_TRUE(std::isnan(decode_bf16(encode_bf16(-kNaN))));
    // A signalling-style NaN whose payload is only in the low bits must not become inf.
    const float low_payload_nan = std::bit_cast<float>(0x7F800001u);
    EXPECT_TRUE(std::isnan(decode_bf16(encode_bf16(low_payload_nan))));
    EXPECT_TRUE(std::isnan(decode_fp16(encode_fp16(low_payload_nan))));
    EXPECT_EQ(encode_fp16(kInf), 0x7C00);
    EXPECT_EQ(encode_fp16(-kInf), 0xFC00);
    EXPECT_EQ(encode_bf16(-kInf), 0xFF80);
}

TEST(FloatFormatsEncode, Ue8m0RoundsExponentUp) {
    EXPECT_EQ(encode_ue8m0(1.0f), 127);
    EXPECT_EQ(encode_ue8m0(1.0000001f), 128);
    EXPECT_EQ(encode_ue8m0(3.0f), 129);
    EXPECT_EQ(encode_ue8m0(4.0f), 129);
    EXPECT_EQ(encode_ue8m0(-3.0f), 129);  // sign ignored
    EXPECT_EQ(encode_ue8m0(0.75f), 127);
    EXPECT_EQ(encode_ue8m0(std::ldexp(1.0f, -126)), 1);
    EXPECT_EQ(encode_ue8m0(std::ldexp(1.5f, -127)), 1);  // subnormal, ceil -> 2^-126
    EXPECT_EQ(encode_ue8m0(std::ldexp(1.0f, -127)), 0);
    EXPECT_EQ(encode_ue8m0(std::ldexp(1.0f, -140)), 0);  // clamped
    EXPECT_EQ(encode_ue8m0(0.0f), 0);
    EXPECT_EQ(encode_ue8m0(std::ldexp(1.0f, 127)), 254);
    EXPECT_EQ(encode_ue8m0(std::ldexp(1.5f, 127)), 254);  // clamped, never the NaN byte
    EXPECT_EQ(encode_ue8m0(std::numeric_limits<float>::max()), 254);
    EXPECT_EQ(encode_ue8m0(kInf), 254);
    EXPECT_EQ(encode_ue8m0(kNaN), 255);
    for (int e = -127; e <= 127; ++e) {
        const float p = std::ldexp(1.0f, e);
        EXPECT_EQ(encode_ue8m0(p), e + 127);
        EXPECT_EQ(decode_ue8m0(encode_ue8m0(p)), p);
        if (e > -127 && e < 127) {
            EXPECT_EQ(encode_ue8m0(std::nextafter(p, kInf)), e + 128) << e;
        }
    }
}

// Every encoder returns the nearest representable value (ties to the even code), found here by brute force over all
// codes; values beyond max saturate.
TEST(FloatFormatsEncode, RandomValuesGetTheNearestCode) {
    const uint32_t seed = testing::fresh_seed();
    SCOPED_TRACE(testing::seed_note(seed));
    std::mt19937 rng(seed);
    for (const Codec& codec : all_codecs()) {
        if (codec.n_codes > 256) continue;
        float max_finite = 0.0f;
        int min_exp = 0;
        int max_exp = 0;
        for (uint32_t code = 0; code < codec.n_codes; ++code) {
            const float v = codec.decode(code);
            if (std::isfinite(v)) max_finite = std::max(max_finite, v);
        }
        std::frexp(max_finite, &max_exp);
        min_exp = -20;
        std::uniform_int_distribution<int> exp_dist(min_exp, max_exp + 1);
        std::uniform_real_distribution<float> mant_dist(0.5f, 1.0f);
        for (int trial = 0; trial < 20000; ++trial) {
            float x = std::ldexp(mant_dist(rng), exp_dist(rng));
            if (rng() & 1) x = -x;
            const uint32_t got = codec.encode(x);
            const float got_v = codec.decode(got);
            ASSERT_FALSE(std::isnan(got_v)) << codec.name << " " << x;
            if (std::fabs(x) >= max_finite) {
                ASSERT_EQ(std::fabs(got_v), max_finite) << codec.name << " " << x;
                continue;
            }
            double best = std::numeric_limits<double>::infinity();
            for (uint32_t code = 0; code < codec.n_codes; ++code) {
                const float v = codec.decode(code);
                if (!std::isfinite(v)) continue;
                best = std::min(best, std::fabs(static_cast<double>(v) - x));
            }
            ASSERT_EQ(std::fabs(static_cast<double>(got_v) - x), best) << codec.name << " x=" << x;
            if (got_v != 0.0f) {
                ASSERT_EQ(std::signbit(got_v), std::signbit(x)) << codec.name << " x=" << x;
            }
        }
    }
}

}  // namespace
}  // namespace dsv4
