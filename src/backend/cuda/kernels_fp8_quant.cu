// Activation quantization for the FP8 tensor-core GEMMs of `fast` numerics (kernels_fp8.h): bf16 rounding, then per
// 128 elements a power-of-two scale 2^ceil(log2(max(amax, 1e-4) / 448)) and e4m3 codes by round-to-nearest-even of
// the clamped scaled values: the same codes and scales as reference numerics' act_quant (quant_sim.cuh), stored as
// codes instead of being decoded back. Also the float32 expansion of UE8M0 weight block scales for cuBLASLt.
#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/fp8_act_quant.cuh"
#include "backend/cuda/kernels_fp8.h"
#include "backend/cuda/pdl.cuh"

namespace dsv4::cuda {
namespace {

// One warp quantizes one 128-element block of one row: 4 consecutive values per lane (v[], already bf16-rounded).
__device__ __forceinline__ void quant_block_warp(const float (&v)[4], const Fp8Act& out, int64_t row, int64_t block) {
    const int lane = threadIdx.x & 31;
    float scale;
    const uint32_t word = quant_block_warp_word(v, scale);
    *reinterpret_cast<uint32_t*>(out.codes + row * out.k + block * kFp8ActBlock + lane * 4) = word;
    if (lane == 0) out.scales[block * out.rows_pad + row] = scale;
}

// Rows at or past out.rows: zero codes and scales (cuBLASLt reads the padded rows).
__device__ __forceinline__ void zero_block_warp(const Fp8Act& out, int64_t row, int64_t block) {
    const int lane = threadIdx.x & 31;
    *reinterpret_cast<uint32_t*>(out.codes + row * out.k + block * kFp8ActBlock + lane * 4) = 0u;
    if (lane == 0) out.scales[block * out.rows_pad + row] = 0.0f;
}

// Grid: one warp per (row < rows_pad, block), 8 warps per thread block.
__global__ void quant_fp8_kernel(QuantFp8Args a) {
    pdl_begin();
    const int64_t blocks = a.out.k / kFp8ActBlock;
    const int64_t id = blockIdx.x * static_cast<int64_t>(blockDim.x / 32) + threadIdx.x / 32;
    if (id >= a.out.rows_pad * blocks) return;
    const int64_t row = id / blocks, block = id % blocks;
    if (row >= a.out.rows) return zero_block_warp(a.out, row, block);
    const float4 x =
        *reinterpret_cast<const float4*>(a.x + row * a.x_stride + block * kFp8ActBlock + (threadIdx.x & 31) * 4);
    const float v[4] = {to_bf16(x.x), to_bf16(x.y), to_bf16(x.z), to_bf16(x.w)};
    quant_block_warp(v, a.out, row, block);
}

__device__ __forceinline__ float swiglu_value(float g, float u, float limit, float weight) {
    if (limit > 0.0f) {
        g = g > limit ? limit : g;  // comparisons keep a NaN (fminf / fmaxf would replace it by the limit)
        u = u > limit ? limit : u < -limit ? -limit : u;
    }
    return to_bf16(g / (1.0f + expf(-g)) * u * weight);
}

__global__ void swiglu_quant_fp8_kernel(SwigluQuantArgs a) {
    pdl_begin();
    const int64_t blocks = a.out.k / kFp8ActBlock;
    const int64_t id = blockIdx.x * static_cast<int64_t>(blockDim.x / 32) + threadIdx.x / 32;
    if (id >= a.out.rows_pad * blocks) return;
    const int64_t row = id / blocks, block = id % blocks;
    if (row >= a.out.rows) return zero_block_warp(a.out, row, block);
    const int64_t at = row * a.out.k + block * kFp8ActBlock + (threadIdx.x & 31) * 4;
    const float4 g = *reinterpret_cast<const float4*>(a.g + at);
    const float4 u = *reinterpret_cast<const float4*>(a.u + at);
    const float w = a.row_weights != nullptr ? a.row_weights[row] : 1.0f;
    const float v[4] = {swiglu_value(g.x, u.x, a.limit, w), swiglu_value(g.y, u.y, a.limit, w),
                        swiglu_value(g.z, u.z, a.limit, w), swiglu_value(g.w, u.w, a.limit, w)};
    quant_block_warp(v, a.out, row, block);
}

__global__ void expand_block_scales_kernel(ExpandScalesArgs a) {
    pdl_begin();
    const int64_t id = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
    if (id >= a.block_rows * a.dst_stride) return;
    const int64_t rb = id / a.dst_stride, kb = id % a.dst_stride;
    a.dst[id] = kb < a.blocks_k ? decode_ue8m0(a.src[rb * a.src_stride + kb]) : 0.0f;
}

unsigned warp_blocks(int64_t warps) {
    return blocks_for(warps, 8);
}

}  // namespace

void launch_quant_fp8(cudaStream_t stream, const QuantFp8Args& a) {
    const int64_t warps = a.out.rows_pad * (a.out.k / kFp8ActBlock);
    if (warps > 0) launch_kernel(quant_fp8_kernel, warp_blocks(warps), 256, 0, stream, a);
}

void launch_swiglu_quant_fp8(cudaStream_t stream, const SwigluQuantArgs& a) {
    const int64_t warps = a.out.rows_pad * (a.out.k / kFp8ActBlock);
    if (warps > 0) launch_kernel(swiglu_quant_fp8_kernel, warp_blocks(warps), 256, 0, stream, a);
}

void launch_expand_block_scales(cudaStream_t stream, const ExpandScalesArgs& a) {
    const int64_t n = a.block_rows * a.dst_stride;
    if (n > 0) launch_kernel(expand_block_scales_kernel, blocks_for(n, 256), 256, 0, stream, a);
}

}  // namespace dsv4::cuda
