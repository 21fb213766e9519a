// Decode-sized linears over bf16 weights on bf16 tensor cores (kernels.h, launch_bf16_gemv): the compressors' wkv /
// wgate, the indexer's weights_proj, the router's gate at 1..kMaxBf16GemvRows tokens. The float32 GEMV
// (kernels_gemv.cu) decodes each weight to a float and multiplies it by every token in turn: at 8 tokens its
// L2-resident weights are read once a token (a block row a token) and the instructions grow with the tokens (24
// layers at batch 8 spent 1.9 ms in them on the H100, 2026-12-08). Here a warp's four mma.sync m16n8k16 steps take a
// 16-row x 64-column K block (2 KB) straight from the registers its vector loads filled, all tokens at once.
//
// The roundings are those of the bf16 GEMMs (kGemmBf16, kBf16Lt): activations rounded to bf16, the weight's bf16
// values, float32 sums. A token's sums do not depend on the other tokens of the launch (a token is a column of the mma;
// the K splits depend on the weights only): batch invariant from 1 to kMaxBf16GemvRows rows.
//
// Work: as the FP8 GEMV (kernels_gemv_fp8.cu) with one block a 16-row tile's K splits side by side, except that the
// tokens are not staged: each lane loads its own token's float inputs for the K block (L1 / L2: every warp of a K
// range reads the same ones) and rounds them to bf16 pairs as the mma wants them. Fragment order: lane (g, tq) holds
// bytes [16 tq, + 16) and [64 + 16 tq, + 16) of rows g and g + 8 of the 128-byte K block, the elements
// [8 tq, + 8) and [32 + 8 tq, + 8); its token inputs are the same elements of token g (mma_fp8.cuh: a dot product
// may list its K terms in any order both fragments share).
#include <algorithm>
#include <cstdint>

#include "backend/cuda/gemv_mma.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/mma_fp8.cuh"
#include "backend/cuda/pdl.cuh"

