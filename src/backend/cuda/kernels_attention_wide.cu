// Tensor-core sparse attention for `fast` numerics at prefill sizes (MQA: every head attends over the same K=V rows).
// One block per token with all its heads (up to 64: four warp rows of 16), so a chunk of 64 key rows is decoded once
// for every head. With one key split (prefill sizes) the block applies the sink, the normalisation and the inverse
// RoPE itself and writes the output rows (no partials, no merge launch; for V4's rows optionally as the output
// projection's FP8 activations, write_output_codes); with several (batched decode) a block per
// (token, split) writes the split kernel's partials for attention_combine_kernel. While a chunk computes, the next
// chunk's stored bytes are on their way into a staging buffer (cp.async); the token's key rows are resolved
// kSegmentKeys at a time beforehand.
//
// A chunk: staged fp8_ds_mla bytes -> bf16 tile; scores S = q . K^T (warp (r, c): heads 16 r.., keys 16 c..); the
// chunk's row maxima through shared memory; P = exp(S - m) rounded to bf16 into shared memory; O += P . V (warp (r,
// c): heads 16 r.., a quarter of the dims). Numerics as kernels_attention_mqa.cu: bf16 q, keys and probabilities,
// float32 accumulation, float32 denominator of the unrounded probabilities (each warp sums its key quarter; the four
// quarters are added in order at the end), then attention_combine_kernel's arithmetic for one split.
#include <cuda_bf16.h>

#include <algorithm>

#include "backend/cuda/fp8_act_quant.cuh"
#include "backend/cuda/kernels_fp8.h"
#include "backend/cuda/pdl.cuh"
#include "backend/cuda/wide_attention_rows.cuh"

