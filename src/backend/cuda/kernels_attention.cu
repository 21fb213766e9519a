// Sparse attention with sinks and the lightning indexer on the GPU (model-spec 2.5-2.9). Key rows are resolved per
// query from the step's own K=V rows, the sliding ring and the paged compressed store; every index is checked.
#include <cfloat>

#include "backend/cuda/kernels.h"

namespace dsv4::cuda {
namespace {

// Pointer to key j of query t (window rows first, then compressed rows), or null when j is not a valid key.
__device__ const float* key_row(const StepMeta& m, const AttentionArgs& a, int t, int j, int n_window) {
    const int seq = m.seq_of_token[t];
    const int64_t pos = m.positions[t];
    if (j < n_window) {
        const int64_t p = pos - (n_window - 1) + j;
        const int64_t start = m.seq_start[seq];
        if (p >= start) return a.kv + (m.seq_token_begin[seq] + (p - start)) * a.dim;
        return a.ring + (static_cast<int64_t>(m.seq_slot[seq]) * a.ring_rows + p % a.ring_rows) * a.dim;
    }
    const int64_t visible = (pos + 1) / a.ratio;
    int64_t entry = j - n_window;
    if (a.csa) {
        entry = a.topk[static_cast<int64_t>(t) * a.topk_k + entry];
        if (entry < 0) return nullptr;  // -1: nothing picked here
        if (entry >= visible) {
            flag_error(m, kErrorTopkIndex);
            return nullptr;
        }
    }
    const int64_t row = paged_row(m, seq, entry, a.per_block);
    if (row < 0) {
        flag_error(m, kErrorBlockTable);
        return nullptr;
    }
    return a.store + row * a.dim;
}

__device__ float dot_warp(const float* q, const float* k, int dim) {
    float s = 0.0f;
    for (int i = threadIdx.x % 32; i < dim; i += 32) s += q[i] * k[i];
    return warp_sum(s);
}

// One warp per (token, head): pass 1 finds the max score, pass 2 accumulates exp(s - M) v (probabilities rounded
// to bf16 in reference numerics) and the denominator with the sink.
__global__ void attention_kernel(StepMeta m, AttentionArgs a) {
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int64_t th = blockIdx.x * static_cast<int64_t>(blockDim.x / 32) + warp;
    if (th >= static_cast<int64_t>(m.n_tokens) * a.heads) return;
    const int t = static_cast<int>(th / a.heads), h = static_cast<int>(th % a.heads);
    const int64_t pos = m.positions[t];
    const int n_window = static_cast<int>(min64(a.window, pos + 1));
    int n_keys = n_window;
    if (a.ratio > 0) n_keys += a.csa ? a.topk_k : static_cast<int>((pos + 1) / a.ratio);
    const float* q = a.q + th * a.dim;
    float mx = -INFINITY;
    for (int j = 0; j < n_keys; ++j) {
        const float* k = key_row(m, a, t, j, n_window);
        if (k == nullptr) continue;
        mx = fmaxf(mx, dot_warp(q, k, a.dim) * a.scale);
    }
    const float sink = a.sinks[h];
    if (!a.reference) mx = fmaxf(mx, sink);
    float denom = expf(sink - mx);
    constexpr int kMaxPerLane = kMaxAttentionDim / 32;
    float acc[kMaxPerLane] = {};
    for (int j = 0; j < n_keys; ++j) {
        const float* k = key_row(m, a, t, j, n_window);
        if (k == nullptr) continue;
        const float p = expf(dot_warp(q, k, a.dim) * a.scale - mx);
        denom += p;
        const float pv = a.reference ? to_bf16(p) : p;
#pragma unroll
        for (int r = 0; r < kMaxPerLane; ++r) {
            const int i = lane + 32 * r;
            if (i < a.dim) acc[r] += pv * k[i];
        }
    }
    float* o = a.out + th * a.dim;
#pragma unroll
    for (int r = 0; r < kMaxPerLane; ++r) {
        const int i = lane + 32 * r;
        if (i < a.dim) o[i] = a.reference ? to_bf16(acc[r] / denom) : acc[r] / denom;
    }
}

// Index scores: one warp per (token, entry): sum_h w_h relu(q_h . K_e); ineligible entries get -inf.
__global__ void index_scores_kernel(StepMeta m, const float* q, const float* weights, const float* keys, int heads,
                                    int dim, int ratio, int per_block, int64_t max_entries, float* scores) {
    const int64_t id = blockIdx.x * static_cast<int64_t>(blockDim.x / 32) + threadIdx.x / 32;
    if (id >= static_cast<int64_t>(m.n_tokens) * max_entries) return;
    const int t = static_cast<int>(id / max_entries);
    const int64_t e = id % max_entries;
    const int64_t eligible = (m.positions[t] + 1) / ratio;
    float s = -INFINITY;
    if (e < eligible) {
        const int64_t row = paged_row(m, m.seq_of_token[t], e, per_block);
        if (row < 0) {
            if (threadIdx.x % 32 == 0) flag_error(m, kErrorBlockTable);
        } else {
            s = 0.0f;
            const float* key = keys + row * dim;
            for (int h = 0; h < heads; ++h) {
                const float d = dot_warp(q + (static_cast<int64_t>(t) * heads + h) * dim, key, dim);
                s += weights[static_cast<int64_t>(t) * heads + h] * fmaxf(d, 0.0f);
            }
        }
    }
    if (threadIdx.x % 32 == 0) scores[id] = s;
}

// Order-preserving map of a float to an unsigned key (larger float -> larger key).
__device__ uint32_t float_key(float v) {
    const uint32_t u = __float_as_uint(v);
    return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

// Top-k per token: radix select of the k-th largest key (4 passes of 8 bits), then the picks in index order: every
// entry above the threshold, and threshold ties lowest index first (the CPU backend's tie rule). One block per token.
__global__ void topk_kernel(StepMeta m, const float* scores, int64_t max_entries, int ratio, int k, int32_t* out) {
    __shared__ uint32_t histogram[256];
    __shared__ uint32_t prefix, prefix_mask;
    __shared__ int32_t remaining;
    const int t = blockIdx.x;
    const int64_t eligible = min64((m.positions[t] + 1) / ratio, max_entries);
    const int picks = static_cast<int>(min64(k, eligible));
    const float* s = scores + static_cast<int64_t>(t) * max_entries;
    int32_t* dst = out + static_cast<int64_t>(t) * k;
    for (int i = threadIdx.x; i < k; i += blockDim.x) dst[i] = -1;
    if (picks == 0) return;
    if (threadIdx.x == 0) {
        prefix = 0;
        prefix_mask = 0;
        remaining = picks;  // rank (from the top) still to find inside the current prefix
    }
    __syncthreads();
    for (int shift = 24; shift >= 0; shift -= 8) {
        for (int i = threadIdx.x; i < 256; i += blockDim.x) histogram[i] = 0;
        __syncthreads();
        for (int64_t e = threadIdx.x; e < eligible; e += blockDim.x) {
            const uint32_t key = float_key(s[e]);
            if ((key & prefix_mask) == prefix) atomicAdd(&histogram[(key >> shift) & 0xffu], 1u);
        }
        __syncthreads();
        if (threadIdx.x == 0) {
            int32_t need = remaining;
            int digit = 255;
            for (; digit > 0; --digit) {
                if (static_cast<int32_t>(histogram[digit]) >= need) break;
                need -= static_cast<int32_t>(histogram[digit]);
            }
            prefix |= static_cast<uint32_t>(digit) << shift;
            prefix_mask |= 0xffu << shift;
            remaining = need;
        }
        __syncthreads();
    }
    // prefix is now the k-th largest key; `remaining` of the entries equal to it are taken (lowest index first).
    if (threadIdx.x == 0) {
        int32_t ties = remaining;
        int32_t w = 0;
        for (int64_t e = 0; e < eligible; ++e) {  // sequential pass keeps the output in index order, ties lowest first
            const uint32_t key = float_key(s[e]);
            if (key > prefix || (key == prefix && ties > 0)) {
                if (key == prefix) --ties;
                dst[w++] = static_cast<int32_t>(e);
            }
        }
    }
}

}  // namespace

void launch_attention(cudaStream_t s, const StepMeta& m, const AttentionArgs& a) {
    const int64_t rows = static_cast<int64_t>(m.n_tokens) * a.heads;
    if (rows > 0) attention_kernel<<<blocks_for(rows, 4), 128, 0, s>>>(m, a);
}

void launch_indexer_topk(cudaStream_t s, const StepMeta& m, const float* q, const float* weights, const float* keys,
                         int heads, int dim, int ratio, int per_block, int64_t max_entries, float* scores, int k,
                         int32_t* topk) {
    if (m.n_tokens == 0) return;
    index_scores_kernel<<<blocks_for(m.n_tokens * max_entries, 4), 128, 0, s>>>(m, q, weights, keys, heads, dim, ratio,
                                                                                per_block, max_entries, scores);
    topk_kernel<<<static_cast<unsigned>(m.n_tokens), 256, 0, s>>>(m, scores, max_entries, ratio, k, topk);
}

}  // namespace dsv4::cuda
