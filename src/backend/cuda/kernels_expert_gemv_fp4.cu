// The routed experts' per-pair GEMVs on tensor cores, FP4 weights (W4A8; kernels.h, launch_expert_gemv_fp4). Hopper
// has no FP8 mma.sync: ptxas turns an e4m3 m16n8k32 into byte-pair conversions to f16 and two f16 HMMAs (ncu SASS,
// performance-log.md 2026-12-04), so this kernel multiplies in f16 itself: every e2m1 weight (as e4m3 2^6 times too
// small, mma_fp8.cuh's exact table) and every e4m3 activation code is exact in f16, products are exact in the float32
// accumulator.
//
// One token per pair, so seven of the mma's eight columns would idle; instead column n holds scale group n. Lane
// (g, tq) loads 16 bytes a row for rows g and g + 8 of its 16-row tile: all of scale group tq of the 128-wide K
// block, one vector load a row (the e4m3 GEMV's 4-byte loads a group were a load and a round of address math per
// word). In each mma step lane tq contributes four K positions of group tq, and the B fragment holds the token's
// values of group tq in column tq and zeros elsewhere (only lanes g == tq load them), so after a block's eight steps
// D[r][n] is row r's sum over group n alone: the per-32 weight scales apply exactly, one per (row, column), with no
// exponent window. Lanes tq 0 and 1 hold columns 0..3; their two column sums meet by one shuffle at the end.
#include <algorithm>
#include <cstdint>

#include "backend/cuda/gemv_mma.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/mma_fp8.cuh"
#include "backend/cuda/pdl.cuh"