namespace dsv4::cuda {
namespace {

constexpr int kWarps = kMmaWarps;
constexpr int kTileRows = kMmaTileRows;
constexpr int kChunk = 2;           // K blocks of one load batch; a warp has two batches in flight (double buffering)
constexpr int kTargetWarps = 1056;  // as the FP8 GEMV: one wave of 8 warps an SM on 132 SMs

// One lane's share of kChunk K blocks: the weight bytes of rows g, g + 8 (index 1) and its token's inputs.
struct Bf16Loads {
    uint4 lo[kChunk][2], hi[kChunk][2];
    float4 x[kChunk][4];  // elements [8 tq, + 4), [8 tq + 4, + 4), [32 + 8 tq, + 4), [36 + 8 tq, + 4)
};

__device__ __forceinline__ void load_weights(const uint8_t* row_g, bool valid_g, bool valid_g8, int64_t row_bytes,
                                             int kb0, int kb_end, Bf16Loads& t) {
    const uint4 zero = make_uint4(0, 0, 0, 0);
#pragma unroll
    for (int c = 0; c < kChunk; ++c) {
        const int64_t at = static_cast<int64_t>(kb0 + c) * 2 * kBf16GemvBlock;
        const bool in = kb0 + c < kb_end;
        t.lo[c][0] = in && valid_g ? load_stream16(row_g + at) : zero;
        t.hi[c][0] = in && valid_g ? load_stream16(row_g + at + 64) : zero;
        t.lo[c][1] = in && valid_g8 ? load_stream16(row_g + 8 * row_bytes + at) : zero;
        t.hi[c][1] = in && valid_g8 ? load_stream16(row_g + 8 * row_bytes + at + 64) : zero;
    }
}

// Token g's inputs of the chunk (zero past the tokens or the range).
__device__ __forceinline__ void load_inputs(const float* x_g, bool live_g, int kb0, int kb_end, Bf16Loads& t) {
    const int tq = threadIdx.x % 4;
    const float4 zero = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll
    for (int c = 0; c < kChunk; ++c) {
        const bool in = live_g && kb0 + c < kb_end;
        const float* at = x_g + static_cast<int64_t>(kb0 + c) * kBf16GemvBlock + 8 * tq;
        t.x[c][0] = in ? __ldg(reinterpret_cast<const float4*>(at)) : zero;
        t.x[c][1] = in ? __ldg(reinterpret_cast<const float4*>(at + 4)) : zero;
        t.x[c][2] = in ? __ldg(reinterpret_cast<const float4*>(at + 32)) : zero;
        t.x[c][3] = in ? __ldg(reinterpret_cast<const float4*>(at + 36)) : zero;
    }
}

// Two floats as a bf16 pair, rounded to nearest even: the first in the low half (the lower K index).
__device__ __forceinline__ uint32_t bf16_pair(float first, float second) {
    uint32_t r;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(second), "f"(first));
    return r;
}

// d += a . b, one m16n8k16 bf16 tile with float32 accumulation (the f16 tile's fragment layout, mma_fp8.cuh).
__device__ __forceinline__ void mma_bf16(float d[4], const uint32_t a[4], uint32_t b0, uint32_t b1) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// One 8-element run of the fragment order (rows g and g + 8: w[0], w[1]; the token's inputs x0, x1) as two mma steps.
__device__ __forceinline__ void mma_run(const uint4 (&w)[2], float4 x0, float4 x1, float acc[4]) {
    const uint32_t a0[4] = {w[0].x, w[1].x, w[0].y, w[1].y}, a1[4] = {w[0].z, w[1].z, w[0].w, w[1].w};
    mma_bf16(acc, a0, bf16_pair(x0.x, x0.y), bf16_pair(x0.z, x0.w));
    mma_bf16(acc, a1, bf16_pair(x1.x, x1.y), bf16_pair(x1.z, x1.w));
}

__device__ __forceinline__ void accumulate_chunk(const Bf16Loads& t, int kb0, int kb_end, float acc[4]) {
#pragma unroll
    for (int c = 0; c < kChunk; ++c) {
        if (kb0 + c >= kb_end) break;
        mma_run(t.lo[c], t.x[c][0], t.x[c][1], acc);
        mma_run(t.hi[c], t.x[c][2], t.x[c][3], acc);
    }
}

// What a warp covers: its target, 16-row tile and K range (split); a block is kWarps / splits tiles, a tile's splits
// warps side by side.
struct Bf16Work {
    int target = 0;
    int64_t tile = 0;
    int split = 0;
};
__device__ Bf16Work warp_work(const Bf16GemvParams& p) {
    Bf16Work b;
    int local = 0;
    b.target = block_target(p, local);
    const int warp = static_cast<int>(threadIdx.x / 32);
    b.tile = static_cast<int64_t>(local) * (kWarps / p.splits) + warp / p.splits;
    b.split = warp % p.splits;
    return b;
}

__global__ void __launch_bounds__(kWarps * 32, 1) bf16_gemv_kernel(const __grid_constant__ Bf16GemvParams p) {
    __shared__ float partials[kWarps * 4 * 32];
    const int lane = threadIdx.x % 32, g = lane / 4, tq = lane % 4;
    const Bf16Work work = warp_work(p);
    const Bf16GemvTarget& target = p.targets[work.target];
    const WeightRef& w = target.w;
    const int64_t r0 = work.tile * kTileRows;
    const KRange range = split_k_range(work.split, p.splits, static_cast<int>(p.k / kBf16GemvBlock));
    const bool live = r0 < w.rows;  // the last block of a target may hold tiles past its rows
    const int kb_begin = range.begin, kb_last = live ? range.end : range.begin;
    const int64_t row_bytes = 2 * p.k;
    const uint8_t* row_g = static_cast<const uint8_t*>(w.data) + (r0 + g) * row_bytes + 16 * tq;
    const bool valid_g = r0 + g < w.rows, valid_g8 = r0 + g + 8 < w.rows;
    const float* x_g = p.x + g * p.x_stride;
    const bool live_g = g < p.m;

    Bf16Loads even, odd;  // the batches of K blocks kb_begin + 2 i kChunk and kb_begin + (2 i + 1) kChunk
    load_weights(row_g, valid_g, valid_g8, row_bytes, kb_begin, kb_last, even);  // weights: before the wait (pdl.cuh)
    pdl_begin();
    load_inputs(x_g, live_g, kb_begin, kb_last, even);
    float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    // The next batch is requested before the current one is used: two batches in flight while the sums run, in K
    // order.
    for (int kb0 = kb_begin; kb0 < kb_last; kb0 += 2 * kChunk) {
        const int kb1 = kb0 + kChunk, kb2 = kb0 + 2 * kChunk;
        if (kb1 < kb_last) {
            load_weights(row_g, valid_g, valid_g8, row_bytes, kb1, kb_last, odd);
            load_inputs(x_g, live_g, kb1, kb_last, odd);
        }
        accumulate_chunk(even, kb0, kb_last, acc);
        if (kb2 < kb_last) {
            load_weights(row_g, valid_g, valid_g8, row_bytes, kb2, kb_last, even);
            load_inputs(x_g, live_g, kb2, kb_last, even);
        }
        if (kb1 < kb_last) accumulate_chunk(odd, kb1, kb_last, acc);
    }
    sum_splits(acc, p.splits, partials);
    if (work.split == 0) store_tile(acc, r0, w.rows, p.m, target.y, target.y_stride);
}

}  // namespace

bool bf16_gemv_supported(int64_t m, int64_t k, int64_t x_stride) {
    return m >= 1 && m <= kMaxBf16GemvRows && k > 0 && k % kBf16GemvBlock == 0 && x_stride % 4 == 0;
}

void launch_bf16_gemv(cudaStream_t stream, Bf16GemvParams p) {
    if (p.n <= 0 || p.m <= 0) return;
    int64_t tiles = 0;
    for (int i = 0; i < p.n; ++i) tiles += mma_tiles_of(p.targets[i].w);
    p.splits = mma_splits(tiles, p.k / kBf16GemvBlock, kChunk, kTargetWarps);
    int blocks = 0;
    const int64_t tiles_per_block = kWarps / p.splits;
    for (int i = 0; i < p.n; ++i) {
        blocks += static_cast<int>((mma_tiles_of(p.targets[i].w) + tiles_per_block - 1) / tiles_per_block);
        p.block_end[i] = blocks;
    }
    if (blocks == 0) return;
    launch_kernel(bf16_gemv_kernel, dim3(static_cast<unsigned>(blocks)), dim3(kWarps * 32), 0, stream, p);
}

}  // namespace dsv4::cuda
