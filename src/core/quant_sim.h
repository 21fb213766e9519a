// The roundings of the `reference` numerics mode (model-spec 2.1, 4.4, 5.2, 5.3): block-wise FP8 / FP4 quantisation
// with power-of-two (UE8M0) scales, as codes or simulated in place (quantise then dequantise), and the Hadamard
// rotation of the indexer.
//
// Block quantisation, per block of `block` consecutive elements (the last block may be shorter):
//   amax = max |x| over the block (NaN elements ignored), floored at `amax_floor`;
//   e    = ceil(log2(amax / qmax)), computed exactly from the fp32 bits of fp32(amax * fp32(1/qmax)) (exponent,
//          +1 if any mantissa bit is set), clamped to [-127, 127]  -- DeepSeek's fast_round_scale;
//   s    = 2^e;  code = format(clamp(x / s, -qmax, qmax)) with round-to-nearest-even;  dequantised = code * s.
//   FP8: qmax and dialect from an Fp8Quant (core/fp8_dialect.h: 448 OCP e4m3 as DeepSeek's kernels; FNUZ e4m3 with
//        the site's FNUZ max), floor 1e-4.  FP4: qmax 6 (e2m1), floor 6 * 2^-126.
// The stored scale byte is e + 127 (UE8M0); dequant_fp8_row / dequant_fp4_row of core/block_dequant.h invert the
// codes exactly.
//
// NaN elements stay NaN in every *_sim function and do not affect the block's scale (the FP4 code of a NaN is +6,
// e2m1 having no NaN). A block holding +-inf gets e = 127; the inf stays inf, its finite neighbours flush to ~0.
#pragma once

#include <cstdint>

#include "core/fp8_dialect.h"

namespace dsv4 {

inline constexpr float kFp8AmaxFloor = 1e-4f;
inline constexpr float kFp4AmaxFloor = 6.0f * 0x1p-126f;

// e such that the block scale is 2^e (see above). amax is used as given apart from the floor.
int pow2_scale_exponent(float amax, float amax_floor, float qmax);

// --- FP8 (e4m3 in quant.dialect, qmax quant.qmax; DeepSeek's numerics: kOcpQuant) ----------------------------------
// Activation quantisation into the FP8/FP4 GEMMs (model-spec 4.4, block 128): writes n e4m3 codes (in quant.dialect)
// and ceil(n / block) UE8M0 scale bytes.
void act_quant_fp8(const float* x, int64_t n, int block, Fp8Quant quant, uint8_t* codes, uint8_t* ue8m0_scales);
// The same, dequantised in place in fp32: x <- e4m3(clamp(x/s, +-qmax)) * s. This is the value the FP8 GEMM
// multiplies (no bf16 rounding).
void act_quant_fp8_sim(float* x, int64_t n, int block, Fp8Quant quant);
// "FP8-sim(x, block)" of model-spec 2.1: act_quant_fp8_sim followed by rounding to bf16 (part of the definition;
// a no-op for finite inputs since e4m3 * 2^e is a bf16 value in the reachable range).
void fp8_sim(float* x, int64_t n, int block, Fp8Quant quant);
// The fp8_ds_mla KV record (model-spec 5.2): the input is first rounded fp32 -> bf16 -> fp32, then fp8_sim. Use this
// for the cached non-rope dims; use fp8_sim where the reference applies FP8-sim to fp32 values.
void fp8_sim_bf16_input(float* x, int64_t n, int block, Fp8Quant quant);

// --- FP4 (e2m1, qmax 6) ----------------------------------------------------------------------------------------------
// n even; writes n / 2 packed bytes (low nibble = even element) and ceil(n / block) UE8M0 scale bytes.
void act_quant_fp4(const float* x, int64_t n, int block, uint8_t* packed, uint8_t* ue8m0_scales);
// "FP4-sim(x, block)" of model-spec 2.1: x <- bf16(e2m1(clamp(x/s, +-6)) * s), s from floor 6 * 2^-126. Any n.
void fp4_sim(float* x, int64_t n, int block);

// --- Hadamard ------------------------------------------------------------------------------------------------------
// x <- H_n x / sqrt(n), H_n the Sylvester-ordered Walsh-Hadamard matrix (H[i][j] = (-1)^popcount(i & j)), computed
// in fp32 butterflies with the scale applied last. n must be a power of two (>= 1), else dsv4::Error.
void hadamard_inplace(float* x, int n);
// The same on each of `rows` contiguous rows of length n.
void hadamard_rows_inplace(float* x, int64_t rows, int n);

}  // namespace dsv4