namespace dsv4::cuda {
namespace {

constexpr int kChunk = 2;           // K blocks of one load batch; two batches in flight (double buffering)
constexpr int kTargetWarps = 2112;  // one wave of 16 warps an SM on the H200's 132 SMs (1056 and 4224 measured slower)
constexpr int kCodeBytes = 2;       // staged activations: f16 values (StageOrder::kF16)
constexpr int64_t kMaxShared = 96 * 1024;

// One lane's loads of a K block: scale group tq of rows g and g + 8 (16 bytes each) and the rows' four group scales.
struct BlockLoads {
    uint4 w[2];
    uint32_t scales[2];
};

// This lane's rows g and g + 8 of the tile at the warp's first K block: weight bytes from its group (16 tq) and the
// rows' scale words. A row past the weight reads the last row (its sums are never stored).
struct TileRows {
    const uint8_t* data[2] = {};
    const uint8_t* scales[2] = {};
};

// The scale word of 4 groups; kAligned: one 4-byte load (the rows' scales 4-byte aligned, as the checkpoint's are),
// else four byte loads. A template parameter, not a predicate: predicated-off loads still take issue slots.
template <bool kAligned>
__device__ __forceinline__ uint32_t load_scale_word(const uint8_t* p) {
    if constexpr (kAligned) {
        return __ldg(reinterpret_cast<const uint32_t*>(p));
    } else {
        return static_cast<uint32_t>(p[0]) | static_cast<uint32_t>(p[1]) << 8 | static_cast<uint32_t>(p[2]) << 16 |
               static_cast<uint32_t>(p[3]) << 24;
    }
}

// K blocks kb, kb + 1, .. (kChunk of them, relative to the warp's first block). kClamp: a block at or past `last`
// reads block `last` instead (loaded, never used: the sums stop before it), for the warp's final batches only; the
// others take constant offsets from the row pointers, no address arithmetic a load.
template <bool kAligned, bool kClamp>
__device__ __forceinline__ void load_chunk(const TileRows& t, int kb, int last, BlockLoads (&l)[kChunk]) {
#pragma unroll
    for (int c = 0; c < kChunk; ++c) {
        const int b = kClamp ? min(kb + c, last) : kb + c;
#pragma unroll
        for (int r = 0; r < 2; ++r) {
            l[c].w[r] = load_stream16(t.data[r] + b * (kFp8ActBlock / 2));
            l[c].scales[r] = load_scale_word<kAligned>(t.scales[r] + b * 4);
        }
    }
}

// The two group scales of a row that this lane's columns (2 (tq & 1), + 1) take; `shift` is 16 (tq & 1). UE8M0 bytes
// 1..254 are 2^(e - 127) by a shift into the float exponent; 0 (2^-127) and 255 (NaN) take decode_ue8m0.
__device__ __forceinline__ float2 column_scales(uint32_t word, int shift) {
    const uint32_t lo = (word >> shift) & 0xffu, hi = (word >> (shift + 8)) & 0xffu;
    if (lo - 1u < 254u && hi - 1u < 254u) return make_float2(__uint_as_float(lo << 23), __uint_as_float(hi << 23));
    return make_float2(decode_ue8m0(static_cast<uint8_t>(lo)), decode_ue8m0(static_cast<uint8_t>(hi)));
}

// The block's D[r][n] = row r's sum over scale group n (n < 4), eight m16n8k16 steps: word j of this lane's 16 bytes
// gives steps 2 j (its elements 0, 1 | 2, 3 at K 2 tq, + 1 | 2 tq + 8, + 9) and 2 j + 1 (4, 5 | 6, 7), matching the
// staged B order (the elements in order). Lanes other than g == tq give zeros to B. (Before the sign-split layout a
// step held elements 0, 2 | 1, 3: the same products in other K slots of the same step, which the tensor cores sum as a
// set, kernels_expert_rs.cu.)
__device__ __forceinline__ void block_group_sums(const BlockLoads& l, const uint8_t* codes, bool b_lane, float d[4]) {
    const uint32_t* rg = &l.w[0].x;
    const uint32_t* rg8 = &l.w[1].x;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
        const Fp4Bytes e = fp4_word_to_e4m3_down6(rg[j]), e8 = fp4_word_to_e4m3_down6(rg8[j]);
        uint4 b = make_uint4(0, 0, 0, 0);
        if (b_lane) b = *reinterpret_cast<const uint4*>(codes + 16 * j);
        uint32_t a_lo[4], a_hi[4];  // rows g, g + 8: elements (0, 1), (2, 3) | (4, 5), (6, 7)
        e4m3x4_to_f16x2x2(e.lo, a_lo[0], a_lo[2]);
        e4m3x4_to_f16x2x2(e8.lo, a_lo[1], a_lo[3]);
        e4m3x4_to_f16x2x2(e.hi, a_hi[0], a_hi[2]);
        e4m3x4_to_f16x2x2(e8.hi, a_hi[1], a_hi[3]);
        mma_f16(d, a_lo, b.x, b.y);
        mma_f16(d, a_hi, b.z, b.w);
    }
}

// acc[row g, row g + 8] += the chunk's blocks: each column's group sum times its row's group scale, a block's two
// columns summed, times the token's block scale.
__device__ __forceinline__ void accumulate_chunk(const BlockLoads (&l)[kChunk], const uint8_t* codes,
                                                 const float* token_scales, int kb0, int kb_end, float acc[2]) {
    const int lane = threadIdx.x % 32, g = lane / 4, tq = lane % 4, shift = 16 * (tq & 1);
    const bool b_lane = g == tq;
#pragma unroll
    for (int c = 0; c < kChunk; ++c) {
        const int kb = kb0 + c;
        if (kb >= kb_end) break;
        float d[4] = {0.0f, 0.0f, 0.0f, 0.0f};
        block_group_sums(l[c], codes + kb * (kFp8ActBlock * kCodeBytes) + 64 * tq, b_lane, d);
        const float2 sg = column_scales(l[c].scales[0], shift), sg8 = column_scales(l[c].scales[1], shift);
        const float f = token_scales[kb];  // the token's block scale (times 2^6, the expansion's offset)
        acc[0] = fmaf(fmaf(d[0], sg.x, d[1] * sg.y), f, acc[0]);
        acc[1] = fmaf(fmaf(d[2], sg8.x, d[3] * sg8.y), f, acc[1]);
    }
}

// The warp's K blocks [kb_begin, kb_end) of its tile into acc, two batches of loads in flight (the first, `even`,
// already requested): the next batch is requested before the current one is used. Batches wholly inside the range
// load without clamping.
template <bool kAligned>
__device__ void tile_sums(const TileRows& t, BlockLoads (&even)[kChunk], const uint8_t* codes,
                          const float* token_scales, int kb_begin, int kb_end, float acc[2]) {
    BlockLoads odd[kChunk];
    const int n = kb_end - kb_begin, last = n - 1;  // t's pointers are at kb_begin: block indices relative to it
    TileRows at = t;                                // at block i0, advanced a round at a time
    for (int i0 = 0; i0 < n; i0 += 2 * kChunk) {
        const int i1 = i0 + kChunk, i2 = i0 + 2 * kChunk;
        if (i2 + kChunk <= n) {  // both batches requested here lie inside the range: constant offsets from `at`
            load_chunk<kAligned, false>(at, kChunk, last, odd);
            accumulate_chunk(even, codes, token_scales, kb_begin + i0, kb_end, acc);
            load_chunk<kAligned, false>(at, 2 * kChunk, last, even);
            accumulate_chunk(odd, codes, token_scales, kb_begin + i1, kb_end, acc);
        } else {
            if (i1 < n) load_chunk<kAligned, true>(t, i1, last, odd);
            accumulate_chunk(even, codes, token_scales, kb_begin + i0, kb_end, acc);
            if (i2 < n) load_chunk<kAligned, true>(t, i2, last, even);
            if (i1 < n) accumulate_chunk(odd, codes, token_scales, kb_begin + i1, kb_end, acc);
        }
#pragma unroll
        for (int r = 0; r < 2; ++r) {
            at.data[r] += 2 * kChunk * (kFp8ActBlock / 2);
            at.scales[r] += 2 * kChunk * 4;
        }
    }
}

constexpr int kGroupRows = kMmaWarps * kMmaTileRows;  // rows of a block: a 16-row tile a warp

__host__ __device__ inline int64_t row_groups(int64_t rows) {
    return (rows + kGroupRows - 1) / kGroupRows;
}

// This block's rows of the group: lane tq 0 of each warp holds its tile's rows g and g + 8.
__device__ __forceinline__ void write_rows(float* out, int64_t group, int64_t rows, const float acc[2]) {
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, tq = lane % 4;
    const int64_t r0 = group * kGroupRows + warp * kMmaTileRows;
    if (tq == 0 && r0 + g < rows) out[r0 + g] = acc[0];
    if (tq == 0 && r0 + g + 8 < rows) out[r0 + g + 8] = acc[1];
}

// A token's combined row: each pair's K ranges' partials ([pair][split][row] from `first`, `rows` apart) in split
// order, the pairs in pair order with their routing weights (launch_combine's weight-after arithmetic), then the
// shared expert's row. Up to kBatchPairs pairs of up to kBatchSplits ranges (decode) have every load issued before
// the first add (the same arithmetic: one L2 round trip, not one a pair; loads past the last pair or range re-read
// it, so no branch comes between them); more go pair by pair.
constexpr int kBatchPairs = 8, kBatchSplits = 2;
__device__ float combine_row(const ExpertGemvFp4Params& p, const float* first, int64_t token, int64_t row) {
    const float* weights = p.combine_weights + token * p.combine_k;
    const int64_t pair_stride = p.splits * p.rows;
    float out = 0.0f;
    if (p.combine_k <= kBatchPairs && p.splits <= kBatchSplits) {
        float v[kBatchPairs][kBatchSplits], w[kBatchPairs];
#pragma unroll
        for (int j = 0; j < kBatchPairs; ++j) {
            const int jc = min(j, p.combine_k - 1);
            w[j] = weights[jc];
#pragma unroll
            for (int s = 0; s < kBatchSplits; ++s) {
                v[j][s] = __ldcg(first + jc * pair_stride + min(s, p.splits - 1) * p.rows);
            }
        }
        const float shared = p.combine_shared != nullptr ? p.combine_shared[token * p.rows + row] : 0.0f;
#pragma unroll
        for (int j = 0; j < kBatchPairs; ++j) {
            if (j >= p.combine_k) continue;
            float routed = v[j][0];
#pragma unroll
            for (int s = 1; s < kBatchSplits; ++s) {
                if (s < p.splits) routed += v[j][s];
            }
            out = combine_add(out, routed, w[j]);
        }
        return p.combine_shared != nullptr ? out + shared : out;
    }
    for (int j = 0; j < p.combine_k; ++j) {
        out = combine_add(out, split_order_sum(first + j * pair_stride, p.splits, p.rows), weights[j]);
    }
    if (p.combine_shared != nullptr) out += p.combine_shared[token * p.rows + row];
    return out;
}

// The rows' results. Without a combine: with one K range stored, else written as partials and added in split order by
// the row group's last block to arrive. With the combine (W2): written as partials, and the last of the token's k x
// splits blocks of the group to arrive adds each pair's ranges in split order, then the pairs in pair order with their
// routing weights (launch_combine's weight-after arithmetic), then the shared expert's rows. All threads of the block
// call.
__device__ void store_rows(const ExpertGemvFp4Params& p, int64_t pair, int which, int64_t group, int split,
                           const float acc[2]) {
    const int64_t groups = row_groups(p.rows);
    if (p.combine_y == nullptr && p.splits == 1) return write_rows(p.y[which] + pair * p.rows, group, p.rows, acc);
    float* partials = p.partials + (which * p.pairs + pair) * p.splits * p.rows;  // [split][row]
    write_rows(partials + split * p.rows, group, p.rows, acc);
    const int64_t row = group * kGroupRows + threadIdx.x;
    if (p.combine_y == nullptr) {
        if (!last_to_arrive(p.arrivals + (which * p.pairs + pair) * groups + group, p.splits)) return;
        if (threadIdx.x < kGroupRows && row < p.rows) {
            p.y[which][pair * p.rows + row] = split_order_sum(partials + row, p.splits, p.rows);
        }
        return;
    }
    const int64_t token = pair / p.combine_k;
    if (!last_to_arrive(p.arrivals + token * groups + group, p.combine_k * p.splits)) return;
    if (threadIdx.x >= kGroupRows || row >= p.rows) return;
    p.combine_y[token * p.rows + row] =
        combine_row(p, p.partials + token * p.combine_k * p.splits * p.rows + row, token, row);
}

// Grid: (128-row groups x K splits, pairs, weights). Every block waits for the router before it reads its pair's
// expert id. A block stages only its K range of the token (its eight tiles share it).
__global__ void __launch_bounds__(kMmaWarps * 32)
    expert_gemv_fp4_kernel(const __grid_constant__ ExpertGemvFp4Params p) {
    extern __shared__ __align__(16) uint8_t shared[];
    pdl_begin();
    const int64_t pair = blockIdx.y;
    const int which = static_cast<int>(blockIdx.z);
    const int32_t e = p.ids[pair];
    if (e < 0 || e >= p.n_experts) {  // uniform over the pair: none of its blocks counts itself in for the splits
        if (threadIdx.x == 0 && blockIdx.x == 0 && which == 0) flag_error(p.meta, kErrorExpertId);
        // The token's combine still counts the pair's blocks (zero rows; the step fails at its check).
        if (p.combine_y != nullptr) {
            const float zero[2] = {0.0f, 0.0f};
            store_rows(p, pair, 0, blockIdx.x / p.splits, static_cast<int>(blockIdx.x % p.splits), zero);
        }
        return;
    }
    const WeightRef w = p.tables[which][e];
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, tq = lane % 4;
    const int64_t group = blockIdx.x / p.splits;
    const int split = static_cast<int>(blockIdx.x % p.splits);
    const int64_t r0 = group * kGroupRows + warp * kMmaTileRows;
    const int blocks = static_cast<int>(p.k / kFp8ActBlock);
    const int per_split = (blocks + p.splits - 1) / p.splits;
    const int kb_begin = std::min(blocks, split * per_split);
    const int kb_range = std::min(blocks, kb_begin + per_split) - kb_begin;  // the block's staged K blocks
    const int kb_end = kb_begin + (r0 < p.rows ? kb_range : 0);              // tiles past the rows: none

    const int64_t row_bytes = p.k / 2;
    const bool aligned = w.scale_cols % 4 == 0 && (reinterpret_cast<uintptr_t>(w.scales) & 3) == 0;
    TileRows t;
#pragma unroll
    for (int r = 0; r < 2; ++r) {
        const int64_t row = std::min(r0 + g + 8 * r, p.rows - 1);
        t.data[r] = static_cast<const uint8_t*>(w.data) + row * row_bytes + kb_begin * (kFp8ActBlock / 2) + 16 * tq;
        t.scales[r] = w.scales + row * w.scale_cols + kb_begin * 4;
    }
    BlockLoads even[kChunk];  // the first batch, requested before the token is staged
    const int last = kb_end - kb_begin - 1;
    if (last >= 0) {
        if (aligned) {
            load_chunk<true, true>(t, 0, last, even);
        } else {
            load_chunk<false, true>(t, 0, last, even);
        }
    }

    const int64_t k_range = static_cast<int64_t>(kb_range) * kFp8ActBlock;
    const MmaStageLayout l = mma_stage_layout(1, k_range, kCodeBytes);
    const int64_t x_at = (pair / p.x_div) * p.k + kb_begin * kFp8ActBlock;
    stage_tokens<StageOrder::kF16>(p.x + x_at, k_range, 1, k_range, kE2m1E4m3Factor, l, shared,
                                   p.swiglu_up != nullptr ? p.swiglu_up + x_at : nullptr, p.limit);
    __syncthreads();
    const auto* token_scales = reinterpret_cast<const float*>(shared + l.scales_offset);
    float acc[2] = {0.0f, 0.0f};
    // Staged block indices start at the block's K range: the sums run over [0, kb_end - kb_begin).
    if (aligned) {  // uniform over the block (one expert)
        tile_sums<true>(t, even, shared, token_scales, 0, kb_end - kb_begin, acc);
    } else {
        tile_sums<false>(t, even, shared, token_scales, 0, kb_end - kb_begin, acc);
    }
    // Columns 0, 1 (lane tq 0) and 2, 3 (lane tq 1): the row's four groups. Lanes tq 2, 3 hold zero columns.
    acc[0] += __shfl_xor_sync(0xffffffffu, acc[0], 1);
    acc[1] += __shfl_xor_sync(0xffffffffu, acc[1], 1);
    store_rows(p, pair, which, group, split, acc);
}

}  // namespace

