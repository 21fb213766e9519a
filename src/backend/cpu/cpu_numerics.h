// The reference-numerics roundings as the CPU backend applies them (model-spec 2.1, 4.4; the list is in
// tools/fixtures/make_fixtures.py's docstring, which patches the same roundings into the HF reference).
#pragma once

#include <cstdint>

#include "core/float_formats.h"

namespace dsv4::cpu {

inline float bf(float v) { return round_to_bf16(v); }
void round_bf16(float* x, int64_t n);
// Per-block FP8 e4m3 quantize-dequantize with a UE8M0 scale (amax floor 1e-4), then bf16 (model-spec 2.1 FP8-sim).
void fp8_sim(float* x, int64_t n, int block);
// The activation quantization into FP8/FP4 GEMMs: bf16 input, per-128 blocks (model-spec 4.4).
void act_quant_sim(float* x, int64_t n);
// FP4 e2m1 quantize-dequantize per block of 32 with a UE8M0 scale.
void fp4_sim(float* x, int64_t n, int block);
// Sylvester-ordered Walsh-Hadamard transform scaled by n^-1/2 (n a power of two).
void hadamard(float* x, int64_t n);

}  // namespace dsv4::cpu
