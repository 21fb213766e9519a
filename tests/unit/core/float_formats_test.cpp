// Decoding of every code of every format against an independently computed value, the OCP -> FNUZ conversion and
// the FP8 dialect trap.
#include "core/float_formats.h"

#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <limits>

#include "format_test_util.h"

namespace dsv4 {
namespace {

using testing::reference_value;
using testing::same_float_or_both_nan;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

TEST(FloatFormatsDecode, Bf16EveryCode) {
    for (uint32_t code = 0; code < 65536; ++code) {
        const uint32_t field = (code >> 7) & 0xFF;
        const bool negative = (code & 0x8000) != 0;
        float expected = 0.0f;
        if (field == 0xFF) {
            expected = (code & 0x7F) != 0 ? kNaN : (negative ? -kInf : kInf);
        } else {
            expected = static_cast<float>(reference_value(code, 8, 7, 127));
        }
        ASSERT_TRUE(same_float_or_both_nan(expected, decode_bf16(static_cast<uint16_t>(code)))) << "code " << code;
    }
}

TEST(FloatFormatsDecode, Fp16EveryCode) {
    for (uint32_t code = 0; code < 65536; ++code) {
        const uint32_t field = (code >> 10) & 0x1F;
        const bool negative = (code & 0x8000) != 0;
        float expected = 0.0f;
        if (field == 0x1F) {
            expected = (code & 0x3FF) != 0 ? kNaN : (negative ? -kInf : kInf);
        } else {
            expected = static_cast<float>(reference_value(code, 5, 10, 15));
        }
        ASSERT_TRUE(same_float_or_both_nan(expected, decode_fp16(static_cast<uint16_t>(code)))) << "code " << code;
    }
    EXPECT_EQ(decode_fp16(0x7BFF), 65504.0f);
    EXPECT_EQ(decode_fp16(0x0001), std::ldexp(1.0f, -24));
}

// Expected value of an FP8 code in a dialect, with that dialect's special codes spelled out here.
float expected_fp8(uint32_t code, Fp8Format dialect) {
    switch (dialect) {
        case Fp8Format::kE4M3Ocp:
            if ((code & 0x7F) == 0x7F) return kNaN;
            return static_cast<float>(reference_value(code, 4, 3, 7));
        case Fp8Format::kE4M3Fnuz:
            if (code == 0x80) return kNaN;
            return static_cast<float>(reference_value(code, 4, 3, 8));
        case Fp8Format::kE5M2Ocp:
            if ((code & 0x7C) == 0x7C) {
                if ((code & 0x03) != 0) return kNaN;
                return (code & 0x80) ? -kInf : kInf;
            }
            return static_cast<float>(reference_value(code, 5, 2, 15));
        case Fp8Format::kE5M2Fnuz:
            if (code == 0x80) return kNaN;
            return static_cast<float>(reference_value(code, 5, 2, 16));
    }
    return kNaN;
}

constexpr std::array<Fp8Format, 4> kDialects{Fp8Format::kE4M3Ocp, Fp8Format::kE4M3Fnuz, Fp8Format::kE5M2Ocp,
                                             Fp8Format::kE5M2Fnuz};

TEST(FloatFormatsDecode, Fp8EveryCodeEveryDialect) {
    for (Fp8Format dialect : kDialects) {
        for (uint32_t code = 0; code < 256; ++code) {
            const auto c = static_cast<uint8_t>(code);
            const float expected = expected_fp8(code, dialect);
            ASSERT_TRUE(same_float_or_both_nan(expected, decode_fp8(c, dialect)))
                << "dialect " << static_cast<int>(dialect) << " code " << code;
            ASSERT_TRUE(same_float_or_both_nan(expected, fp8_decode_table(dialect)[code]));
        }
    }
    for (uint32_t code = 0; code < 256; ++code) {
        const auto c = static_cast<uint8_t>(code);
        ASSERT_TRUE(same_float_or_both_nan(expected_fp8(code, Fp8Format::kE4M3Ocp), decode_e4m3(c)));
        ASSERT_TRUE(same_float_or_both_nan(expected_fp8(code, Fp8Format::kE4M3Fnuz), decode_e4m3_fnuz(c)));
        ASSERT_TRUE(same_float_or_both_nan(expected_fp8(code, Fp8Format::kE5M2Ocp), decode_e5m2(c)));
        ASSERT_TRUE(same_float_or_both_nan(expected_fp8(code, Fp8Format::kE5M2Fnuz), decode_e5m2_fnuz(c)));
    }
}

TEST(FloatFormatsDecode, Fp8LandmarkValues) {
    EXPECT_EQ(decode_e4m3(0x7E), 448.0f);
    EXPECT_EQ(decode_e4m3(0xFE), -448.0f);
    EXPECT_EQ(decode_e4m3(0x01), std::ldexp(1.0f, -9));
    EXPECT_EQ(decode_e4m3(0x08), std::ldexp(1.0f, -6));
    EXPECT_EQ(decode_e4m3(0x38), 1.0f);
    EXPECT_TRUE(std::signbit(decode_e4m3(0x80)));
    EXPECT_EQ(decode_e4m3_fnuz(0x7F), 240.0f);
    EXPECT_EQ(decode_e4m3_fnuz(0xFF), -240.0f);
    EXPECT_EQ(decode_e4m3_fnuz(0x01), std::ldexp(1.0f, -10));
    EXPECT_EQ(decode_e4m3_fnuz(0x40), 1.0f);
    EXPECT_EQ(decode_e5m2(0x7B), 57344.0f);
    EXPECT_EQ(decode_e5m2(0x7C), kInf);
    EXPECT_EQ(decode_e5m2(0x01), std::ldexp(1.0f, -16));
    EXPECT_EQ(decode_e5m2_fnuz(0x7F), 57344.0f);
    EXPECT_EQ(decode_e5m2_fnuz(0x01), std::ldexp(1.0f, -17));
    for (Fp8Format dialect : kDialects) {
        float largest = 0.0f;
        for (uint32_t code = 0; code < 256; ++code) {
            const float v = decode_fp8(static_cast<uint8_t>(code), dialect);
            if (std::isfinite(v)) largest = std::max(largest, v);
        }
        EXPECT_EQ(fp8_max(dialect), largest);
    }
}

TEST(FloatFormatsDecode, E2M1EveryCode) {
    // The e2m1 grid as written in model-spec 4.3 (independent of any formula).
    const std::array<float, 8> magnitudes{0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
    for (uint32_t code = 0; code < 16; ++code) {
        const float expected = (code & 8) ? -magnitudes[code & 7] : magnitudes[code & 7];
        EXPECT_TRUE(same_float_or_both_nan(expected, decode_e2m1(static_cast<uint8_t>(code)))) << code;
        // Only the low 4 bits matter.
        EXPECT_TRUE(same_float_or_both_nan(expected, decode_e2m1(static_cast<uint8_t>(code | 0xF0)))) << code;
    }
}

TEST(FloatFormatsDecode, E2M1Packing) {
    const uint8_t packed[2] = {pack_e2m1(0x3, 0xE), pack_e2m1(0x7, 0x1)};
    EXPECT_EQ(packed[0], 0xE3);
    EXPECT_EQ(e2m1_code_at(packed, 0), 0x3);  // even element in the low nibble
    EXPECT_EQ(e2m1_code_at(packed, 1), 0xE);
    EXPECT_EQ(e2m1_code_at(packed, 2), 0x7);
    EXPECT_EQ(e2m1_code_at(packed, 3), 0x1);
}

TEST(FloatFormatsDecode, Ue8m0EveryCode) {
    for (uint32_t code = 0; code < 255; ++code) {
        const auto expected = static_cast<float>(std::ldexp(1.0, static_cast<int>(code) - 127));
        ASSERT_EQ(decode_ue8m0(static_cast<uint8_t>(code)), expected) << code;
        ASSERT_GT(decode_ue8m0(static_cast<uint8_t>(code)), 0.0f) << "UE8M0 has no zero";
    }
    EXPECT_TRUE(std::isnan(decode_ue8m0(0xFF)));
    EXPECT_EQ(decode_ue8m0(127), 1.0f);
}

TEST(FloatFormatsConvert, OcpToFnuzPreservesValuesAndSaturates) {
    int preserved = 0;
    int saturated = 0;
    for (uint32_t code = 0; code < 256; ++code) {
        const auto c = static_cast<uint8_t>(code);
        const uint8_t fnuz = e4m3_ocp_to_fnuz(c);
        const float fnuz_value = expected_fp8(fnuz, Fp8Format::kE4M3Fnuz);
        const float ocp_value = expected_fp8(code, Fp8Format::kE4M3Ocp);
        if (std::isnan(ocp_value)) {
            EXPECT_EQ(fnuz, 0x80) << "OCP NaN " << code << " must become the FNUZ NaN";
        } else if (code == 0x80) {
            EXPECT_EQ(fnuz, 0x00) << "-0 must become +0";
        } else if (std::fabs(ocp_value) <= 240.0f) {
            EXPECT_EQ(fnuz_value, ocp_value) << "code " << code;
            ++preserved;
        } else {
            EXPECT_EQ(fnuz, (code & 0x80) ? 0xFF : 0x7F) << "code " << code << " value " << ocp_value;
            EXPECT_EQ(fnuz_value, ocp_value > 0 ? 240.0f : -240.0f);
            ++saturated;
        }
    }
    // 0x00..0x77 and 0x81..0xF7 are preserved; 0x78..0x7E and 0xF8..0xFE (|v| 256..448) saturate.
    EXPECT_EQ(preserved, 0x78 + 0x77);
    EXPECT_EQ(saturated, 14);

    std::array<uint8_t, 256> all{};
    std::array<uint8_t, 256> converted{};
    for (uint32_t code = 0; code < 256; ++code) all[code] = static_cast<uint8_t>(code);
    e4m3_ocp_to_fnuz(all.data(), converted.data(), all.size());
    for (uint32_t code = 0; code < 256; ++code) EXPECT_EQ(converted[code], e4m3_ocp_to_fnuz(all[code]));
}

// The dialect trap of design.md principle 3: the same byte read as FNUZ is exactly half its OCP value. Exceptions
// (e4m3): 0x00 (zero in both), 0x80 (OCP -0, FNUZ NaN), 0x7F/0xFF (OCP NaN, FNUZ +-240). For e5m2 also the OCP
// inf/NaN codes 0x7C..0x7F / 0xFC..0xFF, which are finite in FNUZ.
TEST(FloatFormatsConvert, FnuzReadingIsHalfTheOcpValue) {
    struct Pair {
        Fp8Format ocp;
        Fp8Format fnuz;
        int expected_count;
    };
    for (const Pair& pair : {Pair{Fp8Format::kE4M3Ocp, Fp8Format::kE4M3Fnuz, 256 - 4},
                             Pair{Fp8Format::kE5M2Ocp, Fp8Format::kE5M2Fnuz, 256 - 2 - 8}}) {
        int count = 0;
        for (uint32_t code = 0; code < 256; ++code) {
            const auto c = static_cast<uint8_t>(code);
            const float as_ocp = decode_fp8(c, pair.ocp);
            const float as_fnuz = decode_fp8(c, pair.fnuz);
            if (!std::isfinite(as_ocp) || as_ocp == 0.0f || !std::isfinite(as_fnuz)) continue;
            EXPECT_EQ(as_fnuz, as_ocp / 2) << "code " << code;
            ++count;
        }
        EXPECT_EQ(count, pair.expected_count);
    }
    // The exceptions themselves.
    EXPECT_EQ(decode_e4m3(0x00), 0.0f);
    EXPECT_EQ(decode_e4m3_fnuz(0x00), 0.0f);
    EXPECT_TRUE(std::isnan(decode_e4m3_fnuz(0x80)));
    EXPECT_TRUE(std::isnan(decode_e4m3(0x7F)));
    EXPECT_EQ(decode_e4m3_fnuz(0x7F), 240.0f);
    EXPECT_EQ(decode_e5m2(0x7C), kInf);
    EXPECT_EQ(decode_e5m2_fnuz(0x7C), 32768.0f);
}

}  // namespace
}  // namespace dsv4
