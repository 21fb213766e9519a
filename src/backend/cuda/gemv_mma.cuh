// Pieces shared by the decode GEMVs on FP8 tensor cores (kernels_gemv_fp8.cu: FP8 weights; kernels_expert_gemv_fp4.cu:
// FP4 routed experts): a block of kMmaWarps warps, 16-row tiles split over warps by 128-wide K blocks, the block's
// input tokens quantized per 128 (fp8_act_quant.cuh) into shared memory in its prologue, the split sums added in split
// order. A lane's token codes are read by mma_fp8.cuh's fragment rule.
#pragma once

#include <cstdint>

#include "backend/cuda/fp8_act_quant.cuh"
#include "backend/cuda/kernels_fp8.h"
#include "backend/cuda/mma_fp8.cuh"

namespace dsv4::cuda {

constexpr int kMmaWarps = 8;
constexpr int kMmaTileRows = 16;
constexpr int kMmaCodePad = 64;  // bytes after each staged token row: tokens g and g + 1 on other banks

// Shared memory of one block: the staged codes [m][k * code_bytes + kMmaCodePad] (code_bytes 2: the codes' values as
// f16, StageOrder::kF16), their scales [m][k / 128], the split sums.
struct MmaStageLayout {
    int64_t code_stride = 0, scales_offset = 0, partials_offset = 0, bytes = 0;
};
__host__ __device__ inline MmaStageLayout mma_stage_layout(int m, int64_t k, int code_bytes = 1) {
    MmaStageLayout l;
    l.code_stride = k * code_bytes + kMmaCodePad;
    l.scales_offset = m * l.code_stride;
    l.partials_offset = l.scales_offset + m * (k / kFp8ActBlock) * 4;
    l.bytes = l.partials_offset + kMmaWarps * 4 * 32 * 4;
    return l;
}

// Warps per 16-row tile: K blocks split in powers of two until `units` tiles give about target_warps warps, each
// warp keeping at least a chunk of K blocks, at most kMaxSplits.
constexpr int kMaxSplits = kMmaWarps;
inline int mma_splits(int64_t units, int64_t k_blocks, int chunk, int target_warps) {
    int splits = 1;
    while (splits < kMaxSplits && units * splits < target_warps && k_blocks >= 2 * splits * chunk) splits *= 2;
    return splits;
}

// 16-row tiles of a weight.
inline int64_t mma_tiles_of(const WeightRef& w) {
    return (w.rows + kMmaTileRows - 1) / kMmaTileRows;
}

// The K blocks [begin, end) of split `split` of `blocks` shared `splits` ways (the last splits may be short or empty).
struct KRange {
    int begin = 0, end = 0;
};
__device__ __forceinline__ KRange split_k_range(int split, int splits, int blocks) {
    const int per_split = (blocks + splits - 1) / splits;
    KRange r;
    r.begin = min(blocks, split * per_split);
    r.end = min(blocks, r.begin + per_split);
    return r;
}

// The target of a launch's thread block (p.block_end: the cumulative blocks per target) and the block's index within
// it.
template <typename Params>
__device__ __forceinline__ int block_target(const Params& p, int& local) {
    int target = 0;
    while (target < p.n - 1 && static_cast<int>(blockIdx.x) >= p.block_end[target]) ++target;
    local = static_cast<int>(blockIdx.x) - (target == 0 ? 0 : p.block_end[target - 1]);
    return target;
}

// Split sums across thread blocks: after each block has written its partials, whether this block is the last of the
// `arrivals` blocks sharing `counter` (it then reads everyone's partials, with __ldcg: written by other SMs). The
// last block resets the counter, so graphs replay the launch. All threads of the block must call.
__device__ __forceinline__ bool last_to_arrive(int32_t* counter, int arrivals) {
    __shared__ bool last;
    __threadfence();  // this thread's partials are visible device-wide before the block counts itself in
    __syncthreads();
    if (threadIdx.x == 0) {
        last = atomicAdd(counter, 1) == arrivals - 1;
        if (last) *counter = 0;  // every other block has arrived: nobody adds to it again in this launch
    }
    __syncthreads();
    if (last) __threadfence();
    return last;
}

// The K splits' partial sums of one output, `stride` floats apart from `first`, added in split order (the same bits
// as a loop) with every load issued before the first add: the last block of a group waits one L2 round trip for
// them all, not one a split. Loads past the last split re-read it (no branch between the loads). splits in
// [1, kMaxSplits].
__device__ __forceinline__ float split_order_sum(const float* first, int splits, int64_t stride) {
    float v[kMaxSplits];
#pragma unroll
    for (int s = 0; s < kMaxSplits; ++s) v[s] = __ldcg(first + min(s, splits - 1) * stride);
    float sum = v[0];
#pragma unroll
    for (int s = 1; s < kMaxSplits; ++s) {
        if (s < splits) sum += v[s];
    }
    return sum;
}

// How staged codes are stored: e4m3 bytes as they come (FP8 weights), or as their f16 values in the same order (FP4
// weights: kernels_expert_gemv_fp4.cu multiplies in f16, mma_fp8.cuh).
enum class StageOrder { kNatural, kF16 };

// m tokens (token t at x + t * x_stride), bf16-rounded and quantized per 128, into shared memory: one warp per (token,
// K block), kStageBatch of them loaded before any is quantized (the loads' latency is the prologue's cost). Scales
// [t][block], multiplied by `scale_factor` (a power of two: exact). With `up` (same layout as x), the tokens are
// swiglu_acc(x, up, limit) (cuda_common.cuh), as the SwiGLU kernel would have written them.
constexpr int kStageBatch = 2;
template <StageOrder kOrder>
__device__ void stage_tokens(const float* x, int64_t x_stride, int m, int64_t k, float scale_factor,
                             const MmaStageLayout& l, uint8_t* shared, const float* up = nullptr, float limit = 0.0f) {
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int blocks = static_cast<int>(k / kFp8ActBlock), items = m * blocks;  // int: no 64-bit divisions below
    auto* scales = reinterpret_cast<float*>(shared + l.scales_offset);
    for (int first = warp; first < items; first += kMmaWarps * kStageBatch) {
        float4 x4[kStageBatch], u4[kStageBatch];
#pragma unroll
        for (int j = 0; j < kStageBatch; ++j) {
            const int item = first + j * kMmaWarps;
            if (item < items) {
                const int t = item / blocks, b = item % blocks;
                const int64_t at = t * x_stride + b * kFp8ActBlock + lane * 4;
                x4[j] = *reinterpret_cast<const float4*>(x + at);
                if (up != nullptr) u4[j] = *reinterpret_cast<const float4*>(up + at);
            }
        }
        if (up != nullptr) {
#pragma unroll
            for (int j = 0; j < kStageBatch; ++j) {
                x4[j] =
                    make_float4(swiglu_acc<float>(x4[j].x, u4[j].x, limit), swiglu_acc<float>(x4[j].y, u4[j].y, limit),
                                swiglu_acc<float>(x4[j].z, u4[j].z, limit), swiglu_acc<float>(x4[j].w, u4[j].w, limit));
            }
        }
#pragma unroll
        for (int j = 0; j < kStageBatch; ++j) {
            const int item = first + j * kMmaWarps;
            if (item >= items) break;  // uniform over the warp
            const int t = item / blocks, b = item % blocks;
            const float v[4] = {to_bf16(x4[j].x), to_bf16(x4[j].y), to_bf16(x4[j].z), to_bf16(x4[j].w)};
            float scale;
            const uint32_t word = quant_block_warp_word(v, scale);
            if constexpr (kOrder == StageOrder::kF16) {
                uint2 values;
                e4m3x4_to_f16x2x2(word, values.x, values.y);
                *reinterpret_cast<uint2*>(shared + t * l.code_stride + 2 * (b * kFp8ActBlock + lane * 4)) = values;
            } else {
                *reinterpret_cast<uint32_t*>(shared + t * l.code_stride + b * kFp8ActBlock + lane * 4) = word;
            }
            if (lane == 0) scales[t * blocks + b] = scale * scale_factor;
        }
    }
}

// The same staged codes and scales from inputs launch_quant_fp8 quantized (columns [col0, col0 + k) of each row).
__device__ inline void stage_quantized(const Fp8Act& a, int64_t col0, int m, int64_t k, const MmaStageLayout& l,
                                       uint8_t* shared) {
    const int chunks = static_cast<int>(k / 16), blocks = static_cast<int>(k / kFp8ActBlock);  // int: fewer registers
    const uint8_t* codes = a.codes + col0;
    for (int i = threadIdx.x; i < m * chunks; i += blockDim.x) {
        const int t = i / chunks, c = i - t * chunks;
        *reinterpret_cast<uint4*>(shared + t * l.code_stride + c * 16) =
            *reinterpret_cast<const uint4*>(codes + t * a.k + c * 16);
    }
    auto* scales = reinterpret_cast<float*>(shared + l.scales_offset);
    const float* first = a.scales + (col0 / kFp8ActBlock) * a.rows_pad;
    for (int i = threadIdx.x; i < m * blocks; i += blockDim.x) {
        const int t = i / blocks, b = i - t * blocks;
        scales[i] = first[b * a.rows_pad + t];
    }
}

// The split warps of a tile add their sums in split order (split 0 ends with the total), through shared memory. All
// threads of the block must call.
__device__ __forceinline__ void sum_splits(float acc[4], int splits, float* partials) {
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    if (splits > 1) {
#pragma unroll
        for (int i = 0; i < 4; ++i) partials[(warp * 4 + i) * 32 + lane] = acc[i];
    }
    __syncthreads();
    if (splits == 1 || warp % splits != 0) return;
    for (int s = 1; s < splits; ++s) {
#pragma unroll
        for (int i = 0; i < 4; ++i) acc[i] += partials[((warp + s) * 4 + i) * 32 + lane];
    }
}

// The tile's results: lane (g, tq) holds rows g, g + 8 of tokens 2 tq, 2 tq + 1 (mma_fp8.cuh's C layout); token t's
// row r goes to y[t * y_stride + r] for rows below `rows` and tokens below m.
__device__ __forceinline__ void store_tile(const float acc[4], int64_t r0, int64_t rows, int m, float* y,
                                           int64_t y_stride) {
    const int lane = threadIdx.x % 32, g = lane / 4, tq = lane % 4;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        const int64_t row = r0 + g + (i >= 2 ? 8 : 0);
        const int token = 2 * tq + (i & 1);
        if (row < rows && token < m) y[token * y_stride + row] = acc[i];
    }
}

}  // namespace dsv4::cuda
