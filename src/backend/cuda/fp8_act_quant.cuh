// The activation quantization of the FP8 paths of fast numerics, one 128-element block per warp (4 values a lane):
// a power-of-two scale 2^ceil(log2(max(amax, 1e-4) / 448)) and e4m3 codes by round-to-nearest-even of the clamped
// scaled values, reference numerics' act_quant (quant_sim.cuh) kept as codes. Shared by the quantization kernels
// (kernels_fp8_quant.cu) and the FP8 GEMV, which quantizes its input in its prologue (kernels_gemv_fp8.cu), so that
// both give the same codes and scales.
#pragma once

#include <cuda_fp8.h>

#include <cstdint>

#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/quant_sim.cuh"

namespace dsv4::cuda {

// The rule, one block at a time: its scale exponent from the amax of its (bf16-rounded) values, ...
__device__ __forceinline__ int fp8_block_exponent(float amax) {
    return pow2_scale_exponent_dev(amax, kFp8AmaxFloorDev, 448.0f);
}
// ... each value's e4m3 code (value times 2^-e, clamped, round-to-nearest-even) in the low byte ...
__device__ __forceinline__ uint32_t fp8_act_code(float v, int e) {
    const float s = fminf(fmaxf(v * exp2i(-e), -448.0f), 448.0f);  // e in [-127, 127] (ceil_log2_clamped_dev)
    return static_cast<uint32_t>(__nv_cvt_float_to_fp8(s, __NV_SATFINITE, __NV_E4M3));
}
// ... and the block's scale: NaN where the block holds a NaN or an infinity, so every output it feeds is NaN.
__device__ __forceinline__ float fp8_block_scale(int e, bool finite) {
    return finite ? exp2i(e) : __uint_as_float(0x7fc00000u);
}

// This lane's four codes (element i in byte i) of the block whose values (already bf16-rounded) the warp holds, 4 a
// lane in order; `scale` gets the block's scale. All lanes must call.
__device__ __forceinline__ uint32_t quant_block_warp_word(const float (&v)[4], float& scale) {
    float amax = 0.0f;
    bool finite = true;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        amax = fmaxf(amax, fabsf(v[i]));
        finite = finite && isfinite(v[i]);
    }
    amax = warp_max(amax);
    finite = __all_sync(0xffffffffu, finite);
    const int e = fp8_block_exponent(amax);
    uint32_t word = 0;
#pragma unroll
    for (int i = 0; i < 4; ++i) word |= fp8_act_code(v[i], e) << (8 * i);
    scale = fp8_block_scale(e, finite);
    return word;
}

}  // namespace dsv4::cuda
