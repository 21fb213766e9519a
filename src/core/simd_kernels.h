// Internal to core/block_dequant: the per-ISA kernel tables behind the public functions of block_dequant.h.
// Arguments reaching a kernel are already validated (non-negative sizes, block_k >= 1, even FP4 ranges).
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <limits>

#include "core/float_formats.h"

namespace dsv4::simd {

struct RowKernels {
    void (*bf16_to_f32)(const uint16_t* in, float* out, size_t n);
    void (*f32_to_bf16)(const float* in, uint16_t* out, size_t n);
    void (*fp8_to_f32)(const uint8_t* in, float* out, size_t n, Fp8Format dialect);
    // Elements [begin, end) of a block-scaled row (element j uses scales[j / block_k]); out[j - begin].
    // For FP4, begin and end are even.
    // FP8 rows are e4m3 in `dialect` (core/fp8_dialect.h).
    void (*dequant_fp8_range)(const uint8_t* codes, const uint8_t* scales, int block_k, Fp8Dialect dialect,
                              int64_t begin, int64_t end, float* out);
    void (*dequant_fp4_range)(const uint8_t* packed, const uint8_t* scales, int block_k, int64_t begin, int64_t end,
                              float* out);
    float (*dot_f32)(const float* a, const float* b, int64_t k);
    float (*dot_bf16)(const uint16_t* w, const float* x, int64_t k);
    float (*dot_fp8)(const uint8_t* codes, const uint8_t* scales, int block_k, Fp8Dialect dialect, const float* x,
                     int64_t k);
    float (*dot_fp4)(const uint8_t* packed, const uint8_t* scales, int block_k, const float* x, int64_t k);
    // out[v] += dot(w, x + v * x_stride) for v < n_vec.
    void (*dot_f32_multi_add)(const float* w, const float* x, int64_t x_stride, int64_t k, int n_vec, float* out);
    // *out += dot(bf16 w, x) with exactly dot_f32_multi_add's arithmetic for one vector, the row decoded in registers
    // instead of through a buffer (bf16 -> f32 is exact): the single-vector fast path of dot_bf16_row_multi, which
    // must stay bit-identical to the batched path. Null where an ISA does not provide it.
    void (*dot_bf16_add_one)(const uint16_t* w, const float* x, int64_t k, float* out);
    // The same for elements [begin, end) of a block-scaled FP8 / FP4 row against x (x[0] pairs with element begin;
    // begin a multiple of block_k). Returns false, adding nothing, where a block needs the scalar decoder or the
    // blocks do not split into whole 16-element groups; the caller then decodes into a buffer.
    bool (*dot_fp8_add_one)(const uint8_t* codes, const uint8_t* scales, int block_k, Fp8Dialect dialect, int64_t begin,
                            int64_t end, const float* x, float* out);
    bool (*dot_fp4_add_one)(const uint8_t* packed, const uint8_t* scales, int block_k, int64_t begin, int64_t end,
                            const float* x, float* out);
    // sum_j double(a[j]) * b[j] accumulated in double (core/dot_f64.h: the order does not change the rounded float).
    double (*dot_f64)(const float* a, const float* b, int64_t k);
};

const RowKernels& scalar_kernels();
// nullptr when the build has no such kernels (non-x86 target); the caller checks CPU support separately.
const RowKernels* avx2_kernels();
const RowKernels* avx512_kernels();

#if defined(__x86_64__) || defined(__i386__)
// The AVX2 double dot product (FMA on four doubles), also the AVX-512 table's: a product of two floats is exact in
// double, so wider vectors would only change the order of the additions.
double dot_f64_avx2(const float* a, const float* b, int64_t k);
#endif

// Scalar pieces the vector kernels fall back on for tails and rare cases.
float scalar_dot_fp8_range(const uint8_t* codes, const uint8_t* scales, int block_k, Fp8Dialect dialect, const float* x,
                           int64_t begin, int64_t end);
float scalar_dot_fp4_range(const uint8_t* packed, const uint8_t* scales, int block_k, const float* x, int64_t begin,
                           int64_t end);
void scalar_dequant_fp8_range(const uint8_t* codes, const uint8_t* scales, int block_k, Fp8Dialect dialect,
                              int64_t begin, int64_t end, float* out);
void scalar_dequant_fp4_range(const uint8_t* packed, const uint8_t* scales, int block_k, int64_t begin, int64_t end,
                              float* out);

// The UE8M0 byte -> float table (2^(e-127), 0xFF -> NaN).
const float* ue8m0_table();

// End of the scale block that contains element j.
inline int64_t block_end(int64_t j, int block_k, int64_t end) {
    const int64_t boundary = (j / block_k + 1) * block_k;
    return boundary < end ? boundary : end;
}

// The vector kernels decode e4m3 through fp16 (code bits shifted into an fp16, converted by F16C), which yields the
// value times 2^-shift (shift 8 for OCP, 7 for FNUZ: e4m3_fp16_shift); they multiply by scale * 2^shift in one step.
// Returns false when that factor is not an exact float (UE8M0 bytes above 254 - shift); such blocks take the scalar
// path.
inline bool e4m3_block_factor(uint8_t scale_byte, int shift, float* factor) {
    if (scale_byte == 0xFF) {
        *factor = std::numeric_limits<float>::quiet_NaN();
        return true;
    }
    const int exponent = static_cast<int>(scale_byte) - 127 + shift;
    if (exponent > 127) return false;
    *factor = std::bit_cast<float>(static_cast<uint32_t>(exponent + 127) << 23);  // normal: exponent >= -127 + 7
    return true;
}

inline int e4m3_fp16_shift(Fp8Dialect dialect) {
    return dialect == Fp8Dialect::kFnuz ? 7 : 8;
}

// The e2m1 values of codes 0..15 (the first 8 are the magnitudes).
inline constexpr float kE2M1Values[16] = {0.0f,  0.5f,  1.0f,  1.5f,  2.0f,  3.0f,  4.0f,  6.0f,
                                          -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};

}  // namespace dsv4::simd
