// Decode-sized linears over FP8 block-scaled weights on FP8 tensor cores (kernels_fp8.h, launch_fp8_gemv). The
// float32 GEMVs (kernels_gemv.cu, kernels_gemv_stream.cu) decode every weight byte to a float and multiply-add it:
// a few instructions a byte, which held them at 1.0-1.4 TB/s, latency- and issue-bound (ncu, performance-log.md
// 2026-12-03). Here a warp's four mma.sync steps take a 16-row x 128-column K block (2 KB) straight from the
// registers its vector loads filled: a handful of instructions per 2 KB, so the loads in flight set the rate.
//
// Work: a 16-row tile of a weight is split over `splits` warps by K blocks (summed in split order through shared
// memory); a thread block of kWarps warps covers kWarps / splits tiles of one target and stages that target's input,
// quantized per 128 (fp8_act_quant.cuh), in shared memory. Each warp requests its first kChunk K blocks of weights
// before waiting for the previous kernel (pdl.cuh): weights are never written by the kernels it waits for.
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
// Warps a launch aims for before it stops splitting K: the 16 an SM that fit at once on the H200's 132 SMs, so a
// large weight streams through one wave of warps that each keep loads in flight, instead of two waves that each
// wait a round trip for one batch (the 4096 of before: wq_b 16.8 us, 2.0 TB/s).
constexpr int kTargetWarps = 2112;
constexpr int64_t kMaxShared = 96 * 1024;

// The tiles of the weight that block `block` covers: its target and first tile.
struct BlockWork {
    int target = 0;
    int64_t tile0 = 0;
};
__device__ BlockWork block_work(const Fp8GemvParams& p) {
    BlockWork b;
    while (b.target < p.n - 1 && static_cast<int>(blockIdx.x) >= p.block_end[b.target]) ++b.target;
    const int first = b.target == 0 ? 0 : p.block_end[b.target - 1];
    b.tile0 = static_cast<int64_t>(blockIdx.x - first) * (kWarps / p.splits);
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
__device__ __forceinline__ void accumulate_chunk(const TileLoads& t, const uint8_t* codes, const float* scales,
                                                 const MmaStageLayout& l, int m, int64_t blocks, int kb0, int kb_end,
                                                 float acc[4]) {
    const int lane = threadIdx.x % 32, g = lane / 4, tq = lane % 4;
    const int c0 = 2 * tq, c1 = 2 * tq + 1;  // this lane's token columns of the result
#pragma unroll
    for (int c = 0; c < kChunk; ++c) {
        const int kb = kb0 + c;
        if (kb >= kb_end) break;
        uint4 x_lo = make_uint4(0, 0, 0, 0), x_hi = x_lo;
        if (g < m) {
            const uint8_t* at = codes + g * l.code_stride + static_cast<int64_t>(kb) * kFp8ActBlock + 16 * tq;
            x_lo = *reinterpret_cast<const uint4*>(at);
            x_hi = *reinterpret_cast<const uint4*>(at + 64);
        }
        float d[4];
        mma_kblock_e4m3(t.lo[c], t.hi[c], x_lo, x_hi, d);
        const float ws = decode_ue8m0(t.scale[c]);
        const float f0 = c0 < m ? ws * scales[c0 * blocks + kb] : 0.0f;
        const float f1 = c1 < m ? ws * scales[c1 * blocks + kb] : 0.0f;
        acc[0] = fmaf(d[0], f0, acc[0]);
        acc[1] = fmaf(d[1], f1, acc[1]);
        acc[2] = fmaf(d[2], f0, acc[2]);
        acc[3] = fmaf(d[3], f1, acc[3]);
    }
}

__global__ void __launch_bounds__(kWarps * 32, 2) fp8_gemv_kernel(const __grid_constant__ Fp8GemvParams p) {
    extern __shared__ __align__(16) uint8_t shared[];
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, tq = lane % 4;
    const BlockWork work = block_work(p);
    const Fp8GemvTarget& target = p.targets[work.target];
    const WeightRef& w = target.w;
    const int64_t tile = work.tile0 + warp / p.splits;
    const int64_t r0 = tile * kTileRows;
    const int split = warp % p.splits;
    const int blocks = static_cast<int>(p.k / kFp8ActBlock);
    const int per_split = (blocks + p.splits - 1) / p.splits;
    const int kb_begin = std::min(blocks, split * per_split), kb_end = std::min(blocks, kb_begin + per_split);
    const bool live = r0 < w.rows;  // the last block of a target may hold tiles past its rows
    const bool valid_g = r0 + g < w.rows, valid_g8 = r0 + g + 8 < w.rows;
    const uint8_t* row_g = static_cast<const uint8_t*>(w.data) + (r0 + g) * p.k + 16 * tq;
    const uint8_t* w_scales = w.scales + (live ? (r0 / 128) * w.scale_cols : 0);
    const int kb_last = live ? kb_end : kb_begin;

    TileLoads even, odd;  // the batches of K blocks kb_begin + 2 i kChunk and kb_begin + (2 i + 1) kChunk
    load_chunk(row_g, w_scales, valid_g, valid_g8, p.k, kb_begin, kb_last, even);  // before the wait (see above)
    pdl_begin();
    const MmaStageLayout l = mma_stage_layout(p.m, p.k);
    if (p.quantized.codes != nullptr) {
        stage_quantized(p.quantized, target.col0, p.m, p.k, l, shared);
    } else {
        stage_tokens<StageOrder::kNatural>(target.x, p.x_stride, p.m, p.k, 1.0f, l, shared, p.swiglu_up, p.limit);
    }
    __syncthreads();

    const auto* scales = reinterpret_cast<const float*>(shared + l.scales_offset);
    float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    // The next batch is requested before the current one is used: two batches in flight while the sums run, in K
    // order (the same sums, in the same order, as one batch at a time).
    for (int kb0 = kb_begin; kb0 < kb_last; kb0 += 2 * kChunk) {
        const int kb1 = kb0 + kChunk, kb2 = kb0 + 2 * kChunk;
        if (kb1 < kb_last) load_chunk(row_g, w_scales, valid_g, valid_g8, p.k, kb1, kb_last, odd);
        accumulate_chunk(even, shared, scales, l, p.m, blocks, kb0, kb_last, acc);
        if (kb2 < kb_last) load_chunk(row_g, w_scales, valid_g, valid_g8, p.k, kb2, kb_last, even);
        if (kb1 < kb_last) accumulate_chunk(odd, shared, scales, l, p.m, blocks, kb1, kb_last, acc);
    }
    sum_splits(acc, p.splits, reinterpret_cast<float*>(shared + l.partials_offset));
    if (split == 0) store_tile(acc, r0, w.rows, p.m, target.y, target.y_stride);
}

int64_t tiles_of(const WeightRef& w) {
    return (w.rows + kTileRows - 1) / kTileRows;
}

}  // namespace

