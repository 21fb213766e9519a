// Staging shared by the two wide attention kernels (kernels_attention_wide.cu on mma.sync, kernels_attention_wgmma.cu
// on wgmma): a token's query rows as bf16 (RMS-normed and rotated where asked), the stored rows of a segment of its
// keys, a chunk's stored bytes copied into shared memory, and their decode to bf16. Each kernel lays its tiles out its
// own way, so the bf16 values go to a store callback: put(row, col, packed) with packed four bf16 values at columns
// col .. col + 3 (col a multiple of 4).
#pragma once

#include "backend/cuda/attention_rows.cuh"
#include "backend/cuda/head_rows.cuh"
#include "backend/cuda/mma_bf16.cuh"
#include "backend/cuda/norm_rope_row.cuh"
#include "backend/cuda/wgmma_fp8.cuh"

namespace dsv4::cuda {

// Floats of shared scratch stage_normed_query_rows needs: the token's query cosines and sines.
constexpr int kWideQueryScratch = kMaxQueryNormRopeDims;

// The token's query rows [0, kRows) as bf16, as stored (rows past a.heads are zero), eight loads a thread in flight.
template <int kRows, typename Put>
__device__ void stage_wide_queries(const AttentionArgs& a, int t, Put put) {
    stage_head_rows<8>(a.q, t, a.heads, 0, kRows, a.dim, [&](int r, int c, float4 v) {
        put(r, c, make_uint2(pack_bf16(v.x, v.y), pack_bf16(v.z, v.w)));
    });
}

// The token's query rows RMS-normed and rotated with norm_rope_rows_kernel's bits, a row a warp: a warp loads
// kBatchRows of its rows at once (one memory round trip for them), then takes each row's inverse RMS
// (rms_inverse_of_lanes) and its elements normed and rotated (norm_rope_lanes): put(r, i, value) for each element i
// of each row r < kRows (zeros for rows past a.heads). scratch: kWideQueryScratch floats for the token's cosines and
// sines. Needs a.dim % 32 == 0 and a.dim <= kMaxNormRowDim (the fused query norm's conditions).
template <int kRows, int kThreads, int kBatchRows, typename PutOne>
__device__ void stage_normed_query_rows(const StepMeta& m, const AttentionArgs& a, int t, float* scratch, PutOne put) {
    constexpr int kWarps = kThreads / 32, kRowsPerWarp = kRows / kWarps;
    static_assert(kRows % kWarps == 0 && kRowsPerWarp % kBatchRows == 0, "whole rows a warp, whole batches");
    const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
    auto* cos_sin = reinterpret_cast<float2*>(scratch);  // [query_rope_dims / 2]
    const int rope0 = a.dim - a.query_rope_dims;
#pragma unroll 1
    for (int b0 = 0; b0 < kRowsPerWarp; b0 += kBatchRows) {
        float v[kBatchRows][kMaxNormRowPerLane];
#pragma unroll
        for (int b = 0; b < kBatchRows; ++b) {
            const int r = warp + kWarps * (b0 + b);
            if (r < a.heads) load_norm_row(a.q + (static_cast<int64_t>(t) * a.heads + r) * a.dim, a.dim, v[b]);
        }
        if (b0 == 0) {  // the table once, while the first batch's loads are in flight (b0 is the block's)
            for (int i = static_cast<int>(threadIdx.x); i < a.query_rope_dims / 2; i += kThreads)
                cos_sin[i] = rope_cos_sin(m, t, i, a.query_inv_freq, false);
            __syncthreads();
        }
#pragma unroll
        for (int b = 0; b < kBatchRows; ++b) {
            const int r = warp + kWarps * (b0 + b);
            if (r >= a.heads) {
                for (int i = lane; i < a.dim; i += 32) put(r, i, 0.0f);
                continue;
            }
            const float inv = rms_inverse_of_lanes<float>(v[b], a.dim, a.query_eps);
            norm_rope_lanes<float>(
                v[b], inv, nullptr, a.dim, rope0, false, [&](int p) { return cos_sin[p]; },
                [&](int i, float x) { put(r, i, x); });
        }
    }
}

// Stored rows of keys [seg0, seg0 + seg_keys) of token t, a thread per key: null past the token's n_keys and where
// key_row finds no key (flagging what it must).
template <int kThreads>
__device__ void resolve_wide_rows(const StepMeta& m, const AttentionArgs& a, int t, int seg0, int seg_keys, int n_keys,
                                  int n_window, const uint8_t** rows) {
    for (int i = static_cast<int>(threadIdx.x); i < seg_keys; i += kThreads) {
        const int j = seg0 + i;
        rows[i] = j < n_keys ? key_row(m, a, t, j, n_window) : nullptr;
    }
}

// Starts copying the stored bytes of keys [c0, c0 + kKeys) of the segment into `staged`: 8-byte cp.async (a row's size
// is a multiple of 8, fp8_quads_aligned), a warp per row; keys that are none copy nothing. One commit group a thread.
template <int kKeys, int kThreads>
__device__ void stage_wide_chunk(const uint8_t* const* rows, int c0, uint8_t* staged, int row_bytes) {
    constexpr int kWarps = kThreads / 32;
    const int warp = static_cast<int>(threadIdx.x) / 32;
    const int lane = static_cast<int>(threadIdx.x) % 32, words = row_bytes / 8;
    for (int r = warp; r < kKeys; r += kWarps) {
        const uint8_t* row = rows[c0 + r];
        if (row == nullptr) continue;
        uint8_t* dst = staged + r * row_bytes;
        for (int w = lane; w < words; w += 32) cp_async8(dst + 8 * w, row + 8 * w);
    }
    cp_async_commit();
}

// The staged chunk as bf16 rows (keys that are none: zeros), decoded exactly as the other attention kernels decode
// stored rows; a warp per row, four elements a lane and step.
template <int kKeys, int kThreads, typename Put>
__device__ void decode_wide_chunk(const AttentionArgs& a, const uint8_t* const* rows, const uint8_t* staged, int c0,
                                  Put put) {
    constexpr int kWarps = kThreads / 32;
    const int warp = static_cast<int>(threadIdx.x) / 32;
    const int lane = static_cast<int>(threadIdx.x) % 32;
    for (int r = warp; r < kKeys; r += kWarps) {
        const bool present = rows[c0 + r] != nullptr;
        const uint8_t* row = staged + r * a.format.bytes;
#pragma unroll
        for (int j = 0; j < kMaxMqaDim / 128; ++j) {
            const int i = lane * 4 + 128 * j;
            if (i >= a.dim) break;
            float v[4] = {0.0f, 0.0f, 0.0f, 0.0f};
            if (present) fp8_row_quad(row, i, a.format, v);
            put(r, i, make_uint2(pack_bf16(v[0], v[1]), pack_bf16(v[2], v[3])));
        }
    }
}

// The keys of token t that split `split` attends: [begin, end) of its n_window window keys followed by its compressed
// ones (all of them with one split; a split past the token's keys is empty and writes an empty partial).
struct WideKeyRange {
    int n_window, begin, end;
};
__device__ __forceinline__ WideKeyRange wide_key_range(const StepMeta& m, const AttentionArgs& a,
                                                       const MqaWideLaunch& w, int t, int split) {
    const int64_t pos = m.positions[t];
    const int n_window = static_cast<int>(min64(a.window, pos + 1));
    int n_keys = n_window;
    if (a.ratio > 0) n_keys += a.csa ? a.topk_k : static_cast<int>((pos + 1) / a.ratio);
    if (w.splits <= 1) return WideKeyRange{n_window, 0, n_keys};
    const int begin = split * w.keys_per_split;
    return WideKeyRange{n_window, begin, min(n_keys, begin + w.keys_per_split)};
}

// Where the partials of (token t, head h, split) go in the split kernel's layout: the unnormalised accumulators at
// part_acc[part * dim ..], (max, sum) at part_ml[2 part ..].
__device__ __forceinline__ int64_t wide_partial_index(const AttentionArgs& a, const MqaWideLaunch& w, int t, int h,
                                                      int split) {
    return (static_cast<int64_t>(t) * a.heads + h) * w.splits + split;
}
__device__ __forceinline__ void store_partial_max_sum(const MqaWideLaunch& w, int64_t part, float mx, float sum) {
    w.part_ml[2 * part] = mx;
    w.part_ml[2 * part + 1] = sum;
}

// A head's softmax over one split closed with its sink (attention_combine_kernel's arithmetic for one split): its
// output row is acc * factor / denom.
struct SinkClose {
    float factor, denom;
};
__device__ __forceinline__ SinkClose close_with_sink(float mx, float sum, float sink) {
    const float top = fmaxf(sink, mx);
    SinkClose c{0.0f, expf(sink - top)};
    if (mx != -INFINITY) {
        c.factor = expf(mx - top);
        c.denom += sum * c.factor;
    }
    return c;
}

// The cosines and sines of the outputs' inverse RoPE at token t, pair i at table[i] (rope_cos_sin's values, computed
// once for all the token's heads instead of once a head: in double precision they cost as much as the rest of the
// epilogue). Nothing where the outputs are not unrotated. Read after a block barrier.
constexpr int kWideUnrotatePairs = kMaxMqaDim / 2;  // unrotate_dims <= dim <= kMaxMqaDim
template <int kThreads>
__device__ void stage_unrotate_table(const StepMeta& m, const AttentionArgs& a, int t, float2* table) {
    if (a.unrotate_inv_freq == nullptr) return;
    for (int i = static_cast<int>(threadIdx.x); i < a.unrotate_dims / 2; i += kThreads)
        table[i] = rope_cos_sin(m, t, i, a.unrotate_inv_freq, true);
}

// Output dims d, d + 1 of a row from their accumulators: closed (close_with_sink), the inverse RoPE from dim rope0 on
// (rope_values' arithmetic, its cosines and sines from stage_unrotate_table).
__device__ __forceinline__ float2 closed_pair(int d, int rope0, const float2* unrotate, float acc0, float acc1,
                                              const SinkClose& c) {
    float v0 = acc0 * c.factor / c.denom, v1 = acc1 * c.factor / c.denom;
    if (d >= rope0) rope_rotate<float>(unrotate[(d - rope0) / 2], false, v0, v1, v0, v1);
    return make_float2(v0, v1);
}

// closed_pair, stored at o + d.
__device__ __forceinline__ void store_closed_pair(int d, int rope0, const float2* unrotate, float acc0, float acc1,
                                                  const SinkClose& c, float* o) {
    *reinterpret_cast<float2*>(o + d) = closed_pair(d, rope0, unrotate, acc0, acc1, c);
}

}  // namespace dsv4::cuda
