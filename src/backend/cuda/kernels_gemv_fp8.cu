// Decode-sized linears over FP8 block-scaled weights on FP8 tensor cores (kernels_fp8.h, launch_fp8_gemv). The
// float32 GEMVs (kernels_gemv.cu, kernels_gemv_stream.cu) decode every weight byte to a float and multiply-add it:
// a few instructions a byte, which held them at 1.0-1.4 TB/s, latency- and issue-bound (ncu, performance-log.md
// 2026-12-03). Here a warp's four mma.sync steps take a 16-row x 128-column K block (2 KB) straight from the
// registers its vector loads filled: a handful of instructions per 2 KB, so the loads in flight set the rate.
//
// Work: a 16-row tile of a weight is split over `splits` warps by K blocks, and each block stages its target's
// input, quantized per 128 (fp8_act_quant.cuh), in shared memory. Either a block holds kWarps / splits tiles with
// their split warps side by side (the split sums meet in shared memory), or, for one token and K >= 4096 (see
// splits_across_blocks), a block holds a 128-row group (a tile a warp) over one K range and stages only that range:
// the in-kernel quantization is then paid once per 128 rows and range instead of once per tile (wo_b's blocks each
// quantized all 8192 inputs for one tile, more instructions than the tile's sums), and the group's last block to
// arrive adds the ranges' sums from global memory. Both add the splits in split order: the same bits. Each warp
// requests its first kChunk K blocks of weights before waiting for the previous kernel (pdl.cuh): weights are never
// written by the kernels it waits for.
#include <algorithm>
#include <cstdint>

#include "backend/cuda/gemv_mma.cuh"
#include "backend/cuda/kernels_fp8.h"
#include "backend/cuda/mma_fp8.cuh"
#include "backend/cuda/pdl.cuh"