bool fp8_gemv_supported(int64_t m, int64_t k) {
    return m >= 1 && m <= kMaxFp8GemvRows && k > 0 && k % kFp8ActBlock == 0 &&
           mma_stage_layout(static_cast<int>(m), k).bytes <= kMaxShared;
}

void launch_fp8_gemv(cudaStream_t stream, Fp8GemvParams p) {
    if (p.n <= 0 || p.m <= 0) return;
    int64_t tiles = 0;
    for (int i = 0; i < p.n; ++i) tiles += tiles_of(p.targets[i].w);
    p.splits = mma_splits(tiles, p.k / kFp8ActBlock, kChunk, kTargetWarps);
    int blocks = 0;
    for (int i = 0; i < p.n; ++i) {
        const int64_t tiles_per_block = kWarps / p.splits;
        blocks += static_cast<int>((tiles_of(p.targets[i].w) + tiles_per_block - 1) / tiles_per_block);
        p.block_end[i] = blocks;
    }
    if (blocks == 0) return;
    const int64_t shared = mma_stage_layout(p.m, p.k).bytes;
    if (shared > 48 * 1024) {
        cudaFuncSetAttribute(fp8_gemv_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(shared));
    }
    launch_kernel(fp8_gemv_kernel, dim3(static_cast<unsigned>(blocks)), dim3(kWarps * 32), static_cast<size_t>(shared),
                  stream, p);
}

}  // namespace dsv4::cuda
