// Device versions of the reference-numerics roundings (core/quant_sim.h), bit-exact with the CPU ones:
// UE8M0 power-of-two block scales, FP8 e4m3 / FP4 e2m1 round-to-nearest-even on the scaled values, the
// Walsh-Hadamard rotation. Each helper works on one row held by one thread block or one warp.
#pragma once

#include <cuda_fp8.h>

#include "backend/cuda/cuda_common.cuh"

namespace dsv4::cuda {

constexpr float kFp8AmaxFloorDev = 1e-4f;
constexpr float kFp4AmaxFloorDev = 6.0f * 0x1p-126f;

// ceil(log2(value)) for value >= 0 from its bits, clamped to [-127, 127] (core ceil_log2_clamped).
__device__ __forceinline__ int ceil_log2_clamped_dev(float value) {
    const uint32_t bits = __float_as_uint(value) & 0x7fffffffu;
    const int field = static_cast<int>(bits >> 23);
    const uint32_t mantissa = bits & 0x7fffffu;
    int result;
    if (field == 0xff) {
        result = 127;
    } else if (field == 0) {
        if (mantissa == 0) return -127;
        result = -149 + (32 - __clz(mantissa - 1));
    } else {
        result = field - 127 + (mantissa != 0 ? 1 : 0);
    }
    return max(-127, min(127, result));
}

__device__ __forceinline__ int pow2_scale_exponent_dev(float amax, float floor_value, float qmax) {
    return ceil_log2_clamped_dev(fmaxf(amax, floor_value) * (1.0f / qmax));
}

// Nearest e4m3 value (RNE, |v| <= 448 after the caller's clamp).
__device__ __forceinline__ float round_e4m3(float v) {
    const __nv_fp8_storage_t q = __nv_cvt_float_to_fp8(v, __NV_SATFINITE, __NV_E4M3);
    return decode_e4m3(static_cast<uint8_t>(q));
}

// Nearest e4m3 value of a dialect (|v| <= the dialect's max after the caller's clamp).
__device__ __forceinline__ float round_e4m3(float v, bool fnuz) {
    return fnuz ? decode_e4m3_fnuz(encode_e4m3_fnuz_dev(v)) : round_e4m3(v);
}

// Nearest e2m1 value, ties to the even code (|v| <= 6 after the caller's clamp).
__device__ __forceinline__ float round_e2m1(float v) {
    if (isnan(v)) return v;
    constexpr float kGrid[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
    const float a = fminf(fabsf(v), 6.0f);
    int lo = 0;
#pragma unroll
    for (int i = 1; i < 8; ++i) lo = kGrid[i] <= a ? i : lo;
    const int hi = min(lo + 1, 7);
    const float dlo = a - kGrid[lo], dhi = kGrid[hi] - a;
    const int pick = (hi != lo && (dhi < dlo || (dhi == dlo && (hi & 1) == 0))) ? hi : lo;
    return copysignf(kGrid[pick], v);
}

// Quantize-dequantize x[0..n) in blocks of `block`, one warp per block of elements (block <= 128 assumed, each lane
// holding up to 4 values). fmt: 0 = FP8 e4m3 in fp8's dialect and maximum (OCP 448 by default), 1 = FP4 e2m1 (qmax
// 6). round_bf16: final bf16 rounding.
__device__ __forceinline__ void warp_block_sim(float* x, int n, int block, int fmt, bool round_bf16,
                                               Fp8QuantDev fp8 = {}) {
    const int lane = threadIdx.x & 31;
    const float qmax = fmt == 0 ? fp8.qmax : 6.0f;
    const float floor_value = fmt == 0 ? kFp8AmaxFloorDev : kFp4AmaxFloorDev;
    for (int begin = 0; begin < n; begin += block) {
        const int end = min(n, begin + block);
        float amax = 0.0f;
        for (int j = begin + lane; j < end; j += 32) amax = fmaxf(amax, fabsf(x[j]));
        amax = warp_max(amax);
        const int e = pow2_scale_exponent_dev(amax, floor_value, qmax);
        const float scale = ldexpf(1.0f, e), inverse = ldexpf(1.0f, -e);
        for (int j = begin + lane; j < end; j += 32) {
            const float s = fminf(fmaxf(x[j] * inverse, -qmax), qmax);
            float q = (fmt == 0 ? round_e4m3(s, fp8.fnuz) : round_e2m1(s)) * scale;
            x[j] = round_bf16 ? to_bf16(q) : q;
        }
        __syncwarp();
    }
}

// Sylvester-ordered Walsh-Hadamard transform of x[0..n) (n a power of two) scaled by n^-1/2, by one warp.
__device__ __forceinline__ void warp_hadamard(float* x, int n) {
    const int lane = threadIdx.x & 31;
    for (int half = 1; half < n; half *= 2) {
        for (int p = lane; p < n / 2; p += 32) {
            const int start = (p / half) * 2 * half, j = start + p % half;
            const float a = x[j], b = x[j + half];
            x[j] = a + b;
            x[j + half] = a - b;
        }
        __syncwarp();
    }
    const float scale = static_cast<float>(1.0 / sqrt(static_cast<double>(n)));
    for (int j = lane; j < n; j += 32) x[j] *= scale;
    __syncwarp();
}

}  // namespace dsv4::cuda
