// Bulk converters and fused dot products for the CPU backend: bf16 / FP8 / block-scaled FP8 and FP4 weight rows.
//
// Every function has a scalar reference and vectorised versions (AVX2+F16C+FMA, AVX-512F/BW/VL) chosen at run time
// from what the CPU supports (no -march flags: the binary runs on any x86-64). The vector versions compute the same
// values: converters and dequantisers are bit-identical to the scalar decoders of core/float_formats.h; dot products
// differ only in the order of the fp32 additions.
//
// Block-scaled rows (model-spec 4.3): element j of a row is decode(code[j]) * 2^(scales[j / block_k] - 127), the
// scales being UE8M0 bytes (0xFF = NaN propagates). FP8 rows are e4m3 in the given dialect (the checkpoint's
// F8_E4M3 as held in memory: OCP, or FNUZ after the load-time conversion; block_k 128, the caller passes the scale
// row of the weight row's 128-row block); FP4 rows are packed e2m1, two codes per byte,
// low nibble = even element (block_k 32). Any block_k >= 1 works; any k works (FP4: k even).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "core/float_formats.h"

namespace dsv4 {

// Instruction sets the kernels are written for.
enum class SimdIsa : uint8_t {
    kScalar,
    kAvx2,    // AVX2 + FMA + F16C
    kAvx512,  // AVX-512 F + BW + VL (plus AVX2 + FMA + F16C)
};

std::string_view simd_isa_name(SimdIsa isa);
// Whether this CPU (and build) can run the kernels of `isa`.
bool simd_isa_supported(SimdIsa isa);
// The best supported ISA; what the kernels use unless set_simd_isa() was called.
SimdIsa detected_simd_isa();
SimdIsa active_simd_isa();
// Forces the kernels of `isa` (tests and benchmarks compare the paths); throws dsv4::Error if unsupported.
void set_simd_isa(SimdIsa isa);

// --- Element-wise conversion -------------------------------------------------------------------------------------
void bf16_to_f32(const uint16_t* in, float* out, size_t n);
void f32_to_bf16(const float* in, uint16_t* out, size_t n);  // RNE; NaN stays NaN
void fp8_to_f32(const uint8_t* in, float* out, size_t n, Fp8Format dialect);

// --- Block-scaled rows --------------------------------------------------------------------------------------------
// out[j] = e4m3(codes[j]) * 2^(ue8m0_scales[j / block_k] - 127), j < k, e4m3 read in `dialect`.
void dequant_fp8_row(const uint8_t* codes, const uint8_t* ue8m0_scales, int64_t k, int block_k, Fp8Dialect dialect,
                     float* out);
// out[j] = e2m1(nibble j of packed) * 2^(ue8m0_scales[j / block_k] - 127), j < k; k even (k / 2 packed bytes).
void dequant_fp4_row(const uint8_t* packed, const uint8_t* ue8m0_scales, int64_t k, int block_k, float* out);

// --- Fused dot products (fp32 accumulation) -------------------------------------------------------------------------
float dot_f32(const float* a, const float* b, int64_t k);
float dot_bf16_row(const uint16_t* w, const float* x, int64_t k);
float dot_fp8_row(const uint8_t* codes, const uint8_t* ue8m0_scales, int block_k, Fp8Dialect dialect, const float* x,
                  int64_t k);
float dot_fp4_row(const uint8_t* packed, const uint8_t* ue8m0_scales, int block_k, const float* x, int64_t k);

// One weight row against n_vec activation vectors x_v = x + v * x_stride (a row-major [n_vec, >= k] matrix when
// x_stride >= k): out[v] = dot(row, x_v). The row is decoded once for all vectors. Batch invariant: out[v] is
// bit-identical whatever n_vec is and wherever x_v sits in the batch (tests/unit/core/batch_invariance_test.cpp).
void dot_f32_multi(const float* w, const float* x, int64_t x_stride, int64_t k, int n_vec, float* out);
void dot_bf16_row_multi(const uint16_t* w, const float* x, int64_t x_stride, int64_t k, int n_vec, float* out);
void dot_fp8_row_multi(const uint8_t* codes, const uint8_t* ue8m0_scales, int block_k, Fp8Dialect dialect,
                       const float* x, int64_t x_stride, int64_t k, int n_vec, float* out);
void dot_fp4_row_multi(const uint8_t* packed, const uint8_t* ue8m0_scales, int block_k, const float* x,
                       int64_t x_stride, int64_t k, int n_vec, float* out);

}  // namespace dsv4