namespace dsv4::cuda {
namespace {

constexpr int kHeads = 64;  // heads per block: kRowWarps warp rows of 16
constexpr int kKeys = 64;   // keys per chunk
constexpr int kRowWarps = 4;
constexpr int kColWarps = 4;  // warp columns: 16 keys of the scores, a quarter of the dims of the outputs
constexpr int kWarps = kRowWarps * kColWarps;
constexpr int kThreads = kWarps * 32;
constexpr int kPad = 8;             // bf16 elements of row padding: rows stay 16-byte aligned, ldmatrix conflict-free
constexpr int kSegmentKeys = 1024;  // key rows resolved at once, at most (8 KB of pointers)
constexpr int kMaxTiles = kMaxMqaDim / kColWarps / 8;  // output n-tiles of 8 dims a warp
constexpr size_t kMaxSmem = 227 * 1024;                // the H200's per-block opt-in maximum

struct Smem {
    __nv_bfloat16* q;      // [kHeads][dim + kPad]
    __nv_bfloat16* kv;     // [kKeys][dim + kPad] the chunk's rows
    __nv_bfloat16* p;      // [kHeads][kKeys + kPad] the chunk's probabilities
    const uint8_t** rows;  // [kSegmentKeys] stored row of each key of the segment (null: not a key)
    float* row_max;        // [kHeads][kColWarps] each warp column's maximum of a head's chunk scores
    float* row_sum;        // [kHeads][kColWarps] each warp column's denominator share
    float2* unrotate;      // [kWideUnrotatePairs] the outputs' inverse RoPE (stage_unrotate_table)
    uint8_t* staged;       // [kKeys][row bytes] the next chunk's stored bytes
};

__host__ __device__ constexpr size_t smem_bytes(int dim, int row_bytes) {
    return static_cast<size_t>(kHeads + kKeys) * (dim + kPad) * 2 + static_cast<size_t>(kHeads) * (kKeys + kPad) * 2 +
           kSegmentKeys * sizeof(void*) + 2 * kHeads * kColWarps * sizeof(float) + kWideUnrotatePairs * sizeof(float2) +
           static_cast<size_t>(kKeys) * row_bytes;
}

__device__ Smem carve(unsigned char* base, int dim) {
    Smem s;
    s.q = reinterpret_cast<__nv_bfloat16*>(base);
    s.kv = s.q + kHeads * (dim + kPad);
    s.p = s.kv + kKeys * (dim + kPad);
    s.rows = reinterpret_cast<const uint8_t**>(s.p + kHeads * (kKeys + kPad));
    s.row_max = reinterpret_cast<float*>(s.rows + kSegmentKeys);
    s.row_sum = s.row_max + kHeads * kColWarps;
    s.unrotate = reinterpret_cast<float2*>(s.row_sum + kHeads * kColWarps);
    s.staged = reinterpret_cast<uint8_t*>(s.unrotate + kWideUnrotatePairs);
    return s;
}

static_assert(kWideQueryScratch <= kHeads * kColWarps, "row_max holds the query cosines and sines");

// The token's query rows into the padded q tile. kNorm: normed and rotated, a row a warp and a warp's four rows at once
// (scratch: row_max, free until the first chunk).
template <bool kNorm>
__device__ void load_queries(const StepMeta& m, const AttentionArgs& a, int t, const Smem& s) {
    const int ld = a.dim + kPad;
    if constexpr (kNorm) {
        stage_normed_query_rows<kHeads, kThreads, kHeads / kWarps>(
            m, a, t, s.row_max, [&](int r, int i, float x) { s.q[r * ld + i] = __float2bfloat16_rn(x); });
    } else {
        stage_wide_queries<kHeads>(
            a, t, [&](int r, int c, uint2 packed) { *reinterpret_cast<uint2*>(s.q + r * ld + c) = packed; });
    }
}

// The fp8_ds_mla rows of V4's heads (512 dims, the last 64 kept as bf16, OCP e4m3 codes): decoded with their offsets
// known at compile time, 16 elements a lane (lanes 0-27 the codes, 28-31 the bf16 tail), where the general decode
// spends most of its instructions finding them.
constexpr int kV4Dim = 512, kV4Rope = 64, kV4Nope = kV4Dim - kV4Rope;
constexpr int kV4Scales = kV4Nope + 2 * kV4Rope;  // byte offset of the UE8M0 scale bytes (one per 64 codes)
constexpr int kV4Bytes = kV4Scales + 8;           // seven scale bytes, padded to eight
__host__ __device__ inline bool v4_rows(const RowFormatDev& f) {
    return f.dtype == kRowFp8 && !f.index_key && f.dim == kV4Dim && f.rope_dim == kV4Rope && f.bytes == kV4Bytes &&
           !f.fp8.fnuz;
}

// Elements [i, i + 4) of a v4_rows row from their raw bytes as four bf16 values: decode_fp8_row_quad with the format
// a constant.
__device__ __forceinline__ uint2 v4_quad_bf16(const Fp8RowQuad& q, int i) {
    RowFormatDev f;
    f.dtype = kRowFp8;
    f.dim = kV4Dim;
    f.rope_dim = kV4Rope;
    f.bytes = kV4Bytes;
    float v[4];
    decode_fp8_row_quad(q, i, f, v);
    return make_uint2(pack_bf16(v[0], v[1]), pack_bf16(v[2], v[3]));
}

// Elements [16 lane, 16 lane + 16) of a staged v4_rows row as bf16 at `dst`, eight at a time (registers: the kernel
// sits at its limit).
__device__ __forceinline__ void decode_v4_sixteen(const uint8_t* row, int lane, __nv_bfloat16* dst) {
    const int i0 = 16 * lane;
    if (i0 < kV4Nope) {
        const uint8_t scale = row[kV4Scales + i0 / kRowFp8Block];
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const uint2 c = *reinterpret_cast<const uint2*>(row + i0 + 8 * h);
            const uint2 lo = v4_quad_bf16(Fp8RowQuad{make_uint2(c.x, 0u), scale}, i0 + 8 * h);
            const uint2 hi = v4_quad_bf16(Fp8RowQuad{make_uint2(c.y, 0u), scale}, i0 + 8 * h + 4);
            *reinterpret_cast<uint4*>(dst + i0 + 8 * h) = make_uint4(lo.x, lo.y, hi.x, hi.y);
        }
    } else {
        const uint8_t* tail = row + kV4Nope + 2 * (i0 - kV4Nope);
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const uint2 lo = v4_quad_bf16(Fp8RowQuad{*reinterpret_cast<const uint2*>(tail + 16 * h)}, i0 + 8 * h);
            const uint2 hi =
                v4_quad_bf16(Fp8RowQuad{*reinterpret_cast<const uint2*>(tail + 16 * h + 8)}, i0 + 8 * h + 4);
            *reinterpret_cast<uint4*>(dst + i0 + 8 * h) = make_uint4(lo.x, lo.y, hi.x, hi.y);
        }
    }
}

