// Lightning-indexer scores on tensor cores (fast numerics): score[t][e] = sum_h w[t][h] relu(q[t][h] . K[e]) for the
// eligible entries (the same output as index_scores_kernel, for the same top-k kernel, which reads no others). One
// block per (token, range of entries): the token's query heads stay in shared memory (or, for 128-dim keys, in the
// warps' registers) while chunks of 64 keys pass. At prefill sizes a block may take kTokens consecutive tokens, a
// group of four warps each: a chunk's keys are looked up, loaded and decoded once for all of them (a prefill chunk's
// tokens see the same causal prefix of entries), where one block a token re-decoded them for every token (the 8K
// prefill's index scores ran at ~35 TFLOP/s, performance-log.md 2026-12-07). Tokens of other sequences in one tile
// take a pass each over their own keys. Each warp computes what it computes in a one-token block, in the same order:
// the same bits at any kTokens.
//
// Numerics: the keys enter the MMA as their stored codes (an e4m3 or bf16 value is exact in bf16) and an fp8 key's
// float scale multiplies the dot product afterwards; the query is split into a bf16 high part and a bf16 remainder
// (two MMAs), which carries ~16 of float32's 24 mantissa bits: the scores agree with the float32 kernel to ~1e-5
// relative, so the picks are those of the other numerics except at near-exact ties.
#include <limits>

#include "backend/cuda/head_rows.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/mma_bf16.cuh"
#include "backend/cuda/pdl.cuh"

