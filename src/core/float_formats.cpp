#include "core/float_formats.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>

namespace dsv4 {
namespace {

// How a small float format spends its special codes.
enum class Specials : uint8_t {
    kIeee,     // exponent all ones: inf (mantissa 0) or NaN
    kOcpE4M3,  // only magnitude all ones is NaN, no inf
    kFnuz,     // only the negative-zero code is NaN, no inf, no -0
    kNone,     // e2m1: every code is a finite number
};

struct MiniFloat {
    int exp_bits;
    int man_bits;
    int bias;
    Specials specials;
    bool saturate;  // satfinite encoding (everything at or above max -> max)

    constexpr int sign_bit() const { return 1 << (exp_bits + man_bits); }
    constexpr int all_ones_exp() const { return (1 << exp_bits) - 1; }
    // Magnitude code of the largest finite value.
    constexpr int max_magnitude() const {
        switch (specials) {
            case Specials::kIeee:
                return ((all_ones_exp() - 1) << man_bits) | ((1 << man_bits) - 1);
            case Specials::kOcpE4M3:
                return (1 << (exp_bits + man_bits)) - 2;
            case Specials::kFnuz:
                return (1 << (exp_bits + man_bits)) - 1;
            case Specials::kNone:
                return (1 << (exp_bits + man_bits)) - 1;
        }
        return 0;
    }
    // Code returned for a NaN input of the given sign.
    constexpr uint32_t nan_code(bool negative) const {
        const uint32_t sign = negative ? static_cast<uint32_t>(sign_bit()) : 0u;
        switch (specials) {
            case Specials::kIeee:
                return sign | static_cast<uint32_t>((all_ones_exp() << man_bits) | (1 << (man_bits - 1)));
            case Specials::kOcpE4M3:
                return sign | static_cast<uint32_t>(sign_bit() - 1);
            case Specials::kFnuz:
                return static_cast<uint32_t>(sign_bit());
            case Specials::kNone:
                return static_cast<uint32_t>(max_magnitude());
        }
        return 0;
    }
};

constexpr MiniFloat kFp16{5, 10, 15, Specials::kIeee, false};
constexpr MiniFloat kE4M3{4, 3, 7, Specials::kOcpE4M3, true};
constexpr MiniFloat kE4M3Fnuz{4, 3, 8, Specials::kFnuz, true};
constexpr MiniFloat kE5M2{5, 2, 15, Specials::kIeee, true};
constexpr MiniFloat kE5M2Fnuz{5, 2, 16, Specials::kFnuz, true};
constexpr MiniFloat kE2M1{2, 1, 1, Specials::kNone, true};

// 2^e for the exponent range of these formats, usable in constant expressions (exact: powers of two).
constexpr float pow2(int e) {
    float result = 1.0f;
    for (; e > 0; --e) result *= 2.0f;
    for (; e < 0; ++e) result *= 0.5f;
    return result;
}

constexpr float decode_mini(uint32_t code, const MiniFloat& f) {
    const uint32_t sign_bit = static_cast<uint32_t>(f.sign_bit());
    const uint32_t magnitude = code & (sign_bit - 1);
    const bool negative = (code & sign_bit) != 0;
    const int field = static_cast<int>(magnitude >> f.man_bits);
    const int mantissa = static_cast<int>(magnitude & ((1u << f.man_bits) - 1));
    switch (f.specials) {
        case Specials::kIeee:
            if (field == f.all_ones_exp()) {
                if (mantissa != 0) return std::numeric_limits<float>::quiet_NaN();
                return negative ? -std::numeric_limits<float>::infinity() : std::numeric_limits<float>::infinity();
            }
            break;
        case Specials::kOcpE4M3:
            if (magnitude == sign_bit - 1) return std::numeric_limits<float>::quiet_NaN();
            break;
        case Specials::kFnuz:
            if (code == sign_bit) return std::numeric_limits<float>::quiet_NaN();
            break;
        case Specials::kNone:
            break;
    }
    const float value = field == 0
                            ? static_cast<float>(mantissa) * pow2(1 - f.bias - f.man_bits)
                            : static_cast<float>((1 << f.man_bits) | mantissa) * pow2(field - f.bias - f.man_bits);
    return negative ? -value : value;
}

// Rounds a non-negative float holding a value < 2^24 to the nearest integer, ties to even, independent of the
// floating-point environment's rounding mode.
float round_half_even(float v) {
    const float below = std::floor(v);
    const float diff = v - below;  // exact: v and below share an exponent range small enough
    if (diff > 0.5f) return below + 1.0f;
    if (diff < 0.5f) return below;
    return std::fmod(below, 2.0f) == 0.0f ? below : below + 1.0f;
}

uint32_t encode_mini(float x, const MiniFloat& f) {
    const bool negative = std::signbit(x);
    if (std::isnan(x)) return f.nan_code(negative);
    const uint32_t sign = negative ? static_cast<uint32_t>(f.sign_bit()) : 0u;
    const float magnitude = std::fabs(x);
    const uint32_t inf_code = static_cast<uint32_t>(f.all_ones_exp() << f.man_bits);
    if (f.saturate) {
        if (magnitude >= decode_mini(static_cast<uint32_t>(f.max_magnitude()), f)) {
            return sign | static_cast<uint32_t>(f.max_magnitude());
        }
    } else if (std::isinf(magnitude)) {
        return sign | inf_code;
    }
    uint32_t result = 0;
    if (magnitude != 0.0f) {
        int exponent = 0;
        std::frexp(magnitude, &exponent);
        exponent = std::max(exponent - 1, 1 - f.bias);  // subnormals share the quantum of the smallest normal
        const int quantum_exp = exponent - f.man_bits;
        auto rounded = static_cast<uint32_t>(round_half_even(std::ldexp(magnitude, -quantum_exp)));
        if (rounded == (2u << f.man_bits)) {  // carried into the next binade
            rounded >>= 1;
            ++exponent;
        }
        if (rounded >= (1u << f.man_bits)) {
            const int field = exponent + f.bias;
            if (field >= f.all_ones_exp() && f.specials == Specials::kIeee) return sign | inf_code;  // non-saturating
            result = (static_cast<uint32_t>(field) << f.man_bits) | (rounded - (1u << f.man_bits));
        } else {
            result = rounded;  // subnormal
        }
    }
    if (result == 0 && f.specials == Specials::kFnuz) return 0;  // no -0 in FNUZ
    return sign | result;
}

constexpr std::array<float, 256> make_fp8_table(const MiniFloat& f) {
    std::array<float, 256> table{};
    for (uint32_t code = 0; code < 256; ++code) table[code] = decode_mini(code, f);
    return table;
}

const MiniFloat& mini_format(Fp8Format format) {
    switch (format) {
        case Fp8Format::kE4M3Ocp:
            return kE4M3;
        case Fp8Format::kE4M3Fnuz:
            return kE4M3Fnuz;
        case Fp8Format::kE5M2Ocp:
            return kE5M2;
        case Fp8Format::kE5M2Fnuz:
            return kE5M2Fnuz;
    }
    return kE4M3;
}

// Constant-initialised, so other translation units may use them during their own static initialisation.
constexpr std::array<float, 256> kE4M3Table = make_fp8_table(kE4M3);
constexpr std::array<float, 256> kE4M3FnuzTable = make_fp8_table(kE4M3Fnuz);
constexpr std::array<float, 256> kE5M2Table = make_fp8_table(kE5M2);
constexpr std::array<float, 256> kE5M2FnuzTable = make_fp8_table(kE5M2Fnuz);

// OCP e4m3 code -> FNUZ e4m3 code of the same value (saturating), built once from the exact codecs.
const std::array<uint8_t, 256>& ocp_to_fnuz_table() {
    static const std::array<uint8_t, 256> table = [] {
        std::array<uint8_t, 256> t{};
        for (uint32_t code = 0; code < 256; ++code) {
            t[code] = static_cast<uint8_t>(encode_mini(decode_mini(code, kE4M3), kE4M3Fnuz));
        }
        return t;
    }();
    return table;
}

}  // namespace

float decode_bf16(uint16_t bits) {
    return std::bit_cast<float>(static_cast<uint32_t>(bits) << 16);
}

uint16_t encode_bf16(float value) {
    const uint32_t bits = std::bit_cast<uint32_t>(value);
    if (std::isnan(value)) return static_cast<uint16_t>((bits >> 16) | 0x0040u);
    const uint32_t rounding_bias = 0x7FFFu + ((bits >> 16) & 1u);
    return static_cast<uint16_t>((bits + rounding_bias) >> 16);
}

float round_to_bf16(float value) {
    return decode_bf16(encode_bf16(value));
}

float decode_fp16(uint16_t bits) {
    return decode_mini(bits, kFp16);
}
uint16_t encode_fp16(float value) {
    return static_cast<uint16_t>(encode_mini(value, kFp16));
}

float decode_e4m3(uint8_t code) {
    return kE4M3Table[code];
}
uint8_t encode_e4m3(float value) {
    return static_cast<uint8_t>(encode_mini(value, kE4M3));
}
float decode_e4m3_fnuz(uint8_t code) {
    return kE4M3FnuzTable[code];
}
uint8_t encode_e4m3_fnuz(float value) {
    return static_cast<uint8_t>(encode_mini(value, kE4M3Fnuz));
}
float decode_e5m2(uint8_t code) {
    return kE5M2Table[code];
}
uint8_t encode_e5m2(float value) {
    return static_cast<uint8_t>(encode_mini(value, kE5M2));
}
float decode_e5m2_fnuz(uint8_t code) {
    return kE5M2FnuzTable[code];
}
uint8_t encode_e5m2_fnuz(float value) {
    return static_cast<uint8_t>(encode_mini(value, kE5M2Fnuz));
}

float decode_fp8(uint8_t code, Fp8Format format) {
    return fp8_decode_table(format)[code];
}
uint8_t encode_fp8(float value, Fp8Format format) {
    return static_cast<uint8_t>(encode_mini(value, mini_format(format)));
}

const std::array<float, 256>& fp8_decode_table(Fp8Format format) {
    switch (format) {
        case Fp8Format::kE4M3Ocp:
            return kE4M3Table;
        case Fp8Format::kE4M3Fnuz:
            return kE4M3FnuzTable;
        case Fp8Format::kE5M2Ocp:
            return kE5M2Table;
        case Fp8Format::kE5M2Fnuz:
            return kE5M2FnuzTable;
    }
    return kE4M3Table;
}

float fp8_max(Fp8Format format) {
    const MiniFloat& f = mini_format(format);
    return decode_mini(static_cast<uint32_t>(f.max_magnitude()), f);
}

Fp8Format e4m3_format(Fp8Dialect dialect) {
    return dialect == Fp8Dialect::kFnuz ? Fp8Format::kE4M3Fnuz : Fp8Format::kE4M3Ocp;
}

uint8_t e4m3_ocp_to_fnuz(uint8_t ocp_code) {
    return ocp_to_fnuz_table()[ocp_code];
}

void e4m3_ocp_to_fnuz(const uint8_t* ocp_codes, uint8_t* fnuz_codes, size_t n) {
    const std::array<uint8_t, 256>& table = ocp_to_fnuz_table();
    for (size_t i = 0; i < n; ++i) fnuz_codes[i] = table[ocp_codes[i]];
}

float decode_ue8m0(uint8_t code) {
    if (code == 0xFF) return std::numeric_limits<float>::quiet_NaN();
    return std::ldexp(1.0f, static_cast<int>(code) - 127);
}

int ceil_log2_clamped(float value) {
    const uint32_t bits = std::bit_cast<uint32_t>(value) & 0x7FFFFFFFu;
    const int field = static_cast<int>(bits >> 23);
    const uint32_t mantissa = bits & 0x7FFFFFu;
    int result = 0;
    if (field == 0xFF) {
        result = 127;  // inf (and NaN)
    } else if (field == 0) {
        // Zero or subnormal: value = mantissa * 2^-149.
        if (mantissa == 0) return -127;
        result = -149 + static_cast<int>(std::bit_width(mantissa - 1));  // ceil(log2(mantissa)) for mantissa >= 1
    } else {
        result = field - 127 + (mantissa != 0 ? 1 : 0);
    }
    return std::clamp(result, -127, 127);
}

uint8_t encode_ue8m0(float value) {
    if (std::isnan(value)) return 0xFF;
    return static_cast<uint8_t>(ceil_log2_clamped(value) + 127);
}

float decode_e2m1(uint8_t code) {
    return decode_mini(code & 0x0Fu, kE2M1);
}
uint8_t encode_e2m1(float value) {
    return static_cast<uint8_t>(encode_mini(value, kE2M1));
}

}  // namespace dsv4