// The staged chunk as bf16 rows of the tile (keys that are none: zeros), decoded exactly as the other attention
// kernels decode stored rows; a warp per row. v4_rows: decode_v4_sixteen; other formats four elements a lane and
// step (decode_wide_chunk's loop written out: through its store callback ptxas spilled this kernel). kV4:
// v4_rows(a.format), a kernel of its own (the two decodes in one kernel spilled).
template <bool kV4>
__device__ void decode_chunk(const AttentionArgs& a, const Smem& s, int c0) {
    const int ld = (kV4 ? kV4Dim : a.dim) + kPad, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    if constexpr (kV4) {
#pragma unroll 1  // a row at a time: the kernel's registers are at their limit
        for (int r = warp; r < kKeys; r += kWarps) {
            __nv_bfloat16* dst = s.kv + r * ld;
            if (s.rows[c0 + r] != nullptr) {
                decode_v4_sixteen(s.staged + r * kV4Bytes, lane, dst);
            } else {
                *reinterpret_cast<uint4*>(dst + 16 * lane) = make_uint4(0u, 0u, 0u, 0u);
                *reinterpret_cast<uint4*>(dst + 16 * lane + 8) = make_uint4(0u, 0u, 0u, 0u);
            }
        }
    } else {
        for (int r = warp; r < kKeys; r += kWarps) {
            const bool present = s.rows[c0 + r] != nullptr;
            const uint8_t* staged = s.staged + r * a.format.bytes;
#pragma unroll
            for (int j = 0; j < kMaxMqaDim / 128; ++j) {
                const int i = lane * 4 + 128 * j;
                if (i >= a.dim) break;
                float v[4] = {0.0f, 0.0f, 0.0f, 0.0f};
                if (present) fp8_row_quad(staged, i, a.format, v);
                *reinterpret_cast<uint2*>(s.kv + r * ld + i) = make_uint2(pack_bf16(v[0], v[1]), pack_bf16(v[2], v[3]));
            }
        }
    }
}

// Lane address of ldmatrix_x4 for a 16 x 16 A tile at (row0, col0) of a row-major bf16 tile with leading dimension
// ld: matrices (rows 0-7, col0), (rows 8-15, col0), (rows 0-7, col0 + 8), (rows 8-15, col0 + 8).
__device__ __forceinline__ const __nv_bfloat16* a_tile_lane(const __nv_bfloat16* tile, int ld, int row0, int col0) {
    const int lane = threadIdx.x % 32;
    return tile + (row0 + lane % 8 + 8 * ((lane / 8) % 2)) * ld + col0 + 8 * (lane / 16);
}

// Scores of this warp's 16 heads x 16 keys (two n-tiles of 8) over the dims: acc[n] is the C fragment of keys
// key0 + 8 n ...
__device__ void chunk_scores(const Smem& s, int dim, int head0, int key0, float (&acc)[2][4]) {
    const int ld = dim + kPad, lane = threadIdx.x % 32;
    const __nv_bfloat16* qa = a_tile_lane(s.q, ld, head0, 0);
    // B fragments of two key n-tiles: matrices (keys 0-7, dims k0), (keys 0-7, k0 + 8), (keys 8-15, k0), (8-15, k0 +
    // 8).
    const __nv_bfloat16* kb = s.kv + (key0 + lane % 8 + 8 * (lane / 16)) * ld + 8 * ((lane / 8) % 2);
#pragma unroll
    for (int n = 0; n < 2; ++n) {
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[n][e] = 0.0f;
    }
    for (int k0 = 0; k0 < dim; k0 += 16) {
        uint32_t af[4], bf[4];
        ldmatrix_x4(af, qa + k0);
        ldmatrix_x4(bf, kb + k0);
        const uint32_t b0[2] = {bf[0], bf[1]}, b1[2] = {bf[2], bf[3]};
        mma_bf16(acc[0], af, b0);
        mma_bf16(acc[1], af, b1);
    }
}

