// Sequence state on the GPU: the compressor (pool completed windows into entries of the paged store, then keep
// the per-token records later windows need) and the sliding-window ring writes. Launch shapes depend only on the
// step's token count: which tokens complete a window is decided on the device from their positions.
#include "backend/cuda/kernels.h"
#include "backend/cuda/pdl.cuh"
#include "backend/cuda/quant_sim.cuh"
#include "backend/cuda/state_codec.cuh"

namespace dsv4::cuda {
namespace {

constexpr int kMaxSlots = kMaxCompressSlots;

// kv and gate + ape of absolute position `pos` of sequence `seq`: this step's projections or the pending ring.
__device__ void record(const StepMeta& m, const CompressArgs& c, int seq, int64_t pos, const float** kv,
                       float* gate_ape_offset, const float** gate) {
    const int64_t start = m.seq_start[seq];
    if (pos >= start) {
        const int64_t t = m.seq_token_begin[seq] + (pos - start);
        *kv = c.a + t * c.width;
        *gate = c.g + t * c.width;
        *gate_ape_offset = 1.0f;  // the ape row still has to be added
    } else {
        const float* rec = c.pending + (static_cast<int64_t>(m.seq_slot[seq]) * c.rows + pos % c.rows) * 2 * c.width;
        *kv = rec;
        *gate = rec + c.width;
        *gate_ape_offset = 0.0f;  // stored with ape added
    }
}

// Where slot i of an entry's window reads: its kv and gate rows at the channel offset, and the ape row to add (times
// 0 when the record has it already). The same for every channel: found once per block.
struct SlotRows {
    const float* kv[kMaxSlots];
    const float* gate[kMaxSlots];
    const float* ape[kMaxSlots];
    float with_ape[kMaxSlots];
};

// The pooled value of channel ch over the window's n slots: softmax of the gates, then the weighted sum, in slot
// order. kMaxN: a bound on n known at compile time, the loops unrolled so the slots stay in registers (CSA and the
// indexer: 8 slots); 0: any n up to kMaxSlots, in local arrays (HCA, an entry every 128 tokens). The same arithmetic.
template <typename Acc, int kMaxN>
__device__ __forceinline__ Acc pool_channel(const SlotRows& s, int n, int ch) {
    constexpr int kSlots = kMaxN > 0 ? kMaxN : kMaxSlots;
    constexpr int kUnroll = kMaxN > 0 ? kMaxN : 1;
    float vals[kSlots], gates[kSlots];
#pragma unroll kUnroll
    for (int i = 0; i < kSlots; ++i) {  // every slot's loads issued before any is used (unrolled)
        if (i >= n) break;
        vals[i] = s.kv[i][ch];
        gates[i] = s.gate[i][ch] + s.with_ape[i] * s.ape[i][ch];
    }
    float mx = -INFINITY;
#pragma unroll kUnroll
    for (int i = 0; i < kSlots; ++i) {
        if (i >= n) break;
        mx = fmaxf(mx, gates[i]);
    }
    Acc e[kSlots];
    Acc sum = 0;
#pragma unroll kUnroll
    for (int i = 0; i < kSlots; ++i) {
        if (i >= n) break;
        sum += (e[i] = exp_acc(Acc(gates[i]) - Acc(mx)));
    }
    Acc acc = 0;
#pragma unroll kUnroll
    for (int i = 0; i < kSlots; ++i) {
        if (i >= n) break;
        acc += e[i] / sum * vals[i];
    }
    return acc;
}

// Token t emits its entry when it completes a window (pos + 1 divisible by ratio); every thread of the block calls.
// Acc: the numerics mode's arithmetic (double in reference numerics: cuda_common.cuh).
template <typename Acc>
__device__ void emit_entry(const StepMeta& m, const CompressArgs& c, int t) {
    __shared__ float entry[kMaxCompressHeadDim];
    __shared__ Acc scratch[32];
    __shared__ SlotRows slots;
    const int64_t pos = m.positions[t];
    if ((pos + 1) % c.ratio != 0) return;
    const int seq = m.seq_of_token[t];
    const int64_t window = pos / c.ratio;
    const int hd = c.head_dim;
    // The window's slots: with overlap, the previous window's records (their first hd channels) then this one's
    // (channels hd..), else this window's.
    const bool previous = c.overlap && window > 0;
    const int n = previous ? 2 * c.ratio : c.ratio;
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
        const int64_t p = previous ? c.ratio * (window - 1) + i : c.ratio * window + i;
        const int offset = c.overlap && !(previous && i < c.ratio) ? hd : 0;
        const float *kv, *gate;
        float with_ape;
        record(m, c, seq, p, &kv, &with_ape, &gate);
        slots.kv[i] = kv + offset;
        slots.gate[i] = gate + offset;
        slots.ape[i] = c.ape + (p % c.ratio) * c.width + offset;
        slots.with_ape[i] = with_ape;
    }
    __syncthreads();
    // Channels are independent: each thread pools its channels over the window's slots.
    for (int ch = threadIdx.x; ch < hd; ch += blockDim.x) {
        const Acc acc = n <= 8 ? pool_channel<Acc, 8>(slots, n, ch) : pool_channel<Acc, 0>(slots, n, ch);
        entry[ch] = store_acc(acc, c.reference);
    }
    __syncthreads();
    // RMSNorm with weight, then RoPE at the window's first position, then the reference roundings.
    Acc sq = 0;
    for (int ch = threadIdx.x; ch < hd; ch += blockDim.x) sq += Acc(entry[ch]) * entry[ch];
    const Acc inv = Acc(1) / sqrt_acc(block_sum(sq, scratch) / static_cast<Acc>(hd) + Acc(c.norm_eps));
    for (int ch = threadIdx.x; ch < hd; ch += blockDim.x) {
        const Acc v = entry[ch] * inv * c.norm[ch];
        entry[ch] = store_acc(v, c.reference);
    }
    __syncthreads();
    const int nope = hd - c.rope_dim;
    for (int i = threadIdx.x; i < c.rope_dim / 2; i += blockDim.x) {
        const float angle = static_cast<float>(window * c.ratio) * c.inv_freq[i];
        const float co = static_cast<float>(cos(static_cast<double>(angle)));
        const float si = static_cast<float>(sin(static_cast<double>(angle)));
        float* v = entry + nope + 2 * i;
        const Acc x0 = v[0], x1 = v[1];
        v[0] = store_acc(x0 * co - x1 * si, c.reference);
        v[1] = store_acc(x1 * co + x0 * si, c.reference);
    }
    __syncthreads();
    if (c.reference && threadIdx.x < 32) {
        if (c.indexer) {
            warp_hadamard(entry, hd);
            warp_block_sim(entry, hd, 32, 1, true);
        } else {
            warp_block_sim(entry, nope, 64, 0, true, c.format.fp8);
        }
    }
    __syncthreads();
    const int64_t row = paged_row(m, seq, window, c.per_block);
    if (row < 0) {
        if (threadIdx.x == 0) flag_error(m, kErrorBlockTable);
        return;
    }
    if (threadIdx.x < 32) warp_encode_row(entry, c.store + row * c.format.bytes, c.format);
}

// Keep (kv, gate + ape) of token t's position when later windows (or a rewind) may still read it.
__device__ void keep_record(const StepMeta& m, const CompressArgs& c, int t) {
    const int seq = m.seq_of_token[t];
    const int64_t pos = m.positions[t];
    const int64_t end = m.seq_start[seq] + m.seq_n_tokens[seq];
    if (pos < end - c.rows) return;
    float* rec = c.pending + (static_cast<int64_t>(m.seq_slot[seq]) * c.rows + pos % c.rows) * 2 * c.width;
    const float* ape = c.ape + (pos % c.ratio) * c.width;
    const float* a = c.a + static_cast<int64_t>(t) * c.width;
    const float* g = c.g + static_cast<int64_t>(t) * c.width;
    // Four channels' loads in flight before any store (one at a time it made a round trip a channel).
    batched_loads<4>(
        static_cast<int>(threadIdx.x), c.width, static_cast<int>(blockDim.x),
        [&](int i) { return make_float3(a[i], g[i], ape[i]); },
        [&](int i, float3 v) {
            rec[i] = v.x;
            rec[c.width + i] = v.y + v.z;
        });
}

// One block per step token; the tokens that complete a window emit its entry.
template <typename Acc>
__global__ void compress_emit_kernel(StepMeta m, CompressArgs c) {
    pdl_begin();
    emit_entry<Acc>(m, c, static_cast<int>(blockIdx.x));
}

// One block per step token, launched after every emission's reads.
__global__ void compress_keep_kernel(StepMeta m, CompressArgs c) {
    pdl_begin();
    keep_record(m, c, static_cast<int>(blockIdx.x));
}

// A one-token step in one launch: the emission, then (its reads done) the keep. Two launches otherwise, because the
// blocks of a longer step would keep records that other blocks' emissions still read.
template <typename Acc>
__global__ void compress_one_token_kernel(StepMeta m, CompressArgs c) {
    pdl_begin();
    emit_entry<Acc>(m, c, 0);
    __syncthreads();
    keep_record(m, c, 0);
}

// One warp per step token: encode its K=V row into the ring (the last ring_rows positions of each sequence).
__global__ void store_window_kernel(StepMeta m, const float* kv, RowFormatDev f, int ring_rows, uint8_t* ring) {
    pdl_begin();
    const int64_t t = blockIdx.x * static_cast<int64_t>(blockDim.x / 32) + threadIdx.x / 32;
    if (t >= m.n_tokens) return;
    uint8_t* dst = ring_row(m, t, ring_rows, ring, f.bytes);
    if (dst != nullptr) warp_encode_row(kv + t * f.dim, dst, f);
}

// One warp per row.
__global__ void encode_rows_kernel(const float* src, int64_t n_rows, RowFormatDev f, uint8_t* dst) {
    pdl_begin();
    const int64_t r = blockIdx.x * static_cast<int64_t>(blockDim.x / 32) + threadIdx.x / 32;
    if (r >= n_rows) return;
    warp_encode_row(src + r * f.dim, dst + r * f.bytes, f);
}

}  // namespace