namespace dsv4::cuda {
namespace {

constexpr int kWarps = kMmaWarps;
constexpr int kTileRows = kMmaTileRows;
constexpr int kChunk = 2;  // K blocks of one load batch; a warp has two batches in flight (double buffering)
// Warps a launch aims for before it stops splitting K: 8 an SM on the H200's 132 SMs, so a large weight streams
// through one wave of warps that each keep loads in flight (the 4096 of before, two waves that each waited a round
// trip for one batch: wq_b 16.8 us, 2.0 TB/s). Half the 16 an SM that fit at once: fewer K splits, fewer partial sums
// to add; batch-1 decode +1.3-1.5% on the H200 (run51), +0.5% on the H100 (run55, alternated) against 2,112.
constexpr int kTargetWarps = 1056;
constexpr int64_t kMaxShared = 96 * 1024;

constexpr int kGroupRows = kWarps * kTileRows;  // rows of a block: one 128-row weight scale block

// What a warp covers: its target, 16-row tile and K range (split). kAcross: a block is a 128-row group (a tile a
// warp) over one of the group's `splits` K ranges; else a block is kWarps / splits tiles, a tile's splits warps side
// by side.
struct WarpWork {
    int target = 0;
    int64_t group = 0;  // kAcross: the block's 128-row group
    int64_t tile = 0;
    int split = 0;
};
template <bool kAcross>
__device__ WarpWork warp_work(const Fp8GemvParams& p) {
    WarpWork b;
    int local = 0;
    b.target = block_target(p, local);
    const int warp = static_cast<int>(threadIdx.x / 32);
    if constexpr (kAcross) {
        b.group = local / p.splits;
        b.split = local % p.splits;
        b.tile = b.group * kWarps + warp;
    } else {
        b.tile = static_cast<int64_t>(local) * (kWarps / p.splits) + warp / p.splits;
        b.split = warp % p.splits;
    }
    return b;
}

// One lane's share of a warp's K blocks: bytes [16 tq, + 16) and [64 + 16 tq, + 16) of rows g and g + 8 of the
// tile (mma_fp8.cuh), kChunk blocks at a time. Rows past the weight read as zero.
struct TileLoads {
    uint4 lo[kChunk][2], hi[kChunk][2];
    uint8_t scale[kChunk];  // the tile's UE8M0 weight scale of each block
};
__device__ __forceinline__ void load_chunk(const uint8_t* row_g, const uint8_t* w_scales, bool valid_g, bool valid_g8,
                                           int64_t k, int kb0, int kb_end, TileLoads& t) {
#pragma unroll
    for (int c = 0; c < kChunk; ++c) {
        const int64_t at = static_cast<int64_t>(kb0 + c) * kFp8ActBlock;
        const bool in = kb0 + c < kb_end;
        const uint4 zero = make_uint4(0, 0, 0, 0);
        t.scale[c] = in ? w_scales[kb0 + c] : 0;
        t.lo[c][0] = in && valid_g ? load_stream16(row_g + at) : zero;
        t.hi[c][0] = in && valid_g ? load_stream16(row_g + at + 64) : zero;
        t.lo[c][1] = in && valid_g8 ? load_stream16(row_g + 8 * k + at) : zero;
        t.hi[c][1] = in && valid_g8 ? load_stream16(row_g + 8 * k + at + 64) : zero;
    }
}

// acc += this chunk's K blocks: per block the mma dot products times weight scale x token scale (exact: both powers
// of two), added in float32.
// kb indexes the weight; the staged tokens hold blocks from `staged0` on.
__device__ __forceinline__ void accumulate_chunk(const TileLoads& t, const uint8_t* codes, const float* scales,
                                                 const MmaStageLayout& l, int m, int64_t blocks, int staged0, int kb0,
                                                 int kb_end, float acc[4]) {
    const int lane = threadIdx.x % 32, g = lane / 4, tq = lane % 4;
    const int c0 = 2 * tq, c1 = 2 * tq + 1;  // this lane's token columns of the result
#pragma unroll
    for (int c = 0; c < kChunk; ++c) {
        const int kb = kb0 + c;
        if (kb >= kb_end) break;
        uint4 x_lo = make_uint4(0, 0, 0, 0), x_hi = x_lo;
        if (g < m) {
            const uint8_t* at = codes + g * l.code_stride + static_cast<int64_t>(kb - staged0) * kFp8ActBlock + 16 * tq;
            x_lo = *reinterpret_cast<const uint4*>(at);
            x_hi = *reinterpret_cast<const uint4*>(at + 64);
        }
        float d[4];
        mma_kblock_e4m3(t.lo[c], t.hi[c], x_lo, x_hi, d);
        const float ws = decode_ue8m0(t.scale[c]);
        const float f0 = c0 < m ? ws * scales[c0 * blocks + kb - staged0] : 0.0f;
        const float f1 = c1 < m ? ws * scales[c1 * blocks + kb - staged0] : 0.0f;
        acc[0] = fmaf(d[0], f0, acc[0]);
        acc[1] = fmaf(d[1], f1, acc[1]);
        acc[2] = fmaf(d[2], f0, acc[2]);
        acc[3] = fmaf(d[3], f1, acc[3]);
    }
}

// The block's partial sums of its split, then (in the group's last block to arrive) every split's added in split
// order and stored. All threads of the block call.
__device__ void sum_splits_across_blocks(const Fp8GemvParams& p, const WarpWork& b, const Fp8GemvTarget& target,
                                         const float acc[4], int64_t r0) {
    const int lane = threadIdx.x % 32, g = lane / 4, tq = lane % 4;
    const int64_t rows = target.w.rows;
    float* partials = p.partials + p.partial0[b.target];  // [split][row][token]
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        const int64_t row = r0 + g + (i >= 2 ? 8 : 0);
        const int token = 2 * tq + (i & 1);
        if (row < rows && token < p.m) partials[(b.split * rows + row) * p.m + token] = acc[i];
    }
    if (!last_to_arrive(p.arrivals + p.arrival0[b.target] + b.group, p.splits)) return;
    const int64_t row0 = b.group * kGroupRows;
    for (int i = static_cast<int>(threadIdx.x); i < kGroupRows * p.m; i += static_cast<int>(blockDim.x)) {
        const int64_t row = row0 + i / p.m;
        const int token = i % p.m;
        if (row >= rows) break;
        target.y[token * target.y_stride + row] = split_order_sum(partials + row * p.m + token, p.splits, rows * p.m);
    }
}

template <bool kAcross>
__global__ void __launch_bounds__(kWarps * 32, 2) fp8_gemv_kernel(const __grid_constant__ Fp8GemvParams p) {
    extern __shared__ __align__(16) uint8_t shared[];
    const int lane = threadIdx.x % 32, g = lane / 4, tq = lane % 4;
    const WarpWork work = warp_work<kAcross>(p);
    const Fp8GemvTarget& target = p.targets[work.target];
    const WeightRef& w = target.w;
    const int64_t r0 = work.tile * kTileRows;
    const int blocks = static_cast<int>(p.k / kFp8ActBlock);
    const KRange range = split_k_range(work.split, p.splits, blocks);
    const int kb_begin = range.begin, kb_end = range.end;
    const bool live = r0 < w.rows;  // the last block of a target may hold tiles past its rows
    const bool valid_g = r0 + g < w.rows, valid_g8 = r0 + g + 8 < w.rows;
    const uint8_t* row_g = static_cast<const uint8_t*>(w.data) + (r0 + g) * p.k + 16 * tq;
    const uint8_t* w_scales = w.scales + (live ? (r0 / kGroupRows) * w.scale_cols : 0);
    const int kb_last = live ? kb_end : kb_begin;

    TileLoads even, odd;  // the batches of K blocks kb_begin + 2 i kChunk and kb_begin + (2 i + 1) kChunk
    load_chunk(row_g, w_scales, valid_g, valid_g8, p.k, kb_begin, kb_last, even);  // before the wait (see above)
    pdl_begin();
    // The staged inputs: the block's K range (kAcross), else all of K (its warps' ranges differ).
    const int staged0 = kAcross ? kb_begin : 0, staged_blocks = kAcross ? kb_end - kb_begin : blocks;
    const int64_t k_staged = static_cast<int64_t>(staged_blocks) * kFp8ActBlock;
    const MmaStageLayout l = mma_stage_layout(p.m, k_staged);
    const int64_t at = static_cast<int64_t>(staged0) * kFp8ActBlock;
    if (p.quantized.codes != nullptr) {
        stage_quantized(p.quantized, target.col0 + at, p.m, k_staged, l, shared);
    } else {
        stage_tokens<StageOrder::kNatural>(target.x + at, p.x_stride, p.m, k_staged, 1.0f, l, shared,
                                           p.swiglu_up != nullptr ? p.swiglu_up + at : nullptr, p.limit);
    }
    __syncthreads();

    const auto* scales = reinterpret_cast<const float*>(shared + l.scales_offset);
    float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    // The next batch is requested before the current one is used: two batches in flight while the sums run, in K
    // order (the same sums, in the same order, as one batch at a time).
    for (int kb0 = kb_begin; kb0 < kb_last; kb0 += 2 * kChunk) {
        const int kb1 = kb0 + kChunk, kb2 = kb0 + 2 * kChunk;
        if (kb1 < kb_last) load_chunk(row_g, w_scales, valid_g, valid_g8, p.k, kb1, kb_last, odd);
        accumulate_chunk(even, shared, scales, l, p.m, staged_blocks, staged0, kb0, kb_last, acc);
        if (kb2 < kb_last) load_chunk(row_g, w_scales, valid_g, valid_g8, p.k, kb2, kb_last, even);
        if (kb1 < kb_last) accumulate_chunk(odd, shared, scales, l, p.m, staged_blocks, staged0, kb1, kb_last, acc);
    }
    if constexpr (kAcross) {
        if (p.splits == 1) {
            store_tile(acc, r0, w.rows, p.m, target.y, target.y_stride);
            return;
        }
        sum_splits_across_blocks(p, work, target, acc, r0);
    } else {
        sum_splits(acc, p.splits, reinterpret_cast<float*>(shared + l.partials_offset));
        if (work.split == 0) store_tile(acc, r0, w.rows, p.m, target.y, target.y_stride);
    }
}

}  // namespace