// out[16 heads, this warp's dims] += P[16 heads, 64 keys] . V[64 keys, dims dim0 ..]: V's B fragments by transposed
// loads of the row-major tile, two n-tiles a load.
__device__ void chunk_outputs(const Smem& s, int dim, int head0, int dim0, int n_tiles, float (&out)[kMaxTiles][4]) {
    const int ld = dim + kPad, lane = threadIdx.x % 32;
    const __nv_bfloat16* pa = a_tile_lane(s.p, kKeys + kPad, head0, 0);
    // Matrices (keys 0-7, dims d), (keys 8-15, d), (keys 0-7, d + 8), (keys 8-15, d + 8).
    const __nv_bfloat16* vb = s.kv + (lane % 8 + 8 * ((lane / 8) % 2)) * ld + dim0 + 8 * (lane / 16);
#pragma unroll
    for (int kb = 0; kb < kKeys / 16; ++kb) {
        uint32_t af[4];
        ldmatrix_x4(af, pa + 16 * kb);
#pragma unroll
        for (int np = 0; np < kMaxTiles / 2; ++np) {
            if (2 * np < n_tiles) {
                uint32_t bf[4];
                ldmatrix_x4_trans(bf, vb + 16 * kb * ld + 16 * np);
                const uint32_t b0[2] = {bf[0], bf[1]}, b1[2] = {bf[2], bf[3]};
                mma_bf16(out[2 * np], af, b0);
                mma_bf16(out[2 * np + 1], af, b1);
            }
        }
    }
}

// The running softmax state of a lane's two head rows (g and g + 8 of its warp row).
struct RowState {
    float mx[2] = {-INFINITY, -INFINITY};
    float sum[2] = {0.0f, 0.0f};  // this warp column's keys only
};

// One chunk's softmax: the scaled scores (keys that are none: -inf), the rows' chunk maxima across the warp columns
// (shared memory), the rescale of what came before, and the probabilities as bf16 into the P tile. Ends with the P
// tile complete (block barrier).
__device__ void chunk_softmax(const AttentionArgs& a, const Smem& s, int c0, int head0, int key0, int wc,
                              const float (&acc)[2][4], RowState& st, float (&out)[kMaxTiles][4]) {
    const int lane = threadIdx.x % 32, g = lane / 4, tq = lane % 4;
    float sc[2][4];
#pragma unroll
    for (int n = 0; n < 2; ++n) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
            const int key = key0 + 8 * n + 2 * tq + e % 2;
            sc[n][e] = s.rows[c0 + key] != nullptr ? acc[n][e] * a.scale : -INFINITY;
        }
    }
#pragma unroll
    for (int half = 0; half < 2; ++half) {
        const float m =
            quad_max(fmaxf(fmaxf(sc[0][2 * half], sc[0][2 * half + 1]), fmaxf(sc[1][2 * half], sc[1][2 * half + 1])));
        if (tq == 0) s.row_max[(head0 + g + 8 * half) * kColWarps + wc] = m;
    }
    __syncthreads();
#pragma unroll
    for (int half = 0; half < 2; ++half) {
        const int row = head0 + g + 8 * half;
        float chunk_max = s.row_max[row * kColWarps];
#pragma unroll
        for (int c = 1; c < kColWarps; ++c) chunk_max = fmaxf(chunk_max, s.row_max[row * kColWarps + c]);
        const float m_new = fmaxf(st.mx[half], chunk_max);
        // Nothing seen yet (every key so far masked): keep the zeros, no NaN from -inf - -inf.
        const float correction = m_new == -INFINITY ? 1.0f : expf(st.mx[half] - m_new);
        st.mx[half] = m_new;
        st.sum[half] *= correction;
#pragma unroll
        for (int nt = 0; nt < kMaxTiles; ++nt) {
            out[nt][2 * half] *= correction;
            out[nt][2 * half + 1] *= correction;
        }
#pragma unroll
        for (int n = 0; n < 2; ++n) {
            float p[2];
#pragma unroll
            for (int e = 0; e < 2; ++e) {
                p[e] = m_new == -INFINITY ? 0.0f : expf(sc[n][2 * half + e] - m_new);
                st.sum[half] += p[e];
            }
            *reinterpret_cast<uint32_t*>(s.p + row * (kKeys + kPad) + key0 + 8 * n + 2 * tq) = pack_bf16(p[0], p[1]);
        }
    }
    __syncthreads();
}

