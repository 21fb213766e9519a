// The wide attention kernel's work (kernels_attention_wide.cu: `fast` numerics, a block per token and key split with
// all its heads, fp8_ds_mla rows) on Hopper's warpgroup MMA, for 512-dim heads (DeepSeek-V4's). The mma.sync kernel
// re-reads the queries and keys from shared memory into registers for every warp's 16 x 16 piece of the scores (~770 KB
// of shared-memory reads a 64-key chunk against ~250 KB here) and is bound by it; wgmma reads each operand tile once
// a warpgroup.
//
// Two warpgroups. A chunk of 64 keys: the staged bytes decoded to a bf16 tile (128-byte swizzled column blocks of 64
// dims); scores S = q . K^T, warpgroup g taking keys 32 g .. 32 g + 31 of all 64 heads (m64n32k16, both operands in
// shared memory); the rows' chunk maxima exchanged through shared memory; P = exp(S - m) rounded to bf16 into a
// swizzled tile; O += P . V, warpgroup g taking dims 256 g .. 256 g + 255 (m64n256k16, V read MN-major from the same
// tile). Numerics as the other attention kernels of `fast`: bf16 q, keys and probabilities, float32 accumulation,
// float32 denominators of the unrounded probabilities (each warpgroup sums its keys; the two halves added in order),
// then attention_combine_kernel's arithmetic for one split, or the split kernel's partials with several.
#include <cuda_bf16.h>

#include <algorithm>

#include "backend/cuda/pdl.cuh"
#include "backend/cuda/wgmma_bf16.cuh"
#include "backend/cuda/wide_attention_rows.cuh"