bool fp8_gemv_supported(int64_t m, int64_t k) {
    return m >= 1 && m <= kMaxFp8GemvRows && k > 0 && k % kFp8ActBlock == 0 &&
           mma_stage_layout(static_cast<int>(m), k).bytes <= kMaxShared;
}

int64_t groups_of(const WeightRef& w) {
    return (w.rows + kGroupRows - 1) / kGroupRows;
}

int64_t fp8_gemv_partials(const Fp8GemvParams& p) {
    int64_t rows = 0;
    for (int i = 0; i < p.n; ++i) rows += p.targets[i].w.rows;
    return rows * p.m * kMaxSplits;
}

int fp8_gemv_arrivals(const Fp8GemvParams& p) {
    int64_t groups = 0;
    for (int i = 0; i < p.n; ++i) groups += groups_of(p.targets[i].w);
    return static_cast<int>(groups);
}

// Splits across blocks where a block's quantization of its inputs would outweigh its sums: one token (quantized in
// the kernel) and K >= 4096 (wo_a, wo_b, the shared expert's up projections: 1.1-1.2x faster); below that the last
// block's extra round trips cost more than the quantization saved (wq_b 13.8 -> 16.2 us, H200 2026-12-04).
bool splits_across_blocks(const Fp8GemvParams& p) {
    return p.m < kFp8GemvQuantizeRows && p.quantized.codes == nullptr && p.k >= 4096;
}

void launch_fp8_gemv(cudaStream_t stream, Fp8GemvParams p) {
    if (p.n <= 0 || p.m <= 0) return;
    int64_t tiles = 0;
    for (int i = 0; i < p.n; ++i) tiles += mma_tiles_of(p.targets[i].w);
    p.splits = mma_splits(tiles, p.k / kFp8ActBlock, kChunk, p.target_warps > 0 ? p.target_warps : kTargetWarps);
    const bool across = splits_across_blocks(p);
    int blocks = 0, arrivals = 0;
    int64_t partials = 0;
    for (int i = 0; i < p.n; ++i) {
        p.partial0[i] = partials;
        p.arrival0[i] = arrivals;
        partials += p.targets[i].w.rows * p.m * p.splits;
        arrivals += static_cast<int>(groups_of(p.targets[i].w));
        const int64_t tiles_per_block = kWarps / p.splits;
        blocks += static_cast<int>(across ? groups_of(p.targets[i].w) * p.splits
                                          : (mma_tiles_of(p.targets[i].w) + tiles_per_block - 1) / tiles_per_block);
        p.block_end[i] = blocks;
    }
    if (blocks == 0) return;
    const auto kernel = across ? fp8_gemv_kernel<true> : fp8_gemv_kernel<false>;
    const int64_t k_staged = across ? p.k / p.splits + kFp8ActBlock : p.k;  // the widest staged range
    const int64_t shared = mma_stage_layout(p.m, k_staged).bytes;
    if (shared > 48 * 1024) {
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(shared));
    }
    launch_kernel(kernel, dim3(static_cast<unsigned>(blocks)), dim3(kWarps * 32), static_cast<size_t>(shared), stream,
                  p);
}

}  // namespace dsv4::cuda
