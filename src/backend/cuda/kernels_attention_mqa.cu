// Tensor-core sparse attention for `fast` numerics (MQA: every head attends over the same K=V rows). One block per
// (token, group of 32 heads, key split): a chunk of 64 key rows is decoded once into shared memory as bf16 and serves
// all the heads twice, as K for the scores and as V for the outputs (mma.sync m16n8k16 bf16, float32 accumulation).
// The online softmax runs on the accumulator registers; each split writes the same partial (acc, max, sum) as the
// SIMT split kernel, and attention_combine_kernel merges the splits with the sink.
//
// Numerics (fast): q and the key rows are rounded to bf16 (bf16 and fp8_ds_mla rows are exact in bf16), the
// probabilities are rounded to bf16 for the P.V product (as the reference does) and their float32 sum is the
// denominator.
#include <cuda_bf16.h>

#include <algorithm>

#include "backend/cuda/attention_rows.cuh"
#include "backend/cuda/head_rows.cuh"
#include "backend/cuda/mma_bf16.cuh"
#include "backend/cuda/pdl.cuh"

namespace dsv4::cuda {
namespace {

constexpr int kHeads = 32;  // heads per block: 2 warp rows of 16
constexpr int kKeys = 64;   // keys per chunk: 8 warp columns of 8 for the scores
constexpr int kWarps = 16;  // warp (r, c): heads 16 r .., keys 8 c .. (scores) and dims eighth c (outputs)
constexpr int kCols = 8;    // warp columns
constexpr int kPad = 8;     // bf16 elements of row padding (conflict-free fragment loads)
constexpr int kScorePad = 4;
constexpr int kMaxTiles = kMaxMqaDim / kCols / 8;  // n-tiles of 8 dims per warp in its output eighth

struct Smem {
    __nv_bfloat16* q;      // [kHeads][dim + kPad]
    __nv_bfloat16* kv;     // [kKeys][dim + kPad]
    float* scores;         // [kHeads][kKeys + kScorePad]
    const uint8_t** rows;  // [kKeys] stored row of each key of the chunk (null: masked)
};

__host__ __device__ constexpr size_t smem_bytes(int dim) {
    return (static_cast<size_t>(kHeads + kKeys) * (dim + kPad)) * 2 + kHeads * (kKeys + kScorePad) * 4 +
           kKeys * sizeof(void*);
}

__device__ Smem carve(unsigned char* base, int dim) {
    Smem s;
    s.q = reinterpret_cast<__nv_bfloat16*>(base);
    s.kv = s.q + kHeads * (dim + kPad);
    s.scores = reinterpret_cast<float*>(s.kv + kKeys * (dim + kPad));
    s.rows = reinterpret_cast<const uint8_t**>(s.scores + kHeads * (kKeys + kScorePad));
    return s;
}

// The block's query rows as bf16 (heads past the last are zero), eight loads a thread in flight.
__device__ void load_queries(const AttentionArgs& a, int t, int h0, const Smem& s) {
    const int ld = a.dim + kPad;
    stage_head_rows<8>(a.q, t, a.heads, h0, kHeads, a.dim, [&](int r, int c, float4 v) {
        auto* dst = reinterpret_cast<uint32_t*>(s.q + r * ld + c);
        dst[0] = pack_bf16(v.x, v.y);
        dst[1] = pack_bf16(v.z, v.w);
    });
}

// fp8_ds_mla key rows, four codes per load: a warp's loads for kRowBatch rows are issued before any is decoded (the
// rows' latency once a batch; a row at a time it was a round trip per 128 elements of every row).
constexpr int kRowBatch = 2;
constexpr int kQuadsPerLane = kMaxMqaDim / 128;
__device__ void load_keys_fp8_quads(const AttentionArgs& a, const Smem& s) {
    const int ld = a.dim + kPad, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    for (int r0 = warp; r0 < kKeys; r0 += kRowBatch * kWarps) {
        Fp8RowQuad raw[kRowBatch][kQuadsPerLane];
#pragma unroll
        for (int b = 0; b < kRowBatch; ++b) {
            const int r = r0 + b * kWarps;
            const uint8_t* row = r < kKeys ? s.rows[r] : nullptr;
#pragma unroll
            for (int j = 0; j < kQuadsPerLane; ++j) {
                const int i = lane * 4 + 128 * j;
                if (row != nullptr && i < a.dim) raw[b][j] = load_fp8_row_quad(row, i, a.format);
            }
        }
#pragma unroll
        for (int b = 0; b < kRowBatch; ++b) {
            const int r = r0 + b * kWarps;
            if (r >= kKeys) break;
            const bool present = s.rows[r] != nullptr;
#pragma unroll
            for (int j = 0; j < kQuadsPerLane; ++j) {
                const int i = lane * 4 + 128 * j;
                if (i >= a.dim) break;
                float v[4] = {0.0f, 0.0f, 0.0f, 0.0f};
                if (present) decode_fp8_row_quad(raw[b][j], i, a.format, v);
                auto* dst = reinterpret_cast<uint32_t*>(s.kv + r * ld + i);
                dst[0] = pack_bf16(v[0], v[1]);
                dst[1] = pack_bf16(v[2], v[3]);
            }
        }
    }
}

// Decodes the chunk's key rows into bf16 (masked keys: zeros). One warp per row, four elements per lane and step.
template <int D, bool kQuad>
__device__ void load_keys(const AttentionArgs& a, const Smem& s) {
    if constexpr (kQuad) {
        load_keys_fp8_quads(a, s);
        return;
    }
    const int ld = a.dim + kPad, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    for (int r = warp; r < kKeys; r += kWarps) {
        const uint8_t* row = s.rows[r];
        for (int i = lane * 4; i < a.dim; i += 128) {
            float v[4] = {0.0f, 0.0f, 0.0f, 0.0f};
            if (row != nullptr) {
#pragma unroll
                for (int e = 0; e < 4; ++e) v[e] = row_elem<D>(row, i + e, a.format);
            }
            auto* dst = reinterpret_cast<uint32_t*>(s.kv + r * ld + i);
            dst[0] = pack_bf16(v[0], v[1]);
            dst[1] = pack_bf16(v[2], v[3]);
        }
    }
}

// Scores of this warp's 16 heads x 8 keys over the full dim, scaled, into shared memory (-inf for masked keys).
__device__ void chunk_scores(const AttentionArgs& a, const Smem& s, int head0, int key0) {
    const int ld = a.dim + kPad, lane = threadIdx.x % 32, g = lane / 4, tq = lane % 4;
    float acc[4] = {};
    const __nv_bfloat16* qa = s.q + (head0 + g) * ld + 2 * tq;
    for (int k0 = 0; k0 < a.dim; k0 += 16) {
        uint32_t af[4];
        af[0] = *reinterpret_cast<const uint32_t*>(qa + k0);
        af[1] = *reinterpret_cast<const uint32_t*>(qa + 8 * ld + k0);
        af[2] = *reinterpret_cast<const uint32_t*>(qa + k0 + 8);
        af[3] = *reinterpret_cast<const uint32_t*>(qa + 8 * ld + k0 + 8);
        const __nv_bfloat16* kb = s.kv + (key0 + g) * ld + k0 + 2 * tq;
        const uint32_t bf[2] = {*reinterpret_cast<const uint32_t*>(kb), *reinterpret_cast<const uint32_t*>(kb + 8)};
        mma_bf16(acc, af, bf);
    }
#pragma unroll
    for (int e = 0; e < 4; ++e) {
        const int head = head0 + g + 8 * (e / 2), key = key0 + 2 * tq + (e % 2);
        s.scores[head * (kKeys + kScorePad) + key] = s.rows[key] != nullptr ? acc[e] * a.scale : -INFINITY;
    }
}

template <int D, bool kQuad>
__global__ void __launch_bounds__(kWarps * 32, 1)
    attention_mqa_kernel(StepMeta m, AttentionArgs a, int splits, int keys_per_split, float* part_acc, float* part_ml) {
    pdl_begin();
    extern __shared__ __align__(16) unsigned char smem_raw[];
    const Smem s = carve(smem_raw, a.dim);
    const int t = blockIdx.x, h0 = blockIdx.y * kHeads, split = blockIdx.z;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, tq = lane % 4;
    const int wr = warp / kCols, wc = warp % kCols;  // head rows 16 wr .., key columns / output dims eighth wc
    const int ld = a.dim + kPad, eighth = a.dim / kCols, n_tiles = eighth / 8;
    const int64_t pos = m.positions[t];
    const int n_window = static_cast<int>(min64(a.window, pos + 1));
    int n_keys = n_window;
    if (a.ratio > 0) n_keys += a.csa ? a.topk_k : static_cast<int>((pos + 1) / a.ratio);
    const int begin = split * keys_per_split, end = min(n_keys, begin + keys_per_split);
    load_queries(a, t, h0, s);
    float out[kMaxTiles][4] = {};
    float mx[2] = {-INFINITY, -INFINITY}, sum[2] = {0.0f, 0.0f};  // rows g and g + 8 of the warp's 16 heads
    for (int c0 = begin; c0 < end; c0 += kKeys) {
        __syncthreads();  // the previous chunk is done with the rows, keys and scores
        if (threadIdx.x < kKeys) {
            const int j = c0 + static_cast<int>(threadIdx.x);
            s.rows[threadIdx.x] = j < end ? key_row(m, a, t, j, n_window) : nullptr;
        }
        __syncthreads();
        load_keys<D, kQuad>(a, s);
        __syncthreads();
        chunk_scores(a, s, 16 * wr, 8 * wc);
        __syncthreads();
        // Online softmax over the chunk for rows g, g + 8: this lane holds keys 16 kb + 2 tq + {0, 1, 8, 9}, the
        // A-fragment positions of P for the P.V products. First the new maxima and the rescale of what came before.
        const float* srow[2];
#pragma unroll
        for (int half = 0; half < 2; ++half) {
            srow[half] = s.scores + (16 * wr + g + 8 * half) * (kKeys + kScorePad) + 2 * tq;
            float chunk_max = -INFINITY;
#pragma unroll
            for (int kb = 0; kb < kKeys / 16; ++kb) {
                const float* k4 = srow[half] + 16 * kb;
                chunk_max = fmaxf(chunk_max, fmaxf(fmaxf(k4[0], k4[1]), fmaxf(k4[8], k4[9])));
            }
            const float m_new = fmaxf(mx[half], quad_max(chunk_max));
            // Nothing seen yet (every key so far masked): keep the zeros, no NaN from -inf - -inf.
            const float correction = m_new == -INFINITY ? 1.0f : expf(mx[half] - m_new);
            mx[half] = m_new;
            sum[half] *= correction;
#pragma unroll
            for (int nt = 0; nt < kMaxTiles; ++nt) {
                out[nt][2 * half] *= correction;
                out[nt][2 * half + 1] *= correction;
            }
        }
        // out[heads, eighth of the dims] += P[heads, keys] . V[keys, dims]; V's column fragment pairs two keys of one
        // dim.
#pragma unroll
        for (int kb = 0; kb < kKeys / 16; ++kb) {
            uint32_t pf[4];
#pragma unroll
            for (int half = 0; half < 2; ++half) {
                float p[4];
#pragma unroll
                for (int e = 0; e < 4; ++e) {
                    const float sc = srow[half][16 * kb + (e / 2) * 8 + (e % 2)];
                    p[e] = mx[half] == -INFINITY ? 0.0f : expf(sc - mx[half]);
                    sum[half] += p[e];
                }
                pf[half] = pack_bf16(p[0], p[1]);      // keys 2 tq, 2 tq + 1
                pf[half + 2] = pack_bf16(p[2], p[3]);  // keys 2 tq + 8, + 9
            }
            const __nv_bfloat16* v0 = s.kv + (16 * kb + 2 * tq) * ld + wc * eighth + g;
#pragma unroll
            for (int nt = 0; nt < kMaxTiles; ++nt) {
                if (nt < n_tiles) {
                    const __nv_bfloat16* v = v0 + 8 * nt;
                    const uint32_t bf[2] = {pack_raw(v[0], v[ld]), pack_raw(v[8 * ld], v[9 * ld])};
                    mma_bf16(out[nt], pf, bf);
                }
            }
        }
    }
    // Partials in the split kernel's layout: acc unnormalised, (max, sum) per (token, head, split).
#pragma unroll
    for (int half = 0; half < 2; ++half) {
        const float total = quad_sum(sum[half]);
        const int h = h0 + 16 * wr + g + 8 * half;
        if (h >= a.heads) continue;
        const int64_t part = (static_cast<int64_t>(t) * a.heads + h) * splits + split;
        float* acc = part_acc + part * a.dim + wc * eighth + 2 * tq;
#pragma unroll
        for (int nt = 0; nt < kMaxTiles; ++nt) {
            if (nt < n_tiles)
                *reinterpret_cast<float2*>(acc + 8 * nt) = make_float2(out[nt][2 * half], out[nt][2 * half + 1]);
        }
        if (wc == 0 && tq == 0) {
            part_ml[2 * part] = mx[half];
            part_ml[2 * part + 1] = total;
        }
    }
}

template <int D, bool kQuad>
void launch_typed(cudaStream_t st, const StepMeta& m, const AttentionArgs& a, dim3 grid, int splits, int per,
                  float* part_acc, float* part_ml) {
    const size_t bytes = smem_bytes(a.dim);
    static bool configured = false;  // the largest dim's smem is allowed once per instantiation
    if (!configured) {
        cudaFuncSetAttribute(attention_mqa_kernel<D, kQuad>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             static_cast<int>(smem_bytes(kMaxMqaDim)));
        configured = true;
    }
    launch_kernel(attention_mqa_kernel<D, kQuad>, grid, kWarps * 32, bytes, st, m, a, splits, per, part_acc, part_ml);
}

}  // namespace

bool mqa_attention_supported(const RowFormatDev& f, int dim) {
    return dim % (8 * kCols) == 0 && dim <= kMaxMqaDim && f.dim == dim &&
           (f.dtype != kRowFp8 || (!f.index_key && (f.dim - f.rope_dim) % 4 == 0));
}

// Splits so that the grid has about four blocks per SM, in whole chunks of 64 keys.
int mqa_keys_per_split(int64_t n_tokens, int heads, int max_keys, int fixed) {
    if (fixed > 0) return fixed;
    const int64_t chunks = (max_keys + kKeys - 1) / kKeys;
    const int64_t head_blocks = (heads + kHeads - 1) / kHeads;
    const int64_t want = std::max<int64_t>(1, 528 / std::max<int64_t>(1, n_tokens * head_blocks));
    const int64_t splits = std::min(chunks, want);
    return static_cast<int>(kKeys * ((chunks + splits - 1) / splits));
}

int mqa_attention_splits(int64_t n_tokens, int heads, int max_keys, int fixed_keys_per_split) {
    const int per = mqa_keys_per_split(n_tokens, heads, max_keys, fixed_keys_per_split);
    return std::max(1, (max_keys + per - 1) / per);
}

void launch_attention_mqa(cudaStream_t st, const StepMeta& m, const AttentionArgs& a, int max_keys, float* part_acc,
                          float* part_ml) {
    const int64_t rows = static_cast<int64_t>(m.n_tokens) * a.heads;
    if (rows == 0) return;
    const int per = mqa_keys_per_split(m.n_tokens, a.heads, max_keys, a.fixed_keys_per_split);
    const int splits = mqa_attention_splits(m.n_tokens, a.heads, max_keys, a.fixed_keys_per_split);
    const dim3 grid(static_cast<unsigned>(m.n_tokens), blocks_for(a.heads, kHeads), static_cast<unsigned>(splits));
    const bool quad = a.format.dtype == kRowFp8 && fp8_quads_aligned(a.format);  // four codes per load
    switch (a.format.dtype) {
        case kRowBf16:
            launch_typed<kRowBf16, false>(st, m, a, grid, splits, per, part_acc, part_ml);
            break;
        case kRowFp8:
            if (quad) {
                launch_typed<kRowFp8, true>(st, m, a, grid, splits, per, part_acc, part_ml);
            } else {
                launch_typed<kRowFp8, false>(st, m, a, grid, splits, per, part_acc, part_ml);
            }
            break;
        default:
            launch_typed<kRowF32, false>(st, m, a, grid, splits, per, part_acc, part_ml);
            break;
    }
    launch_attention_combine(st, m, a, rows, splits, part_acc, part_ml);
}

}  // namespace dsv4::cuda