// Each warp column's share of the lane's rows' denominators into shared memory (block barrier at the end).
__device__ void publish_column_sums(const Smem& s, int head0, int wc, const RowState& st) {
    const int lane = threadIdx.x % 32, g = lane / 4, tq = lane % 4;
#pragma unroll
    for (int half = 0; half < 2; ++half) {
        const float total = quad_sum(st.sum[half]);
        if (tq == 0) s.row_sum[(head0 + g + 8 * half) * kColWarps + wc] = total;
    }
    __syncthreads();
}

// Head h's denominator: the warp columns' shares added in order.
__device__ __forceinline__ float row_denominator(const Smem& s, int h) {
    float l = s.row_sum[h * kColWarps];
#pragma unroll
    for (int c = 1; c < kColWarps; ++c) l += s.row_sum[h * kColWarps + c];
    return l;
}

// One split: the lane's output rows, the denominators with the sink (attention_combine's arithmetic for one split),
// the inverse RoPE of the trailing dims where asked (rope_values, on the pairs the lane holds), written to a.out.
__device__ void write_outputs(const AttentionArgs& a, const Smem& s, int t, int head0, int dim0, int wc, int n_tiles,
                              const RowState& st, const float (&out)[kMaxTiles][4]) {
    const int lane = threadIdx.x % 32, g = lane / 4, tq = lane % 4;
    publish_column_sums(s, head0, wc, st);
    const int rope0 = a.unrotate_inv_freq != nullptr ? a.dim - a.unrotate_dims : a.dim;
#pragma unroll
    for (int half = 0; half < 2; ++half) {
        const int h = head0 + g + 8 * half;
        if (h >= a.heads) continue;
        const SinkClose c = close_with_sink(st.mx[half], row_denominator(s, h), a.sinks[h]);
        float* o = a.out + (static_cast<int64_t>(t) * a.heads + h) * a.dim;
#pragma unroll
        for (int nt = 0; nt < kMaxTiles; ++nt) {
            if (nt >= n_tiles) break;
            store_closed_pair(dim0 + 8 * nt + 2 * tq, rope0, s.unrotate, out[nt][2 * half], out[nt][2 * half + 1], c,
                              o);
        }
    }
}

// One split, the outputs as FP8 activations (MqaWideLaunch::out_codes; v4_rows): the lane's rows closed and unrotated
// as write_outputs has them, rounded to bf16 and quantized per 128 dims with launch_quant_fp8's rule. A warp column's
// dims of a head are one scale block, held by the four lanes of a quad: the block's amax is the quad's.
__device__ void write_output_codes(const AttentionArgs& a, const MqaWideLaunch& w, const Smem& s, int t, int head0,
                                   int dim0, int wc, const RowState& st, float (&out)[kMaxTiles][4]) {
    static_assert(kV4Dim / kColWarps == kFp8ActBlock && kMaxTiles * 8 == kFp8ActBlock, "a warp column is a block");
    const int lane = threadIdx.x % 32, g = lane / 4, tq = lane % 4;
    publish_column_sums(s, head0, wc, st);
    const int rope0 = a.unrotate_inv_freq != nullptr ? kV4Dim - a.unrotate_dims : kV4Dim;
    const int64_t k = static_cast<int64_t>(a.heads) * kV4Dim;
#pragma unroll
    for (int half = 0; half < 2; ++half) {
        const int h = head0 + g + 8 * half;
        const bool real = h < a.heads;  // rows past the heads still take part in the quad's shuffles
        const SinkClose c = close_with_sink(st.mx[half], real ? row_denominator(s, h) : 1.0f, real ? a.sinks[h] : 0.0f);
        float amax = 0.0f;
        bool finite = true;
#pragma unroll
        for (int nt = 0; nt < kMaxTiles; ++nt) {
            const float2 v =
                closed_pair(dim0 + 8 * nt + 2 * tq, rope0, s.unrotate, out[nt][2 * half], out[nt][2 * half + 1], c);
            out[nt][2 * half] = to_bf16(v.x);
            out[nt][2 * half + 1] = to_bf16(v.y);
            amax = fmaxf(amax, fmaxf(fabsf(out[nt][2 * half]), fabsf(out[nt][2 * half + 1])));
            finite = finite && isfinite(out[nt][2 * half]) && isfinite(out[nt][2 * half + 1]);
        }
        amax = quad_max(amax);
        finite = quad_max(finite ? 0.0f : 1.0f) == 0.0f;
        const int e = fp8_block_exponent(amax);
        if (!real) continue;
        uint8_t* codes = w.out_codes + t * k + static_cast<int64_t>(h) * kV4Dim + dim0 + 2 * tq;
#pragma unroll
        for (int nt = 0; nt < kMaxTiles; ++nt) {
            *reinterpret_cast<uint16_t*>(codes + 8 * nt) =
                static_cast<uint16_t>(fp8_act_code(out[nt][2 * half], e) | fp8_act_code(out[nt][2 * half + 1], e) << 8);
        }
        if (tq == 0) {
            const int64_t block = (static_cast<int64_t>(h) * kV4Dim + dim0) / kFp8ActBlock;
            w.out_scales[block * w.out_rows_pad + t] = fp8_block_scale(e, finite);
        }
    }
}

