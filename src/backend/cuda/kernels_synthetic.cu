// Synthetic weights and state made on the device (benchmarks of full-size models without a checkpoint): counter-based
// random normals, quantized into the checkpoint formats with valid UE8M0 scales.
#include "backend/cuda/kernels.h"
#include "backend/cuda/pdl.cuh"
#include "backend/cuda/quant_sim.cuh"

namespace dsv4::cuda {
namespace {

__device__ uint64_t mix64(uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    return x ^ (x >> 33);
}

// N(0, 1) from two hashed uniforms (Box-Muller).
__device__ float normal_at(uint64_t seed, uint64_t i) {
    const uint64_t h = mix64(seed ^ mix64(i));
    const float u1 = (static_cast<float>(h >> 40) + 1.0f) * (1.0f / 16777217.0f);
    const float u2 = static_cast<float>((h >> 16) & 0xffffffu) * (1.0f / 16777216.0f);
    return sqrtf(-2.0f * logf(u1)) * cospif(2.0f * u2);
}

__device__ uint8_t e2m1_code(float v) {
    const float r = round_e2m1(v);
    constexpr float kGrid[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
    uint8_t code = 0;
    for (uint8_t i = 0; i < 8; ++i) code = fabsf(r) == kGrid[i] ? i : code;
    return static_cast<uint8_t>(code | (r < 0.0f ? 8 : 0));
}

__global__ void fill_fp8_kernel(uint8_t* codes, int64_t n, float inv_scale, float stddev, uint64_t seed, bool fnuz) {
    pdl_begin();
    const float qmax = fnuz ? 240.0f : 448.0f;
    for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
         i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
        const float v = fminf(fmaxf(normal_at(seed, i) * stddev * inv_scale, -qmax), qmax);
        codes[i] =
            fnuz ? encode_e4m3_fnuz_dev(v) : static_cast<uint8_t>(__nv_cvt_float_to_fp8(v, __NV_SATFINITE, __NV_E4M3));
    }
}

// Element e's code is that of normal_at(seed, e), whatever the layout: word i packs elements 8 i .. 8 i + 7, first in
// the checkpoint's nibble order, then moved into the backend's sign-split layout (backend/fp4_layout.h).
__global__ void fill_fp4_kernel(uint32_t* words, int64_t n_words, float inv_scale, float stddev, uint64_t seed) {
    pdl_begin();
    for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n_words;
         i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
        uint32_t checkpoint = 0;
#pragma unroll
        for (int j = 0; j < 8; ++j) {
            const float v = fminf(fmaxf(normal_at(seed, 8 * i + j) * stddev * inv_scale, -6.0f), 6.0f);
            checkpoint |= static_cast<uint32_t>(e2m1_code(v)) << (4 * j);
        }
        words[i] = fp4_word_from_checkpoint(checkpoint);
    }
}

__global__ void fill_bytes_kernel(uint8_t* p, int64_t n, uint8_t value) {
    pdl_begin();
    for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
         i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
        p[i] = value;
    }
}

__global__ void fill_bf16_kernel(uint16_t* p, int64_t n, float stddev, uint64_t seed) {
    pdl_begin();
    for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
         i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
        p[i] = static_cast<uint16_t>(__float_as_uint(to_bf16(normal_at(seed, i) * stddev)) >> 16);
    }
}

__global__ void fill_f32_kernel(float* p, int64_t n, float mean, float stddev, uint64_t seed) {
    pdl_begin();
    for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
         i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
        p[i] = mean + stddev * normal_at(seed, i);
    }
}

// Row r's k entries: consecutive experts from a hashed start (distinct; every expert equally likely).
__global__ void fill_table_kernel(int32_t* p, int64_t rows, int cols, int64_t max_value, uint64_t seed) {
    pdl_begin();
    for (int64_t r = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; r < rows;
         r += static_cast<int64_t>(gridDim.x) * blockDim.x) {
        const uint64_t start = mix64(seed ^ mix64(r)) % static_cast<uint64_t>(max_value);
        for (int j = 0; j < cols; ++j) p[r * cols + j] = static_cast<int32_t>((start + j) % max_value);
    }
}

constexpr unsigned kGrid = 1024;

}  // namespace

void launch_fill_fp8(cudaStream_t s, uint8_t* codes, int64_t n, float inv_scale, float stddev, uint64_t seed,
                     bool fnuz) {
    launch_kernel(fill_fp8_kernel, kGrid, 256, 0, s, codes, n, inv_scale, stddev, seed, fnuz);
}
void launch_fill_fp4(cudaStream_t s, uint32_t* words, int64_t n_words, float inv_scale, float stddev, uint64_t seed) {
    launch_kernel(fill_fp4_kernel, kGrid, 256, 0, s, words, n_words, inv_scale, stddev, seed);
}
void launch_fill_bytes(cudaStream_t s, uint8_t* p, int64_t n, uint8_t value) {
    launch_kernel(fill_bytes_kernel, kGrid, 256, 0, s, p, n, value);
}
void launch_fill_bf16(cudaStream_t s, uint16_t* p, int64_t n, float stddev, uint64_t seed) {
    launch_kernel(fill_bf16_kernel, kGrid, 256, 0, s, p, n, stddev, seed);
}
void launch_fill_f32(cudaStream_t s, float* p, int64_t n, float mean, float stddev, uint64_t seed) {
    launch_kernel(fill_f32_kernel, kGrid, 256, 0, s, p, n, mean, stddev, seed);
}
void launch_fill_table(cudaStream_t s, int32_t* p, int64_t rows, int cols, int64_t max_value, uint64_t seed) {
    launch_kernel(fill_table_kernel, kGrid, 256, 0, s, p, rows, cols, max_value, seed);
}

}  // namespace dsv4::cuda
