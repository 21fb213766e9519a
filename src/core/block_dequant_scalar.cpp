// Scalar kernels: the reference the vector kernels are tested against, and the fallback on any CPU.
#include <array>
#include <cstring>

#include "core/float_formats.h"
#include "core/simd_kernels.h"

namespace dsv4::simd {
namespace {

const std::array<float, 256>& ue8m0_values() {
    static const std::array<float, 256> table = [] {
        std::array<float, 256> t{};
        for (uint32_t e = 0; e < 256; ++e) t[e] = decode_ue8m0(static_cast<uint8_t>(e));
        return t;
    }();
    return table;
}

// bf16 weights are read in place from the memory-mapped checkpoint, where a tensor may start at an odd offset: the
// element loads must not assume 2-byte alignment (the vector kernels use unaligned loads too).
uint16_t load_bf16_bits(const uint16_t* p) {
    uint16_t bits;
    std::memcpy(&bits, p, sizeof bits);
    return bits;
}

void bf16_to_f32_scalar(const uint16_t* in, float* out, size_t n) {
    for (size_t i = 0; i < n; ++i) out[i] = decode_bf16(load_bf16_bits(in + i));
}

void f32_to_bf16_scalar(const float* in, uint16_t* out, size_t n) {
    for (size_t i = 0; i < n; ++i) out[i] = encode_bf16(in[i]);
}

void fp8_to_f32_scalar(const uint8_t* in, float* out, size_t n, Fp8Format dialect) {
    const std::array<float, 256>& table = fp8_decode_table(dialect);
    for (size_t i = 0; i < n; ++i) out[i] = table[in[i]];
}

float dot_f32_scalar(const float* a, const float* b, int64_t k) {
    float sum = 0.0f;
    for (int64_t j = 0; j < k; ++j) sum += a[j] * b[j];
    return sum;
}

float dot_bf16_scalar(const uint16_t* w, const float* x, int64_t k) {
    float sum = 0.0f;
    for (int64_t j = 0; j < k; ++j) sum += decode_bf16(load_bf16_bits(w + j)) * x[j];
    return sum;
}

float dot_fp8_scalar(const uint8_t* codes, const uint8_t* scales, int block_k, Fp8Dialect dialect, const float* x,
                     int64_t k) {
    return scalar_dot_fp8_range(codes, scales, block_k, dialect, x, 0, k);
}

float dot_fp4_scalar(const uint8_t* packed, const uint8_t* scales, int block_k, const float* x, int64_t k) {
    return scalar_dot_fp4_range(packed, scales, block_k, x, 0, k);
}

double dot_f64_scalar(const float* a, const float* b, int64_t k) {
    // Four independent sums keep the adds in flight; the order does not change the rounded result (core/dot_f64.h).
    double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0;
    int64_t i = 0;
    for (; i + 4 <= k; i += 4) {
        s0 += static_cast<double>(a[i]) * b[i];
        s1 += static_cast<double>(a[i + 1]) * b[i + 1];
        s2 += static_cast<double>(a[i + 2]) * b[i + 2];
        s3 += static_cast<double>(a[i + 3]) * b[i + 3];
    }
    for (; i < k; ++i) s0 += static_cast<double>(a[i]) * b[i];
    return (s0 + s1) + (s2 + s3);
}

void dot_f32_multi_add_scalar(const float* w, const float* x, int64_t x_stride, int64_t k, int n_vec, float* out) {
    for (int v = 0; v < n_vec; ++v) out[v] += dot_f32_scalar(w, x + v * x_stride, k);
}

}  // namespace

const float* ue8m0_table() {
    return ue8m0_values().data();
}

float scalar_dot_fp8_range(const uint8_t* codes, const uint8_t* scales, int block_k, Fp8Dialect dialect, const float* x,
                           int64_t begin, int64_t end) {
    const std::array<float, 256>& e4m3 = fp8_decode_table(e4m3_format(dialect));
    const float* scale_values = ue8m0_table();
    float sum = 0.0f;
    for (int64_t j = begin; j < end; ++j) sum += e4m3[codes[j]] * scale_values[scales[j / block_k]] * x[j];
    return sum;
}

float scalar_dot_fp4_range(const uint8_t* packed, const uint8_t* scales, int block_k, const float* x, int64_t begin,
                           int64_t end) {
    const float* scale_values = ue8m0_table();
    float sum = 0.0f;
    for (int64_t j = begin; j < end; ++j) {
        sum += decode_e2m1(e2m1_code_at(packed, j)) * scale_values[scales[j / block_k]] * x[j];
    }
    return sum;
}

void scalar_dequant_fp8_range(const uint8_t* codes, const uint8_t* scales, int block_k, Fp8Dialect dialect,
                              int64_t begin, int64_t end, float* out) {
    const std::array<float, 256>& e4m3 = fp8_decode_table(e4m3_format(dialect));
    const float* scale_values = ue8m0_table();
    for (int64_t j = begin; j < end; ++j) out[j - begin] = e4m3[codes[j]] * scale_values[scales[j / block_k]];
}

void scalar_dequant_fp4_range(const uint8_t* packed, const uint8_t* scales, int block_k, int64_t begin, int64_t end,
                              float* out) {
    const float* scale_values = ue8m0_table();
    for (int64_t j = begin; j < end; ++j) {
        out[j - begin] = decode_e2m1(e2m1_code_at(packed, j)) * scale_values[scales[j / block_k]];
    }
}

const RowKernels& scalar_kernels() {
    static const RowKernels kernels{
        bf16_to_f32_scalar,
        f32_to_bf16_scalar,
        fp8_to_f32_scalar,
        scalar_dequant_fp8_range,
        scalar_dequant_fp4_range,
        dot_f32_scalar,
        dot_bf16_scalar,
        dot_fp8_scalar,
        dot_fp4_scalar,
        dot_f32_multi_add_scalar,
        nullptr,
        nullptr,
        nullptr,
        dot_f64_scalar,
    };
    return kernels;
}

}  // namespace dsv4::simd