void launch_compress(cudaStream_t s, const StepMeta& m, const CompressArgs& c) {
    if (m.n_tokens == 0) return;
    if (m.n_tokens == 1) {
        if (c.reference) {
            launch_kernel(compress_one_token_kernel<double>, 1, 256, 0, s, m, c);
        } else {
            launch_kernel(compress_one_token_kernel<float>, 1, 256, 0, s, m, c);
        }
        return;
    }
    if (c.reference) {
        launch_kernel(compress_emit_kernel<double>, static_cast<unsigned>(m.n_tokens), 128, 0, s, m, c);
    } else {
        launch_kernel(compress_emit_kernel<float>, static_cast<unsigned>(m.n_tokens), 128, 0, s, m, c);
    }
    launch_kernel(compress_keep_kernel, static_cast<unsigned>(m.n_tokens), 128, 0, s, m,
                  c);  // after every emission's reads
}

void launch_store_window(cudaStream_t s, const StepMeta& m, const float* kv, const RowFormatDev& f, int ring_rows,
                         uint8_t* ring) {
    if (m.n_tokens > 0)
        launch_kernel(store_window_kernel, blocks_for(m.n_tokens, 4), 128, 0, s, m, kv, f, ring_rows, ring);
}

void launch_encode_rows(cudaStream_t s, const float* src, int64_t n_rows, const RowFormatDev& f, uint8_t* dst) {
    if (n_rows > 0) launch_kernel(encode_rows_kernel, blocks_for(n_rows, 4), 128, 0, s, src, n_rows, f, dst);
}

}  // namespace dsv4::cuda