namespace dsv4::cuda {
namespace {

constexpr int kDim = kMqaWgmmaDim;
constexpr int kHeads = 64;  // rows of the scores and outputs: heads past the token's last are zero
constexpr int kKeys = 64;   // keys a chunk
constexpr int kGroups = 2;  // warpgroups
constexpr int kThreads = 128 * kGroups;
constexpr int kGroupKeys = kKeys / kGroups;  // a warpgroup's keys of the scores
constexpr int kGroupDims = kDim / kGroups;   // a warpgroup's dims of the outputs
constexpr int kOutTiles = kGroupDims / 8;    // n8 tiles of a thread's output accumulators
constexpr int kDimBlocks = kDim / 64;        // 64-dim (128-byte) column blocks of a tile
constexpr int kBlockBytes = 64 * 128;        // one column block of a 64-row tile
constexpr int kTileBytes = kDimBlocks * kBlockBytes;
constexpr int kSegmentKeys = 1024;  // key rows resolved at once, at most (8 KB of pointers)
constexpr int kStatsFloats = 2 * kHeads * kGroups;
constexpr size_t kMaxSmem = 227 * 1024;  // the H200's per-block opt-in maximum
static_assert(kWideQueryScratch <= kStatsFloats, "stats hold the query staging's scratch");

struct Smem {
    uint8_t* q;            // [kDimBlocks][kHeads][128 B] query rows (K-major A of the scores)
    uint8_t* kv;           // [kDimBlocks][kKeys][128 B] the chunk's rows (K-major B of S, MN-major B of the outputs)
    uint8_t* p;            // [kHeads][128 B] the chunk's probabilities (K-major A of the outputs)
    const uint8_t** rows;  // [kSegmentKeys] stored row of each key of the segment (null: not a key)
    float* row_max;        // [kHeads][kGroups] each warpgroup's maximum of a head's chunk scores
    float* row_sum;        // [kHeads][kGroups] each warpgroup's denominator share
    float2* unrotate;      // [kWideUnrotatePairs] the outputs' inverse RoPE (stage_unrotate_table)
    uint8_t* staged;       // [kKeys][row bytes] the next chunk's stored bytes
};

__host__ __device__ constexpr size_t smem_bytes(int row_bytes) {
    return 1024 /* the tiles' alignment */ + 2 * static_cast<size_t>(kTileBytes) + kHeads * 128 +
           kSegmentKeys * sizeof(void*) + kStatsFloats * sizeof(float) + kWideUnrotatePairs * sizeof(float2) +
           static_cast<size_t>(kKeys) * row_bytes;
}

__device__ Smem carve(unsigned char* raw) {
    // The swizzle is of shared-memory address bits: the tiles start 1024-byte aligned.
    const uint32_t misalign = static_cast<uint32_t>(__cvta_generic_to_shared(raw)) % 1024u;
    Smem s;
    s.q = raw + (misalign == 0 ? 0 : 1024 - misalign);
    s.kv = s.q + kTileBytes;
    s.p = s.kv + kTileBytes;
    s.rows = reinterpret_cast<const uint8_t**>(s.p + kHeads * 128);
    s.row_max = reinterpret_cast<float*>(s.rows + kSegmentKeys);
    s.row_sum = s.row_max + kHeads * kGroups;
    s.unrotate = reinterpret_cast<float2*>(s.row_sum + kHeads * kGroups);
    s.staged = reinterpret_cast<uint8_t*>(s.unrotate + kWideUnrotatePairs);
    return s;
}

// Byte offset of element (row, col) in a tile of 128-byte swizzled column blocks (eight bf16 values, col 8 k ..
// 8 k + 7, stay in one 16-byte chunk).
__device__ __forceinline__ uint32_t tile_offset(int row, int col) {
    return (col / 64) * kBlockBytes + sw128_offset(row, (col % 64) / 8) + (col % 8) * 2;
}

// A thread's place in its warpgroup's m64nN accumulators: rows row0 and row0 + 8, columns 8 j + 2 q (+ 1).
struct Lane {
    int group, q, row0;
};
__device__ __forceinline__ Lane lane_of_thread() {
    const int lane = static_cast<int>(threadIdx.x % 32), warp = static_cast<int>(threadIdx.x / 32);
    return Lane{warp / 4, lane % 4, 16 * (warp % 4) + lane / 4};
}

// This warpgroup's scores of all heads against its 32 keys of the chunk, over the 512 dims (32 k16 steps).
__device__ void chunk_scores(const Smem& s, int group, float (&acc)[kGroupKeys / 2]) {
    wgmma_fence();
#pragma unroll
    for (int kb = 0; kb < kDimBlocks; ++kb) {
        const uint64_t qa = smem_desc_sw128(s.q + kb * kBlockBytes);
        const uint64_t kb_desc = smem_desc_sw128(s.kv + kb * kBlockBytes + group * kGroupKeys * 128);
#pragma unroll
        for (int ks = 0; ks < 4; ++ks) {  // 16 dims (32 bytes) a step: 2 in the descriptors' address field
            wgmma_bf16_m64n32k16<0>(acc, qa + 2 * ks, kb_desc + 2 * ks, kb + ks > 0 ? 1 : 0);
        }
    }
    wgmma_commit();
    wgmma_wait_all();
}

// O[all heads, this warpgroup's dims] += P[all heads, 64 keys] . V[64 keys, its dims] (4 k16 steps over the keys; V
// MN-major: 64-dim column blocks kBlockBytes apart, 8-key row groups 1024 bytes apart).
__device__ void chunk_outputs(const Smem& s, int group, float (&out)[4 * kOutTiles]) {
    wgmma_fence();
    const uint64_t pa = smem_desc_sw128(s.p);
    const uint8_t* v = s.kv + group * (kGroupDims / 64) * kBlockBytes;
#pragma unroll
    for (int ks = 0; ks < kKeys / 16; ++ks) {
        wgmma_bf16_m64n256k16<1>(out, pa + 2 * ks, smem_desc_sw128_mn(v + ks * 16 * 128, kBlockBytes, 1024), 1);
    }
    wgmma_commit();
    wgmma_wait_all();
}

// The running softmax state of a thread's two head rows.
struct RowState {
    float mx[2] = {-INFINITY, -INFINITY};
    float sum[2] = {0.0f, 0.0f};  // this warpgroup's keys only
};

// One chunk's softmax: the scaled scores (keys that are none: -inf), the rows' chunk maxima across the warpgroups
// (shared memory), the rescale of what came before, and the probabilities as bf16 into the P tile. Ends with the P tile
// complete and visible to wgmma (block barrier).
__device__ void chunk_softmax(const AttentionArgs& a, const Smem& s, int c0, const Lane& l,
                              const float (&acc)[kGroupKeys / 2], RowState& st, float (&out)[4 * kOutTiles]) {
    float sc[kGroupKeys / 2];
#pragma unroll
    for (int e = 0; e < kGroupKeys / 2; ++e) {
        const int key = l.group * kGroupKeys + 8 * (e / 4) + 2 * l.q + e % 2;
        sc[e] = s.rows[c0 + key] != nullptr ? acc[e] * a.scale : -INFINITY;
    }
#pragma unroll
    for (int half = 0; half < 2; ++half) {
        float m = -INFINITY;
#pragma unroll
        for (int j = 0; j < kGroupKeys / 8; ++j) m = fmaxf(m, fmaxf(sc[4 * j + 2 * half], sc[4 * j + 2 * half + 1]));
        m = quad_max(m);
        if (l.q == 0) s.row_max[(l.row0 + 8 * half) * kGroups + l.group] = m;
    }
    __syncthreads();
#pragma unroll
    for (int half = 0; half < 2; ++half) {
        const int row = l.row0 + 8 * half;
        const float chunk_max = fmaxf(s.row_max[row * kGroups], s.row_max[row * kGroups + 1]);
        const float m_new = fmaxf(st.mx[half], chunk_max);
        // Nothing seen yet (every key so far masked): keep the zeros, no NaN from -inf - -inf.
        const float correction = m_new == -INFINITY ? 1.0f : expf(st.mx[half] - m_new);
        st.mx[half] = m_new;
        st.sum[half] *= correction;
#pragma unroll
        for (int nt = 0; nt < kOutTiles; ++nt) {
            out[4 * nt + 2 * half] *= correction;
            out[4 * nt + 2 * half + 1] *= correction;
        }
#pragma unroll
        for (int j = 0; j < kGroupKeys / 8; ++j) {
            float p[2];
#pragma unroll
            for (int e = 0; e < 2; ++e) {
                p[e] = m_new == -INFINITY ? 0.0f : expf(sc[4 * j + 2 * half + e] - m_new);
                st.sum[half] += p[e];
            }
            const int key = l.group * kGroupKeys + 8 * j + 2 * l.q;
            *reinterpret_cast<uint32_t*>(s.p + sw128_offset(row, key / 8) + (key % 8) * 2) = pack_bf16(p[0], p[1]);
        }
    }
    fence_proxy_async();  // the P tile's generic stores before the outputs' wgmma reads them
    __syncthreads();
}

// Each warpgroup's share of the thread's rows' denominators into shared memory (block barrier at the end).
__device__ void publish_group_sums(const Smem& s, const Lane& l, const RowState& st) {
#pragma unroll
    for (int half = 0; half < 2; ++half) {
        const float total = quad_sum(st.sum[half]);
        if (l.q == 0) s.row_sum[(l.row0 + 8 * half) * kGroups + l.group] = total;
    }
    __syncthreads();
}

// Head h's denominator: the warpgroups' shares added in order.
__device__ __forceinline__ float row_denominator(const Smem& s, int h) {
    return s.row_sum[h * kGroups] + s.row_sum[h * kGroups + 1];
}

// One split: the thread's output rows, the denominators with the sink (attention_combine's arithmetic for one split),
// the inverse RoPE of the trailing dims where asked, written to a.out.
__device__ void write_outputs(const AttentionArgs& a, const Smem& s, int t, const Lane& l, const RowState& st,
                              const float (&out)[4 * kOutTiles]) {
    publish_group_sums(s, l, st);
    const int rope0 = a.unrotate_inv_freq != nullptr ? a.dim - a.unrotate_dims : a.dim;
#pragma unroll
    for (int half = 0; half < 2; ++half) {
        const int h = l.row0 + 8 * half;
        if (h >= a.heads) continue;
        const SinkClose c = close_with_sink(st.mx[half], row_denominator(s, h), a.sinks[h]);
        float* o = a.out + (static_cast<int64_t>(t) * a.heads + h) * a.dim;
#pragma unroll
        for (int nt = 0; nt < kOutTiles; ++nt) {
            store_closed_pair(l.group * kGroupDims + 8 * nt + 2 * l.q, rope0, s.unrotate, out[4 * nt + 2 * half],
                              out[4 * nt + 2 * half + 1], c, o);
        }
    }
}

// Several splits: the thread's rows of this split's partials in the split kernel's layout (the accumulators
// unnormalised, (max, sum) per (token, head, split)).
__device__ void write_partials(const AttentionArgs& a, const MqaWideLaunch& w, const Smem& s, int t, int split,
                               const Lane& l, const RowState& st, const float (&out)[4 * kOutTiles]) {
    publish_group_sums(s, l, st);
#pragma unroll
    for (int half = 0; half < 2; ++half) {
        const int h = l.row0 + 8 * half;
        if (h >= a.heads) continue;
        const int64_t part = wide_partial_index(a, w, t, h, split);
        float* acc = w.part_acc + part * a.dim + l.group * kGroupDims + 2 * l.q;
#pragma unroll
        for (int nt = 0; nt < kOutTiles; ++nt)
            *reinterpret_cast<float2*>(acc + 8 * nt) = make_float2(out[4 * nt + 2 * half], out[4 * nt + 2 * half + 1]);
        if (l.group == 0 && l.q == 0) store_partial_max_sum(w, part, st.mx[half], row_denominator(s, h));
    }
}

// Grid: (token, split). kNorm: a.norm_queries.
template <bool kNorm>
__global__ void __launch_bounds__(kThreads, 1) attention_wgmma_kernel(StepMeta m, AttentionArgs a, MqaWideLaunch w) {
    pdl_begin();
    extern __shared__ __align__(1024) unsigned char smem_raw[];
    const Smem s = carve(smem_raw);
    const Lane l = lane_of_thread();
    const int t = static_cast<int>(blockIdx.x), split = static_cast<int>(blockIdx.y);
    const WideKeyRange kr = wide_key_range(m, a, w, t, split);
    if (w.splits <= 1) stage_unrotate_table<kThreads>(m, a, t, s.unrotate);  // read after write_outputs' barrier
    if constexpr (kNorm) {  // a warp's eight rows four at a time (registers)
        stage_normed_query_rows<kHeads, kThreads, 4>(m, a, t, s.row_max, [&](int r, int i, float x) {
            *reinterpret_cast<__nv_bfloat16*>(s.q + tile_offset(r, i)) = __float2bfloat16_rn(x);
        });
    } else {
        stage_wide_queries<kHeads>(
            a, t, [&](int r, int c, uint2 packed) { *reinterpret_cast<uint2*>(s.q + tile_offset(r, c)) = packed; });
    }
    float out[4 * kOutTiles] = {};
    RowState st;
    for (int seg0 = kr.begin; seg0 < kr.end; seg0 += w.segment_keys) {
        const int seg_keys = min(kr.end - seg0, w.segment_keys);
        __syncthreads();  // the previous segment's chunks are done with the row pointers (and the queries staged)
        resolve_wide_rows<kThreads>(m, a, t, seg0, (seg_keys + kKeys - 1) / kKeys * kKeys, kr.end, kr.n_window, s.rows);
        __syncthreads();
        stage_wide_chunk<kKeys, kThreads>(s.rows, 0, s.staged, a.format.bytes);
        for (int c0 = 0; c0 < seg_keys; c0 += kKeys) {
            cp_async_wait<0>();
            __syncthreads();  // the chunk's bytes (every thread's copies) have landed; the last chunk's wgmma are done
            decode_wide_chunk<kKeys, kThreads>(a, s.rows, s.staged, c0, [&](int r, int i, uint2 packed) {
                *reinterpret_cast<uint2*>(s.kv + tile_offset(r, i)) = packed;
            });
            fence_proxy_async();  // the tile's (and the queries') generic stores before wgmma reads them
            __syncthreads();      // the tile is complete and the staging buffer free
            if (c0 + kKeys < seg_keys) stage_wide_chunk<kKeys, kThreads>(s.rows, c0 + kKeys, s.staged, a.format.bytes);
            float acc[kGroupKeys / 2];
            chunk_scores(s, l.group, acc);
            chunk_softmax(a, s, c0, l, acc, st, out);
            chunk_outputs(s, l.group, out);
        }
    }
    if (w.splits > 1) {
        write_partials(a, w, s, t, split, l, st, out);
    } else {
        write_outputs(a, s, t, l, st, out);
    }
}

}  // namespace

bool mqa_wgmma_supported(const RowFormatDev& f, int dim, int heads) {
    return f.dtype == kRowFp8 && fp8_quads_aligned(f) && f.dim == dim && dim == kDim && heads > kHeads / 2 &&
           heads <= kHeads && smem_bytes(f.bytes) <= kMaxSmem;
}

void launch_attention_mqa_wgmma(cudaStream_t st, const StepMeta& m, const AttentionArgs& a, const MqaWideLaunch& w) {
    static bool configured = false;  // once: every supported shape fits kMaxSmem
    if (!configured) {
        cudaFuncSetAttribute(attention_wgmma_kernel<false>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             static_cast<int>(kMaxSmem));
        cudaFuncSetAttribute(attention_wgmma_kernel<true>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             static_cast<int>(kMaxSmem));
        configured = true;
    }
    const dim3 grid(static_cast<unsigned>(m.n_tokens), static_cast<unsigned>(std::max(1, w.splits)));
    launch_kernel(a.norm_queries ? attention_wgmma_kernel<true> : attention_wgmma_kernel<false>, grid, kThreads,
                  smem_bytes(a.format.bytes), st, m, a, w);
}

}  // namespace dsv4::cuda