namespace dsv4::cuda {
namespace {

constexpr int kHeads = 64;           // query heads per block: 4 warps of 16
constexpr int kKeys = 64;            // keys per chunk: 8 n-tiles per warp
constexpr int kMaxRange = 256;       // entries per block (fewer for decode-sized steps: more blocks)
constexpr int kLongRange = 1024;     // entries per block where the step has blocks enough (long contexts)
constexpr int kWarps = kHeads / 16;  // a token's warps
constexpr int kPad = 8;

// One token's staged queries (high and low parts), the chunk's keys and scales, the warps' partial sums, the tokens'
// head weights and the chunk's row pointers.
__host__ __device__ constexpr size_t smem_bytes(int dim, int tokens) {
    return static_cast<size_t>(2 * kHeads + kKeys) * (dim + kPad) * 2 + kKeys * 4 + tokens * kWarps * kKeys * 4 +
           tokens * kHeads * 4 + kKeys * sizeof(void*);
}

constexpr int kRowBatch = 8;                       // key rows a warp loads before it decodes any
constexpr int kQuadsPerLane = kMaxIndexDim / 128;  // four elements a lane and quad

// Four stored elements of a key row from their raw bytes (four e4m3 codes in bits.x, or four bf16 values) as bf16
// into dst.
template <int D>
__device__ __forceinline__ void store_key_quad(uint2 bits, const RowFormatDev& f, __nv_bfloat16* dst) {
    float v[4];
#pragma unroll
    for (int u = 0; u < 4; ++u) {
        if constexpr (D == kRowFp8) {
            v[u] =
                decode_e4m3(static_cast<uint8_t>(bits.x >> (8 * u)), f.fp8.fnuz ? Fp8Dialect::kFnuz : Fp8Dialect::kOcp);
        } else {
            const uint32_t word = u < 2 ? bits.x : bits.y;
            v[u] = bf16_bits_to_float(static_cast<uint16_t>(word >> (16 * (u % 2))));
        }
    }
    auto* out = reinterpret_cast<uint32_t*>(dst);
    out[0] = pack_bf16(v[0], v[1]);
    out[1] = pack_bf16(v[2], v[3]);
}

// The chunk's key rows (rows[r]: stored row of key r, null when absent) as bf16 codes into ks and their scales (1 for
// bf16 keys; NaN and zero codes when absent), by the block's kBlockWarps warps, kQuads four-element groups a lane and
// row (dims up to 128 kQuads). A warp issues the loads of kRowBatch rows before it decodes any: the rows' latency once
// a batch, not once a row.
template <int D, int kBlockWarps, int kQuads>
__device__ void load_keys(const uint8_t* const* rows, const RowFormatDev& f, int ld, __nv_bfloat16* ks, float* scale) {
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    constexpr int kBytes = D == kRowFp8 ? 1 : 2;
    constexpr int kBatch = kRowBatch < kKeys / kBlockWarps ? kRowBatch : kKeys / kBlockWarps;  // rows a warp has
    for (int r0 = warp; r0 < kKeys; r0 += kBatch * kBlockWarps) {
        uint2 raw[kBatch][kQuads];
        float row_scale = __int_as_float(0x7fc00000);  // lane b: row b of the batch (NaN marks an absent key)
#pragma unroll
        for (int b = 0; b < kBatch; ++b) {
            const int r = r0 + b * kBlockWarps;
            const uint8_t* row = r < kKeys ? rows[r] : nullptr;
#pragma unroll
            for (int j = 0; j < kQuads; ++j) {
                const int i = 4 * lane + 128 * j;
                raw[b][j] = make_uint2(0u, 0u);
                if (row == nullptr || i >= f.dim) continue;
                if constexpr (D == kRowFp8) {
                    raw[b][j].x = *reinterpret_cast<const uint32_t*>(row + i);
                } else {
                    raw[b][j] = *reinterpret_cast<const uint2*>(row + kBytes * i);
                }
            }
            if (lane == b && row != nullptr) {
                row_scale = D == kRowFp8 ? *reinterpret_cast<const float*>(row + f.dim) : 1.0f;
            }
        }
#pragma unroll
        for (int b = 0; b < kBatch; ++b) {
            const int r = r0 + b * kBlockWarps;
            if (r >= kKeys) break;
#pragma unroll
            for (int j = 0; j < kQuads; ++j) {
                const int i = 4 * lane + 128 * j;
                if (i < f.dim) store_key_quad<D>(raw[b][j], f, ks + r * ld + i);
            }
            if (lane == b) scale[r] = row_scale;
        }
    }
}

// The token's query heads split into bf16 high parts and remainders (heads past the last are zero), eight loads a
// thread in flight.
__device__ void stage_queries(const float* q, int t, int heads, int dim, int ld, __nv_bfloat16* q_hi,
                              __nv_bfloat16* q_lo) {
    stage_head_rows<8>(q, t, heads, 0, kHeads, dim, [&](int h, int c, float4 v) {
        const float x[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
        for (int u = 0; u < 4; ++u) {
            const __nv_bfloat16 hi = __float2bfloat16_rn(x[u]);
            q_hi[h * ld + c + u] = hi;
            q_lo[h * ld + c + u] = __float2bfloat16_rn(x[u] - __bfloat162float(hi));
        }
    });
}

// A warp's A fragments of its 16 heads' query, high and low parts, for the k-step at k0.
struct QFragments {
    uint32_t hi[4], lo[4];
};

__device__ __forceinline__ QFragments q_fragments(const __nv_bfloat16* a_hi, const __nv_bfloat16* a_lo, int ld,
                                                  int k0) {
    QFragments f;
    f.hi[0] = *reinterpret_cast<const uint32_t*>(a_hi + k0);
    f.hi[1] = *reinterpret_cast<const uint32_t*>(a_hi + 8 * ld + k0);
    f.hi[2] = *reinterpret_cast<const uint32_t*>(a_hi + k0 + 8);
    f.hi[3] = *reinterpret_cast<const uint32_t*>(a_hi + 8 * ld + k0 + 8);
    f.lo[0] = *reinterpret_cast<const uint32_t*>(a_lo + k0);
    f.lo[1] = *reinterpret_cast<const uint32_t*>(a_lo + 8 * ld + k0);
    f.lo[2] = *reinterpret_cast<const uint32_t*>(a_lo + k0 + 8);
    f.lo[3] = *reinterpret_cast<const uint32_t*>(a_lo + 8 * ld + k0 + 8);
    return f;
}

// acc[nt] += (q_hi + q_lo) . codes of keys 8 nt .. over the k-step at k0 (high part first).
__device__ __forceinline__ void key_step(float (&acc)[kKeys / 8][4], const QFragments& f, const __nv_bfloat16* ks,
                                         int ld, int k0) {
    const int lane = threadIdx.x % 32, g = lane / 4, tq = lane % 4;
#pragma unroll
    for (int nt = 0; nt < kKeys / 8; ++nt) {
        const __nv_bfloat16* kb = ks + (8 * nt + g) * ld + k0 + 2 * tq;
        const uint32_t bf[2] = {*reinterpret_cast<const uint32_t*>(kb), *reinterpret_cast<const uint32_t*>(kb + 8)};
        mma_bf16(acc[nt], f.hi, bf);
        mma_bf16(acc[nt], f.lo, bf);
    }
}

// Sum over a warp's 16 heads of w_h relu(scale_e * dot) for each of the chunk's keys, reduced over the warp's 8 row
// groups into partial[key].
__device__ __forceinline__ void head_sums(const float (&acc)[kKeys / 8][4], const float* key_scale, float w_lo,
                                          float w_hi, float* partial) {
    const int lane = threadIdx.x % 32, g = lane / 4, tq = lane % 4;
#pragma unroll
    for (int nt = 0; nt < kKeys / 8; ++nt) {
#pragma unroll
        for (int c = 0; c < 2; ++c) {
            const int key = 8 * nt + 2 * tq + c;
            const float sc = key_scale[key];
            float v = w_lo * fmaxf(sc * acc[nt][c], 0.0f) + w_hi * fmaxf(sc * acc[nt][2 + c], 0.0f);
            v += __shfl_xor_sync(0xffffffffu, v, 4);
            v += __shfl_xor_sync(0xffffffffu, v, 8);
            v += __shfl_xor_sync(0xffffffffu, v, 16);
            if (g == 0) partial[key] = v;
        }
    }
}

// The entries token t sees: those of its complete compression windows.
__device__ __forceinline__ int eligible_of(const StepMeta& m, int t, int ratio) {
    return (m.positions[t] + 1) / ratio;
}

// rows[r] = the stored row of sequence seq's entry c0 + r, null at or past `stop` (a hole in the block table: null and
// the error flag). One thread a key: the lookups side by side.
__device__ __forceinline__ void lookup_rows(const StepMeta& m, int seq, int64_t c0, int64_t stop, int per_block,
                                            const uint8_t* keys, int bytes, const uint8_t** rows) {
    if (threadIdx.x >= kKeys) return;
    const int64_t e = c0 + threadIdx.x;
    const uint8_t* row = nullptr;
    if (e < stop) {
        const int64_t stored = paged_row(m, seq, e, per_block);
        if (stored < 0) {
            flag_error(m, kErrorBlockTable);
        } else {
            row = keys + stored * bytes;
        }
    }
    rows[threadIdx.x] = row;
}

// kSteps > 0: the key dim is 16 kSteps and each warp's query fragments stay in registers for every chunk of its range
// (a k-step then reads only the keys' fragments from shared memory); 0: any dim, the fragments read each k-step. The
// same products in the same order either way.
template <int D, int kSteps>
__global__ void __launch_bounds__(kWarps * 32, 4)
    index_scores_mma_kernel(StepMeta m, const float* q, const float* weights, const uint8_t* keys, RowFormatDev f,
                            int heads, int ratio, int per_block, int64_t max_entries, int range, float* scores) {
    pdl_begin();
    extern __shared__ __align__(16) unsigned char smem_raw[];
    const int dim = f.dim, ld = dim + kPad;
    auto* q_hi = reinterpret_cast<__nv_bfloat16*>(smem_raw);
    __nv_bfloat16* q_lo = q_hi + kHeads * ld;
    __nv_bfloat16* ks = q_lo + kHeads * ld;
    auto* key_scale = reinterpret_cast<float*>(ks + kKeys * ld);
    float* partial = key_scale + kKeys;                           // [kWarps][kKeys]
    float* w = partial + kWarps * kKeys;                          // [kHeads]
    auto** rows = reinterpret_cast<const uint8_t**>(w + kHeads);  // [kKeys] (8-byte aligned: kHeads floats before)
    const int t = blockIdx.x;
    const int64_t e_begin = static_cast<int64_t>(blockIdx.y) * range;
    const int64_t e_end = min64(e_begin + range, max_entries);
    const int64_t eligible = (m.positions[t] + 1) / ratio;
    float* out = scores + static_cast<int64_t>(t) * max_entries;
    if (e_begin >= eligible) return;  // nothing visible in this range (the top-k reads eligible entries only)
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, tq = lane % 4;
    stage_queries(q, t, heads, dim, ld, q_hi, q_lo);
    for (int h = threadIdx.x; h < kHeads; h += blockDim.x)
        w[h] = h < heads ? weights[static_cast<int64_t>(t) * heads + h] : 0.0f;
    const int seq = m.seq_of_token[t];
    const __nv_bfloat16* a_hi = q_hi + (16 * warp + g) * ld + 2 * tq;
    const __nv_bfloat16* a_lo = q_lo + (16 * warp + g) * ld + 2 * tq;
    QFragments held[kSteps > 0 ? kSteps : 1];
    if constexpr (kSteps > 0) {
        __syncthreads();  // the staged queries
#pragma unroll
        for (int st = 0; st < kSteps; ++st) held[st] = q_fragments(a_hi, a_lo, ld, 16 * st);
    }
    for (int64_t c0 = e_begin; c0 < e_end; c0 += kKeys) {
        __syncthreads();            // the previous chunk's keys and partials are consumed; the queries are in place
        if (threadIdx.x < kKeys) {  // one thread a key: the block-table lookups side by side
            const int64_t e = c0 + threadIdx.x;
            const uint8_t* row = nullptr;
            if (e < eligible && e < e_end) {
                const int64_t stored = paged_row(m, seq, e, per_block);
                if (stored < 0) {
                    flag_error(m, kErrorBlockTable);
                } else {
                    row = keys + stored * f.bytes;
                }
            }
            rows[threadIdx.x] = row;
        }
        __syncthreads();
        load_keys<D, kWarps, kQuadsPerLane>(rows, f, ld, ks, key_scale);
        __syncthreads();
        // This warp's 16 heads x 64 keys: (q_hi + q_lo) . codes.
        float acc[kKeys / 8][4] = {};
        if constexpr (kSteps > 0) {
#pragma unroll
            for (int st = 0; st < kSteps; ++st) key_step(acc, held[st], ks, ld, 16 * st);
        } else {
            for (int k0 = 0; k0 < dim; k0 += 16) key_step(acc, q_fragments(a_hi, a_lo, ld, k0), ks, ld, k0);
        }
        // sum over this warp's heads of w_h relu(scale_e * dot), reduced over the 8 row groups of the warp: head_sums'
        // arithmetic written out (called here, ptxas spilled the bf16-key instantiation at its 128 registers).
        const float w_lo = w[16 * warp + g], w_hi = w[16 * warp + g + 8];
#pragma unroll
        for (int nt = 0; nt < kKeys / 8; ++nt) {
#pragma unroll
            for (int c = 0; c < 2; ++c) {
                const int key = 8 * nt + 2 * tq + c;
                const float sc = key_scale[key];
                float v = w_lo * fmaxf(sc * acc[nt][c], 0.0f) + w_hi * fmaxf(sc * acc[nt][2 + c], 0.0f);
                v += __shfl_xor_sync(0xffffffffu, v, 4);
                v += __shfl_xor_sync(0xffffffffu, v, 8);
                v += __shfl_xor_sync(0xffffffffu, v, 16);
                if (g == 0) partial[warp * kKeys + key] = v;
            }
        }
        __syncthreads();
        if (threadIdx.x < kKeys) {
            const int64_t e = c0 + threadIdx.x;
            if (e < e_end) {
                float s = -INFINITY;
                if (e < eligible && !isnan(key_scale[threadIdx.x])) {
                    s = 0.0f;
                    for (int wi = 0; wi < kWarps; ++wi) s += partial[wi * kKeys + threadIdx.x];
                }
                if (e < eligible) out[e] = s;
            }
        }
    }
}

// kTileTokens consecutive tokens a block (128-dim keys): warps 4 j .. 4 j + 3 take token j's heads, each with the MMAs
// and sums of index_scores_mma_kernel's warp in the same order. A warp holds its query's high parts in registers and
// reads the remainders from shared memory (all four tokens' stay there; both parts in registers left no room for the
// tile's bookkeeping). A tile that spans sequences takes a pass over each one's keys.
constexpr int kTileTokens = 4, kTileWarps = kWarps * kTileTokens, kTileSteps = 8, kTileLd = 16 * kTileSteps + kPad;

// Staged high parts of one token, the remainders of all the tile's tokens, then smem_bytes' other parts.
constexpr size_t tile_smem_bytes() {
    return smem_bytes(16 * kTileSteps, kTileTokens) + static_cast<size_t>(kTileTokens - 1) * kHeads * kTileLd * 2;
}

// key_step with the query's high part held (hi) and its remainder read at lo: the same MMAs in the same order.
__device__ __forceinline__ void key_step_held_hi(float (&acc)[kKeys / 8][4], const uint32_t (&hi)[4],
                                                 const __nv_bfloat16* lo, const __nv_bfloat16* ks, int k0) {
    QFragments f = q_fragments(lo, lo, kTileLd, k0);
#pragma unroll
    for (int i = 0; i < 4; ++i) f.hi[i] = hi[i];
    key_step(acc, f, ks, kTileLd, k0);
}

template <int D>
__global__ void __launch_bounds__(kTileWarps * 32, 1)
    index_scores_tiles_kernel(StepMeta m, IndexScoresArgs a, int range) {
    pdl_begin();
    extern __shared__ __align__(16) unsigned char smem_raw[];
    const RowFormatDev& f = a.key_format;
    constexpr int ld = kTileLd;
    auto* q_hi = reinterpret_cast<__nv_bfloat16*>(smem_raw);  // one token's, staged in turn
    __nv_bfloat16* q_lo = q_hi + kHeads * ld;                 // [kTileTokens][kHeads][ld]
    __nv_bfloat16* ks = q_lo + kTileTokens * kHeads * ld;
    auto* key_scale = reinterpret_cast<float*>(ks + kKeys * ld);
    float* partial = key_scale + kKeys;                                         // [kTileWarps][kKeys]
    float* w = partial + kTileWarps * kKeys;                                    // [kTileTokens][kHeads]
    auto** rows = reinterpret_cast<const uint8_t**>(w + kTileTokens * kHeads);  // [kKeys] (8-byte aligned)
    const int t0 = blockIdx.x * kTileTokens, tokens = min(kTileTokens, m.n_tokens - t0);
    const int e_begin = static_cast<int>(blockIdx.y) * range;  // entries fit an int (launch_index_scores_mma)
    const int e_end = min(e_begin + range, static_cast<int>(a.max_entries));
    int most = 0;
    for (int j = 0; j < tokens; ++j) most = max(most, eligible_of(m, t0 + j, a.ratio));
    if (e_begin >= most) return;  // nothing visible in this range (the top-k reads eligible entries only)
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, tq = lane % 4;
    const int mine = warp / kWarps;  // this warp's token of the tile; its heads 16 (warp % kWarps) ..
    const int row = (16 * (warp % kWarps) + g) * ld + 2 * tq;
    for (int i = threadIdx.x; i < kTileTokens * kHeads; i += blockDim.x) {
        const int j = i / kHeads, h = i % kHeads;
        w[i] = j < tokens && h < a.heads ? a.weights[static_cast<int64_t>(t0 + j) * a.heads + h] : 0.0f;
    }
    uint32_t held[kTileSteps][4];
    for (int j = 0; j < tokens; ++j) {  // each token's queries staged in turn, its warps take their high parts
        if (j > 0) __syncthreads();     // the previous token's high parts are taken
        stage_queries(a.q, t0 + j, a.heads, f.dim, ld, q_hi, q_lo + j * kHeads * ld);
        __syncthreads();
        if (mine == j) {
#pragma unroll
            for (int st = 0; st < kTileSteps; ++st) {
                const QFragments q = q_fragments(q_hi + row, q_hi + row, ld, 16 * st);
#pragma unroll
                for (int i = 0; i < 4; ++i) held[st][i] = q.hi[i];
            }
        }
    }
    const __nv_bfloat16* lo = q_lo + mine * kHeads * ld + row;
    for (int lead = 0; lead < tokens; ++lead) {  // a pass for each sequence among the tile's tokens
        const int seq = m.seq_of_token[t0 + lead];
        bool first = true;
        int seen = 0;  // the entries this sequence's tokens of the tile see
        for (int j = 0; j < tokens; ++j) {
            if (m.seq_of_token[t0 + j] != seq) continue;
            first = first && j >= lead;
            seen = max(seen, eligible_of(m, t0 + j, a.ratio));
        }
        if (!first) continue;  // its pass ran already
        const bool computes = mine < tokens && m.seq_of_token[t0 + mine] == seq;
        const int stop = min(e_end, seen);
        for (int c0 = e_begin; c0 < stop; c0 += kKeys) {
            __syncthreads();  // the previous chunk's keys and partials are consumed
            lookup_rows(m, seq, c0, stop, a.per_block, a.keys, f.bytes, rows);
            __syncthreads();
            load_keys<D, kTileWarps, 1>(rows, f, ld, ks, key_scale);
            __syncthreads();
            if (computes) {  // this warp's 16 heads x 64 keys: (q_hi + q_lo) . codes
                float acc[kKeys / 8][4] = {};
#pragma unroll
                for (int st = 0; st < kTileSteps; ++st) key_step_held_hi(acc, held[st], lo, ks, 16 * st);
                const float* wh = w + mine * kHeads + 16 * (warp % kWarps) + g;
                head_sums(acc, key_scale, wh[0], wh[8], partial + warp * kKeys);
            }
            __syncthreads();
            for (int i = threadIdx.x; i < kTileTokens * kKeys; i += blockDim.x) {  // a token's four warps, in order
                const int j = i / kKeys, key = i % kKeys, e = c0 + key;
                if (j >= tokens || m.seq_of_token[t0 + j] != seq || e >= stop || e >= eligible_of(m, t0 + j, a.ratio)) {
                    continue;
                }
                float s = -INFINITY;
                if (!isnan(key_scale[key])) {
                    s = 0.0f;
                    for (int wi = 0; wi < kWarps; ++wi) s += partial[(j * kWarps + wi) * kKeys + key];
                }
                a.scores[static_cast<int64_t>(t0 + j) * a.max_entries + e] = s;
            }
        }
    }
}

// Entries a block scores, whole chunks, for a grid of `columns` blocks a range: long ranges where there are blocks
// enough (each block stages its tokens' queries once: long contexts), ranges of one chunk when the step is too small
// to fill the GPU with longer ones.
int entry_range(int64_t columns, int64_t max_entries) {
    if (columns * blocks_for(max_entries, kLongRange) >= 4 * 264) return kLongRange;
    if (columns * blocks_for(max_entries, kMaxRange) >= 264) return kMaxRange;
    return kKeys;
}

template <int D>
void launch_tiles(cudaStream_t s, const StepMeta& m, const IndexScoresArgs& a) {
    const size_t smem = tile_smem_bytes();
    static bool configured = false;
    if (!configured) {
        cudaFuncSetAttribute(index_scores_tiles_kernel<D>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             static_cast<int>(smem));
        configured = true;
    }
    const int tiles = (m.n_tokens + kTileTokens - 1) / kTileTokens, range = entry_range(tiles, a.max_entries);
    const dim3 grid(static_cast<unsigned>(tiles), blocks_for(a.max_entries, range));
    launch_kernel(index_scores_tiles_kernel<D>, grid, kTileWarps * 32, smem, s, m, a, range);
}

template <int D, int kSteps>
void launch_typed(cudaStream_t s, const StepMeta& m, const float* q, const float* weights, const uint8_t* keys,
                  const RowFormatDev& f, int heads, int ratio, int per_block, int64_t max_entries, float* scores) {
    static bool configured = false;  // the largest dim's smem is allowed once per instantiation
    if (!configured) {
        cudaFuncSetAttribute(index_scores_mma_kernel<D, kSteps>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             static_cast<int>(smem_bytes(kMaxIndexDim, 1)));
        configured = true;
    }
    const int range = entry_range(m.n_tokens, max_entries);
    const dim3 grid(static_cast<unsigned>(m.n_tokens), blocks_for(max_entries, range));
    launch_kernel(index_scores_mma_kernel<D, kSteps>, grid, kWarps * 32, smem_bytes(f.dim, 1), s, m, q, weights, keys,
                  f, heads, ratio, per_block, max_entries, range, scores);
}

// DeepSeek-V4's index head dim (128) keeps its query fragments in registers.
template <int D>
void launch_dim(cudaStream_t s, const StepMeta& m, const float* q, const float* weights, const uint8_t* keys,
                const RowFormatDev& f, int heads, int ratio, int per_block, int64_t max_entries, float* scores) {
    if (f.dim == 128) {
        launch_typed<D, 8>(s, m, q, weights, keys, f, heads, ratio, per_block, max_entries, scores);
    } else {
        launch_typed<D, 0>(s, m, q, weights, keys, f, heads, ratio, per_block, max_entries, scores);
    }
}

}  // namespace

bool index_scores_mma_supported(const RowFormatDev& f, int heads) {
    return heads <= kHeads && f.dim % 16 == 0 && f.dim <= kMaxIndexDim &&
           ((f.dtype == kRowFp8 && f.index_key) || f.dtype == kRowBf16);
}

void launch_index_scores_mma(cudaStream_t s, const StepMeta& m, const IndexScoresArgs& a) {
    if (m.n_tokens == 0 || a.max_entries == 0) return;
    const bool tiles = a.key_format.dim == 16 * kTileSteps && a.token_tile == kTileTokens &&
                       m.n_tokens >= kIndexTileMinTokens &&
                       a.max_entries <= std::numeric_limits<int>::max() - kLongRange;
    if (tiles) {  // the tile kernel counts entries in ints
        return a.key_format.dtype == kRowFp8 ? launch_tiles<kRowFp8>(s, m, a) : launch_tiles<kRowBf16>(s, m, a);
    }
    if (a.key_format.dtype == kRowFp8) {
        launch_dim<kRowFp8>(s, m, a.q, a.weights, a.keys, a.key_format, a.heads, a.ratio, a.per_block, a.max_entries,
                            a.scores);
    } else {
        launch_dim<kRowBf16>(s, m, a.q, a.weights, a.keys, a.key_format, a.heads, a.ratio, a.per_block, a.max_entries,
                             a.scores);
    }
}

}  // namespace dsv4::cuda