// Several splits: the lane's rows of this split's partials in the split kernel's layout (the accumulators
// unnormalised, (max, sum) per (token, head, split)).
__device__ void write_partials(const AttentionArgs& a, const MqaWideLaunch& w, const Smem& s, int t, int split,
                               int head0, int dim0, int wc, int n_tiles, const RowState& st,
                               const float (&out)[kMaxTiles][4]) {
    const int lane = threadIdx.x % 32, g = lane / 4, tq = lane % 4;
    publish_column_sums(s, head0, wc, st);
#pragma unroll
    for (int half = 0; half < 2; ++half) {
        const int h = head0 + g + 8 * half;
        if (h >= a.heads) continue;
        const int64_t part = wide_partial_index(a, w, t, h, split);
        float* acc = w.part_acc + part * a.dim + dim0 + 2 * tq;
#pragma unroll
        for (int nt = 0; nt < kMaxTiles; ++nt) {
            if (nt < n_tiles)
                *reinterpret_cast<float2*>(acc + 8 * nt) = make_float2(out[nt][2 * half], out[nt][2 * half + 1]);
        }
        if (wc == 0 && tq == 0) store_partial_max_sum(w, part, st.mx[half], row_denominator(s, h));
    }
}

// Grid: (token, split). kNorm: a.norm_queries; kV4: v4_rows(a.format).
template <bool kNorm, bool kV4>
__global__ void __launch_bounds__(kThreads, 1) attention_mqa_wide_kernel(StepMeta m, AttentionArgs a, MqaWideLaunch w) {
    pdl_begin();
    extern __shared__ __align__(16) unsigned char smem_raw[];
    const int dim = kV4 ? kV4Dim : a.dim;  // a constant where it can be: the kernel's registers are at their limit
    const Smem s = carve(smem_raw, dim);
    const int t = blockIdx.x, split = blockIdx.y, warp = threadIdx.x / 32;
    const int wr = warp / kColWarps, wc = warp % kColWarps;
    const int head0 = 16 * wr, key0 = 16 * wc, n_tiles = dim / kColWarps / 8, dim0 = wc * (dim / kColWarps);
    const WideKeyRange kr = wide_key_range(m, a, w, t, split);
    if (w.splits <= 1) stage_unrotate_table<kThreads>(m, a, t, s.unrotate);  // read after write_outputs' barrier
    load_queries<kNorm>(m, a, t, s);
    float out[kMaxTiles][4] = {};
    RowState st;
    for (int seg0 = kr.begin; seg0 < kr.end; seg0 += w.segment_keys) {
        const int seg_keys = min(kr.end - seg0, w.segment_keys);
        __syncthreads();  // the previous segment's chunks are done with the row pointers
        resolve_wide_rows<kThreads>(m, a, t, seg0, (seg_keys + kKeys - 1) / kKeys * kKeys, kr.end, kr.n_window, s.rows);
        __syncthreads();
        stage_wide_chunk<kKeys, kThreads>(s.rows, 0, s.staged, a.format.bytes);
        for (int c0 = 0; c0 < seg_keys; c0 += kKeys) {
            cp_async_wait<0>();
            __syncthreads();  // the chunk's bytes (every thread's copies) have landed; the last chunk's P . V is done
            decode_chunk<kV4>(a, s, c0);
            __syncthreads();  // the tile is complete and the staging buffer free
            if (c0 + kKeys < seg_keys) stage_wide_chunk<kKeys, kThreads>(s.rows, c0 + kKeys, s.staged, a.format.bytes);
            float acc[2][4];
            chunk_scores(s, dim, head0, key0, acc);
            chunk_softmax(a, s, c0, head0, key0, wc, acc, st, out);
            chunk_outputs(s, dim, head0, dim0, n_tiles, out);
        }
    }
    if (w.splits > 1) {
        write_partials(a, w, s, t, split, head0, dim0, wc, n_tiles, st, out);
        return;
    }
    if constexpr (kV4) {
        if (w.out_codes != nullptr) return write_output_codes(a, w, s, t, head0, dim0, wc, st, out);
    }
    write_outputs(a, s, t, head0, dim0, wc, n_tiles, st, out);
}

}  // namespace