bool expert_gemv_fp4_supported(int64_t k) {
    return k > 0 && k % kFp8ActBlock == 0 && mma_stage_layout(1, k, kCodeBytes).bytes <= kMaxShared;
}

int64_t expert_gemv_fp4_partials(int64_t pairs, int n_weights, int64_t rows) {
    return pairs * n_weights * kMaxSplits * rows;
}

int64_t expert_gemv_fp4_arrivals(int64_t pairs, int n_weights, int64_t rows) {
    return pairs * n_weights * row_groups(rows);  // the splits' (or the combine's: one a token, fewer)
}

void launch_expert_gemv_fp4(cudaStream_t stream, ExpertGemvFp4Params p) {
    if (p.pairs <= 0 || p.rows <= 0) return;
    const int64_t tiles = (p.rows + kMmaTileRows - 1) / kMmaTileRows;
    p.splits = mma_splits(tiles * p.pairs * p.n_weights, p.k / kFp8ActBlock, kChunk, kTargetWarps);
    const int64_t groups = row_groups(p.rows);
    const dim3 grid(static_cast<unsigned>(groups * p.splits), static_cast<unsigned>(p.pairs),
                    static_cast<unsigned>(p.n_weights));
    const int64_t shared = mma_stage_layout(1, p.k / p.splits + kFp8ActBlock, kCodeBytes).bytes;  // the widest range
    if (shared > 48 * 1024) {
        cudaFuncSetAttribute(expert_gemv_fp4_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             static_cast<int>(shared));
    }
    launch_kernel(expert_gemv_fp4_kernel, grid, dim3(kMmaWarps * 32), static_cast<size_t>(shared), stream, p);
}

}  // namespace dsv4::cuda
