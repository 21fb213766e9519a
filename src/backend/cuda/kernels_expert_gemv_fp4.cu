// The routed experts' per-pair GEMVs on FP8 tensor cores, FP4 weights (W4A8; kernels.h, launch_expert_gemv_fp4). The
// float32 expert GEMV spends about four instructions on each weight element (e2m1 to e4m3 by byte permutes, to half,
// to float, multiply-add) and ran at 0.75-0.95 TB/s (performance-log.md 2026-12-03); here an element costs about one
// (mma_fp8.cuh's bit move to e4m3, exact) and the sums run on mma.sync.
//
// Lane (g, tq) of a warp holds, for each 128-wide K block of its 16-row tile, the 4-byte word at byte 16 i + 4 tq of
// rows g and g + 8 for each 32-wide scale group i: mma step i then covers group i alone, and its 16 x 8 result is
// multiplied by the group's scale of each row before it joins the block's sum, which the token's scale multiplies
// once per K block. The staged token codes are ordered even / odd in each run of 8 to match the expansion.
#include <algorithm>
#include <cstdint>

#include "backend/cuda/gemv_mma.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/mma_fp8.cuh"
#include "backend/cuda/pdl.cuh"

namespace dsv4::cuda {
namespace {

constexpr int kChunk = 4;           // K blocks of weights a warp has in flight
constexpr int kGroups = 4;          // 32-wide scale groups per K block
constexpr int kTargetWarps = 4096;  // warps a launch aims for before it stops splitting K
constexpr int64_t kMaxShared = 64 * 1024;

// One lane's words of a chunk: [block][group][row g, row g + 8], and the four group scales of each row and block.
struct Fp4Loads {
    uint32_t w[kChunk][kGroups][2];
    uint32_t scales[kChunk][2];
};

__device__ __forceinline__ uint32_t load_scale_word(const uint8_t* p, bool aligned) {
    if (aligned) return __ldg(reinterpret_cast<const uint32_t*>(p));
    return static_cast<uint32_t>(p[0]) | static_cast<uint32_t>(p[1]) << 8 | static_cast<uint32_t>(p[2]) << 16 |
           static_cast<uint32_t>(p[3]) << 24;
}

// Rows g and g + 8 of the tile for K blocks [kb0, kb0 + kChunk). Every load is issued, with no branch or select: a
// row past the weight reads the last row and a block at or past kb_end reads block kb_end - 1 (loaded, never used:
// the sums stop at kb_end and store_tile skips rows past the weight).
struct TileRows {
    const uint8_t* data_g = nullptr;  // row g's bytes, from this lane's 4 tq
    const uint8_t* data_g8 = nullptr;
    const uint8_t* scales_g = nullptr;  // row g's group scales
    const uint8_t* scales_g8 = nullptr;
    bool scales_aligned = false;
};
__device__ __forceinline__ void load_chunk(const TileRows& t, int kb0, int kb_end, Fp4Loads& l) {
#pragma unroll
    for (int c = 0; c < kChunk; ++c) {
        const int kb = min(kb0 + c, kb_end - 1);
        const int64_t at = static_cast<int64_t>(kb) * (kFp8ActBlock / 2);
#pragma unroll
        for (int i = 0; i < kGroups; ++i) {
            l.w[c][i][0] = __ldg(reinterpret_cast<const uint32_t*>(t.data_g + at + 16 * i));
            l.w[c][i][1] = __ldg(reinterpret_cast<const uint32_t*>(t.data_g8 + at + 16 * i));
        }
        const int64_t s_at = static_cast<int64_t>(kb) * kGroups;
        l.scales[c][0] = load_scale_word(t.scales_g + s_at, t.scales_aligned);
        l.scales[c][1] = load_scale_word(t.scales_g8 + s_at, t.scales_aligned);
    }
}

// acc += the chunk's K blocks (one token, column 0 of the mma): per group the exact 32-term sums times the group's
// row scales, per block that sum times the token's scale.
__device__ __forceinline__ void accumulate_chunk(const Fp4Loads& l, const uint8_t* codes, const float* token_scales,
                                                 int kb0, int kb_end, float acc[4]) {
    const int tq = threadIdx.x % 4;
    const float zero[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
    for (int c = 0; c < kChunk; ++c) {
        const int kb = kb0 + c;
        if (kb >= kb_end) break;
        float block[4] = {0.0f, 0.0f, 0.0f, 0.0f};
        float scale_g[kGroups], scale_g8[kGroups];  // the groups' scales of rows g and g + 8
        decode_ue8m0_x4(l.scales[c][0], scale_g);
        decode_ue8m0_x4(l.scales[c][1], scale_g8);
#pragma unroll
        for (int i = 0; i < kGroups; ++i) {
            // Every lane reads the token's codes (one shared-memory broadcast, no branch): all eight B columns are
            // the one token, and only column 0 is stored.
            const uint2 x = *reinterpret_cast<const uint2*>(codes + kb * kFp8ActBlock + 32 * i + 8 * tq);
            const uint2 row_g = e2m1_to_e4m3_even_odd(l.w[c][i][0]);
            const uint2 row_g8 = e2m1_to_e4m3_even_odd(l.w[c][i][1]);
            const uint32_t a[4] = {row_g.x, row_g8.x, row_g.y, row_g8.y}, b[2] = {x.x, x.y};
            float d[4];
            mma_e4m3(d, a, b, zero);
            block[0] = fmaf(d[0], scale_g[i], block[0]);
            block[1] = fmaf(d[1], scale_g[i], block[1]);
            block[2] = fmaf(d[2], scale_g8[i], block[2]);
            block[3] = fmaf(d[3], scale_g8[i], block[3]);
        }
        const float f = token_scales[kb];  // token 0's scale (times 2^6, the expansion's offset)
#pragma unroll
        for (int i = 0; i < 4; ++i) acc[i] = fmaf(block[i], f, acc[i]);
    }
}

// Grid: (tile groups, pairs, weights). Every block waits for the router before it reads its pair's expert id.
__global__ void __launch_bounds__(kMmaWarps * 32)
    expert_gemv_fp4_kernel(const __grid_constant__ ExpertGemvFp4Params p) {
    extern __shared__ __align__(16) uint8_t shared[];
    pdl_begin();
    const int64_t pair = blockIdx.y;
    const int which = static_cast<int>(blockIdx.z);
    const int32_t e = p.ids[pair];
    if (e < 0 || e >= p.n_experts) {  // uniform over the block: no thread reaches the barriers below
        if (threadIdx.x == 0 && blockIdx.x == 0 && which == 0) flag_error(p.meta, kErrorExpertId);
        return;
    }
    const WeightRef w = p.tables[which][e];
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, tq = lane % 4;
    const int64_t r0 = (static_cast<int64_t>(blockIdx.x) * (kMmaWarps / p.splits) + warp / p.splits) * kMmaTileRows;
    const int split = warp % p.splits;
    const int blocks = static_cast<int>(p.k / kFp8ActBlock);
    const int per_split = (blocks + p.splits - 1) / p.splits;
    const int kb_begin = std::min(blocks, split * per_split);
    const int kb_end = r0 < p.rows ? std::min(blocks, kb_begin + per_split) : kb_begin;  // tiles past the rows: none

    const int64_t row_bytes = p.k / 2;
    const int64_t row_g = std::min(r0 + g, p.rows - 1), row_g8 = std::min(r0 + g + 8, p.rows - 1);
    TileRows t;
    t.data_g = static_cast<const uint8_t*>(w.data) + row_g * row_bytes + 4 * tq;
    t.data_g8 = static_cast<const uint8_t*>(w.data) + row_g8 * row_bytes + 4 * tq;
    t.scales_g = w.scales + row_g * w.scale_cols;
    t.scales_g8 = w.scales + row_g8 * w.scale_cols;
    t.scales_aligned = w.scale_cols % 4 == 0 && (reinterpret_cast<uintptr_t>(w.scales) & 3) == 0;
    Fp4Loads loads;
    if (kb_begin < kb_end) load_chunk(t, kb_begin, kb_end, loads);

    const MmaStageLayout l = mma_stage_layout(1, p.k);
    const int64_t x_at = (pair / p.x_div) * p.k;
    stage_tokens<StageOrder::kEvenOdd>(p.x + x_at, p.k, 1, p.k, kE2m1E4m3Factor, l, shared,
                                       p.swiglu_up != nullptr ? p.swiglu_up + x_at : nullptr, p.limit);
    __syncthreads();
    const auto* token_scales = reinterpret_cast<const float*>(shared + l.scales_offset);
    float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    for (int kb0 = kb_begin; kb0 < kb_end; kb0 += kChunk) {
        if (kb0 != kb_begin) load_chunk(t, kb0, kb_end, loads);
        accumulate_chunk(loads, shared, token_scales, kb0, kb_end, acc);
    }
    sum_splits(acc, p.splits, reinterpret_cast<float*>(shared + l.partials_offset));
    if (split == 0) store_tile(acc, r0, p.rows, 1, p.y[which] + pair * p.rows, 0);
}

}  // namespace

bool expert_gemv_fp4_supported(int64_t k) {
    return k > 0 && k % kFp8ActBlock == 0 && mma_stage_layout(1, k).bytes <= kMaxShared;
}

void launch_expert_gemv_fp4(cudaStream_t stream, ExpertGemvFp4Params p) {
    if (p.pairs <= 0 || p.rows <= 0) return;
    const int64_t tiles = (p.rows + kMmaTileRows - 1) / kMmaTileRows;
    p.splits = mma_splits(tiles * p.pairs * p.n_weights, p.k / kFp8ActBlock, kChunk, kTargetWarps);
    const int64_t tiles_per_block = kMmaWarps / p.splits;
    const dim3 grid(static_cast<unsigned>((tiles + tiles_per_block - 1) / tiles_per_block),
                    static_cast<unsigned>(p.pairs), static_cast<unsigned>(p.n_weights));
    const int64_t shared = mma_stage_layout(1, p.k).bytes;
    if (shared > 48 * 1024) {
        cudaFuncSetAttribute(expert_gemv_fp4_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             static_cast<int>(shared));
    }
    launch_kernel(expert_gemv_fp4_kernel, grid, dim3(kMmaWarps * 32), static_cast<size_t>(shared), stream, p);
}

}  // namespace dsv4::cuda
