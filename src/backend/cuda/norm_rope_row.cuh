// A head row's RMSNorm (optional weight) and interleaved RoPE of its trailing rope_dim dims by one warp, with the
// arithmetic of the 256-thread block kernels (rms_norm_row, then rope_pair): lane l plays threads l + 32 w (w < 8),
// each summing the squares of its elements in order, then each group of 32 threads' butterfly, then the butterfly over
// the eight group sums; each element times the inverse RMS (times its weight); each rope pair rotated (rope_rotate)
// from the two normed values (the pair's partner from the neighbouring lane). Used by norm_rope_rows_kernel
// (kernels_basic.cu) and by the wide attention kernel's query staging (kernels_attention_wide.cu): the same bits.
#pragma once

#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/kernels.h"

namespace dsv4::cuda {

// Threads of the blocks that run rms_norm_row (rms_norm, norm_rope's and norm_ropes' block kernels): its summation
// order, which norm_rope_row_warp repeats lane by lane.
constexpr int kNormRowThreads = 256;
constexpr int kMaxNormRowPerLane = kMaxNormRowDim / 32;

// The row sums' fused multiply-adds (explicit, so that every kernel that repeats a block's order gets its bits).
__device__ __forceinline__ float add_square(float sum, float v) {
    return fmaf(v, v, sum);
}
__device__ __forceinline__ double add_square(double sum, float v) {
    return fma(static_cast<double>(v), static_cast<double>(v), sum);
}
template <typename Acc>
__device__ __forceinline__ Acc rms_inverse(Acc sum_squares, int64_t k, float eps) {
    return Acc(1) / sqrt_acc(sum_squares / static_cast<Acc>(k) + Acc(eps));
}

// The lane's elements lane + 32 j of row `row` (dim floats, dim % 32 == 0, dim <= kMaxNormRowDim; zeros past dim).
__device__ __forceinline__ void load_norm_row(const float* row, int dim, float (&v)[kMaxNormRowPerLane]) {
    const int lane = static_cast<int>(threadIdx.x % 32), per_lane = dim / 32;
#pragma unroll
    for (int j = 0; j < kMaxNormRowPerLane; ++j) v[j] = j < per_lane ? row[lane + 32 * j] : 0.0f;
}

// The inverse RMS of a row whose elements the warp's lanes hold (load_norm_row), in the block kernels' summation
// order. All 32 lanes must call.
template <typename Acc>
__device__ __forceinline__ Acc rms_inverse_of_lanes(const float (&v)[kMaxNormRowPerLane], int dim, float eps) {
    const int lane = static_cast<int>(threadIdx.x % 32), per_lane = dim / 32;
    constexpr int kGroups = kNormRowThreads / 32;
    Acc sums[kGroups];  // thread lane + 32 g: its elements lane + 32 g + 256 i, in order
#pragma unroll
    for (int g = 0; g < kGroups; ++g) {
        sums[g] = 0;
#pragma unroll
        for (int j = g; j < kMaxNormRowPerLane; j += kGroups) {
            if (j < per_lane) sums[g] = add_square(sums[g], v[j]);
        }
    }
    // The eight butterflies (warp_sum's steps) side by side, so their shuffles overlap.
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
#pragma unroll
        for (int g = 0; g < kGroups; ++g) sums[g] += __shfl_xor_sync(0xffffffffu, sums[g], o);
    }
    Acc group_sums = 0;  // lane g < 8: threads 32 g .. 32 g + 31's sum, as block_sum's second level reads them
#pragma unroll
    for (int g = 0; g < kGroups; ++g) {
        if (lane == g) group_sums = sums[g];
    }
    return rms_inverse(warp_sum(group_sums), dim, eps);
}

// The inverse RMS of row `row` by one warp (load_norm_row, then rms_inverse_of_lanes); v gets the lane's elements.
template <typename Acc>
__device__ __forceinline__ Acc row_rms_inverse_warp(const float* row, int dim, float eps,
                                                    float (&v)[kMaxNormRowPerLane]) {
    load_norm_row(row, dim, v);
    return rms_inverse_of_lanes<Acc>(v, dim, eps);
}

// The lane's elements of a row (v, as load_norm_row holds them) times the row's inverse RMS `inv` (times its weight),
// rope pairs from dim rope0 on rotated from their two normed values (the partner from the neighbouring lane):
// put(i, value) for each element i = lane + 32 j. All 32 lanes must call.
template <typename Acc, typename CosSin, typename Put>
__device__ __forceinline__ void norm_rope_lanes(const float (&v)[kMaxNormRowPerLane], Acc inv, const float* weight,
                                                int dim, int rope0, bool round, CosSin cos_sin, Put put) {
    const int lane = static_cast<int>(threadIdx.x % 32), per_lane = dim / 32;
#pragma unroll
    for (int j = 0; j < kMaxNormRowPerLane; ++j) {
        if (j >= per_lane) break;
        const int i = lane + 32 * j;
        Acc normed = v[j] * inv;
        if (weight != nullptr) normed *= weight[i];
        const float value = store_acc(normed, round);
        const float partner = __shfl_xor_sync(0xffffffffu, value, 1);
        if (i < rope0) {
            put(i, value);
            continue;
        }
        const bool first = (lane & 1) == 0;
        float v0, v1;
        rope_rotate<Acc>(cos_sin((i - rope0) / 2), round, first ? value : partner, first ? partner : value, v0, v1);
        put(i, first ? v0 : v1);
    }
}

// Row `row` normed and rotated by one warp: put(i, value) for each element i (lane + 32 j) this lane holds. All 32
// lanes must call. weight: null for none; rope_dim 0: no rotation; cos_sin(p): pair p's rope_cos_sin at the row's
// token.
template <typename Acc, typename CosSin, typename Put>
__device__ __forceinline__ void norm_rope_row_warp(const float* row, const float* weight, int dim, int rope_dim,
                                                   float eps, bool round, CosSin cos_sin, Put put) {
    float v[kMaxNormRowPerLane];
    const Acc inv = row_rms_inverse_warp<Acc>(row, dim, eps, v);
    norm_rope_lanes<Acc>(v, inv, weight, dim, dim - rope_dim, round, cos_sin,
                         put);  // rope0 even: pairs on lanes 2k, 2k+1
}

}  // namespace dsv4::cuda