bool mqa_wide_supported(const RowFormatDev& f, int dim, int heads) {
    return f.dtype == kRowFp8 && fp8_quads_aligned(f) && f.dim == dim && dim % (16 * kColWarps) == 0 &&
           dim <= kMaxMqaDim && heads > kHeads / 2 && heads <= kHeads && smem_bytes(dim, f.bytes) <= kMaxSmem;
}

bool mqa_wide_fp8_out_supported(const RowFormatDev& f, int dim, int heads) {
    return mqa_wide_supported(f, dim, heads) && v4_rows(f);
}

int mqa_wide_segment_keys(int64_t keys) {
    return static_cast<int>(std::clamp<int64_t>((keys + kKeys - 1) / kKeys * kKeys, kKeys, kSegmentKeys));
}

// Splits so that the grid has about two blocks per SM (one resident at a time), in whole chunks of 64 keys.
int mqa_wide_keys_per_split(int64_t n_tokens, int max_keys) {
    const int64_t chunks = std::max<int64_t>(1, (max_keys + kKeys - 1) / kKeys);
    const int64_t want = std::max<int64_t>(1, 264 / std::max<int64_t>(1, n_tokens));
    const int64_t splits = std::min(chunks, want);
    return static_cast<int>(kKeys * ((chunks + splits - 1) / splits));
}

int mqa_wide_splits(int64_t n_tokens, int max_keys) {
    const int per = mqa_wide_keys_per_split(n_tokens, max_keys);
    return std::max(1, (max_keys + per - 1) / per);
}

void launch_attention_mqa_wide(cudaStream_t st, const StepMeta& m, const AttentionArgs& a, const MqaWideLaunch& w) {
    if (m.n_tokens == 0) return;
    static bool configured = false;  // once: every supported shape fits kMaxSmem
    if (!configured) {
        for (auto* kernel : {attention_mqa_wide_kernel<false, false>, attention_mqa_wide_kernel<true, false>,
                             attention_mqa_wide_kernel<false, true>, attention_mqa_wide_kernel<true, true>}) {
            cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(kMaxSmem));
        }
        configured = true;
    }
    MqaWideLaunch launch = w;
    launch.segment_keys = mqa_wide_segment_keys(w.segment_keys);
    if (w.wgmma && w.out_codes == nullptr && mqa_wgmma_supported(a.format, a.dim, a.heads)) {
        launch_attention_mqa_wgmma(st, m, a, launch);
    } else {
        const dim3 grid(static_cast<unsigned>(m.n_tokens), static_cast<unsigned>(std::max(1, w.splits)));
        const bool v4 = v4_rows(a.format);
        auto* kernel = a.norm_queries
                           ? (v4 ? attention_mqa_wide_kernel<true, true> : attention_mqa_wide_kernel<true, false>)
                           : (v4 ? attention_mqa_wide_kernel<false, true> : attention_mqa_wide_kernel<false, false>);
        launch_kernel(kernel, grid, kThreads, smem_bytes(a.dim, a.format.bytes), st, m, a, launch);
    }
    if (w.splits > 1) {
        launch_attention_combine(st, m, a, static_cast<int64_t>(m.n_tokens) * a.heads, w.splits, w.part_acc, w.part_ml);
    }
}

}  // namespace dsv4::cuda
