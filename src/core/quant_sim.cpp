#include "core/quant_sim.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>

#include "core/error.h"
#include "core/float_formats.h"

namespace dsv4 {
namespace {

void check_blocks(const char* what, int64_t n, int block) {
    DSV4_CHECK(n >= 0, "{}: negative length {}", what, n);
    DSV4_CHECK(block >= 1, "{}: block size must be >= 1, got {}", what, block);
}

// max |x| over [begin, end), NaN ignored.
float block_amax(const float* x, int64_t begin, int64_t end) {
    float amax = 0.0f;
    for (int64_t j = begin; j < end; ++j) {
        const float a = std::fabs(x[j]);
        if (a > amax) amax = a;
    }
    return amax;
}

// 2^e as a float for e in [-127, 127] (2^-127 is subnormal, still exact).
float exp2_int(int e) {
    return std::ldexp(1.0f, e);
}

// One block's scale exponent for a format.
struct BlockFormat {
    float qmax;
    float amax_floor;
};
constexpr BlockFormat kFp4Block{kE2M1Max, kFp4AmaxFloor};
BlockFormat fp8_block(Fp8Quant quant) {
    return {quant.qmax, kFp8AmaxFloor};
}

int block_exponent(const float* x, int64_t begin, int64_t end, const BlockFormat& format) {
    return pow2_scale_exponent(block_amax(x, begin, end), format.amax_floor, format.qmax);
}

// Scaled value fed to the format's encoder: clamp(x / s, +-qmax) (x / s computed as x * 2^-e; NaN passes through).
float scaled_clamped(float value, float inverse_scale, float qmax) {
    return std::clamp(value * inverse_scale, -qmax, qmax);
}

// Quantise-dequantise one format over all blocks; round_bf16 applies the final bf16 rounding.
template <typename RoundToGrid>
void sim_blocks(float* x, int64_t n, int block, const BlockFormat& format, bool round_bf16, RoundToGrid round) {
    for (int64_t begin = 0; begin < n; begin += block) {
        const int64_t end = std::min(n, begin + block);
        const int e = block_exponent(x, begin, end, format);
        const float scale = exp2_int(e);
        const float inverse_scale = exp2_int(-e);
        for (int64_t j = begin; j < end; ++j) {
            const float q = round(scaled_clamped(x[j], inverse_scale, format.qmax)) * scale;
            x[j] = round_bf16 ? round_to_bf16(q) : q;
        }
    }
}

// Rounds to the e4m3 grid of a dialect (the caller has clamped to the site's qmax, which the dialect represents).
struct E4m3Rounder {
    Fp8Dialect dialect;
    float operator()(float v) const { return decode_e4m3(encode_e4m3(v, dialect), dialect); }
};

void check_quant(const char* what, Fp8Quant quant) {
    const float format_max = quant.dialect == Fp8Dialect::kFnuz ? kE4M3FnuzMax : kE4M3Max;
    DSV4_CHECK(quant.qmax > 0.0f && quant.qmax <= format_max, "{}: FP8 qmax {} is outside (0, {}] of {}", what,
               quant.qmax, format_max, fp8_dialect_label(quant.dialect));
}

float round_to_e2m1(float v) {
    if (std::isnan(v)) return v;  // e2m1 has no NaN; the simulation keeps it visible
    return decode_e2m1(encode_e2m1(v));
}

void check_hadamard_length(int n) {
    DSV4_CHECK(n >= 1 && std::has_single_bit(static_cast<unsigned>(n)),
               "hadamard: length must be a power of two, got {}", n);
}

}  // namespace

int pow2_scale_exponent(float amax, float amax_floor, float qmax) {
    const float floored = std::max(amax, amax_floor);  // NaN amax stays NaN -> e = 127
    const float ratio = floored * (1.0f / qmax);
    return ceil_log2_clamped(ratio);
}

void act_quant_fp8(const float* x, int64_t n, int block, Fp8Quant quant, uint8_t* codes, uint8_t* ue8m0_scales) {
    check_blocks("act_quant_fp8", n, block);
    check_quant("act_quant_fp8", quant);
    for (int64_t begin = 0, b = 0; begin < n; begin += block, ++b) {
        const int64_t end = std::min(n, begin + block);
        const int e = block_exponent(x, begin, end, fp8_block(quant));
        const float inverse_scale = exp2_int(-e);
        for (int64_t j = begin; j < end; ++j) {
            codes[j] = encode_e4m3(scaled_clamped(x[j], inverse_scale, quant.qmax), quant.dialect);
        }
        ue8m0_scales[b] = static_cast<uint8_t>(e + 127);
    }
}

void act_quant_fp8_sim(float* x, int64_t n, int block, Fp8Quant quant) {
    check_blocks("act_quant_fp8_sim", n, block);
    check_quant("act_quant_fp8_sim", quant);
    sim_blocks(x, n, block, fp8_block(quant), false, E4m3Rounder{quant.dialect});
}

void fp8_sim(float* x, int64_t n, int block, Fp8Quant quant) {
    check_blocks("fp8_sim", n, block);
    check_quant("fp8_sim", quant);
    sim_blocks(x, n, block, fp8_block(quant), true, E4m3Rounder{quant.dialect});
}

void fp8_sim_bf16_input(float* x, int64_t n, int block, Fp8Quant quant) {
    check_blocks("fp8_sim_bf16_input", n, block);
    check_quant("fp8_sim_bf16_input", quant);
    for (int64_t j = 0; j < n; ++j) x[j] = round_to_bf16(x[j]);
    sim_blocks(x, n, block, fp8_block(quant), true, E4m3Rounder{quant.dialect});
}

void act_quant_fp4(const float* x, int64_t n, int block, uint8_t* packed, uint8_t* ue8m0_scales) {
    check_blocks("act_quant_fp4", n, block);
    DSV4_CHECK(n % 2 == 0, "act_quant_fp4: FP4 packs two codes per byte, length must be even, got {}", n);
    for (int64_t j = 0; j < n / 2; ++j) packed[j] = 0;
    for (int64_t begin = 0, b = 0; begin < n; begin += block, ++b) {
        const int64_t end = std::min(n, begin + block);
        const int e = block_exponent(x, begin, end, kFp4Block);
        const float inverse_scale = exp2_int(-e);
        for (int64_t j = begin; j < end; ++j) {
            const uint8_t code = encode_e2m1(scaled_clamped(x[j], inverse_scale, kE2M1Max));
            packed[j / 2] = static_cast<uint8_t>(packed[j / 2] | (j % 2 == 0 ? code : code << 4));
        }
        ue8m0_scales[b] = static_cast<uint8_t>(e + 127);
    }
}

void fp4_sim(float* x, int64_t n, int block) {
    check_blocks("fp4_sim", n, block);
    sim_blocks(x, n, block, kFp4Block, true, round_to_e2m1);
}

void hadamard_inplace(float* x, int n) {
    check_hadamard_length(n);
    for (int half = 1; half < n; half *= 2) {
        for (int start = 0; start < n; start += 2 * half) {
            for (int j = start; j < start + half; ++j) {
                const float a = x[j];
                const float b = x[j + half];
                x[j] = a + b;
                x[j + half] = a - b;
            }
        }
    }
    const auto scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(n)));
    for (int j = 0; j < n; ++j) x[j] *= scale;
}

void hadamard_rows_inplace(float* x, int64_t rows, int n) {
    DSV4_CHECK(rows >= 0, "hadamard_rows_inplace: negative row count {}", rows);
    check_hadamard_length(n);
    for (int64_t r = 0; r < rows; ++r) hadamard_inplace(x + r * n, n);
}

}  // namespace dsv4
