// Sparse attention with sinks and the lightning indexer on the GPU (model-spec 2.5-2.9). Key rows are resolved per
// query from the step's own K=V rows, the sliding ring and the paged compressed store; every index is checked.
#include <cfloat>

#include "backend/cuda/attention_rows.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/pdl.cuh"

namespace dsv4::cuda {
namespace {

constexpr int kMaxPerLane = kMaxAttentionDim / 32;

// One warp per (token, head): the two-pass softmax of attention_rows.cuh over the query's window and compressed rows.
template <int D, typename Acc>
__global__ void attention_kernel(StepMeta m, AttentionArgs a) {
    pdl_begin();
    const int warp = threadIdx.x / 32;
    const int64_t th = blockIdx.x * static_cast<int64_t>(blockDim.x / 32) + warp;
    if (th >= static_cast<int64_t>(m.n_tokens) * a.heads) return;
    const int t = static_cast<int>(th / a.heads), h = static_cast<int>(th % a.heads);
    const int64_t pos = m.positions[t];
    const int n_window = static_cast<int>(min64(a.window, pos + 1));
    int n_keys = n_window;
    if (a.ratio > 0) n_keys += a.csa ? a.topk_k : static_cast<int>((pos + 1) / a.ratio);
    attend_two_pass<D, Acc>(a, th, h, n_keys, [&](int j) { return key_row(m, a, t, j, n_window); });
}

// The element of a row held by lane `lane` in register r. Generic rows: lane + 32 r (consecutive lanes read
// consecutive elements). fp8 rows in quads: each lane holds 4 consecutive elements of every 128-element chunk, so one
// 32-bit load brings its 4 codes and one scale byte covers them.
template <bool kQuad>
__device__ __forceinline__ int lane_elem(int lane, int r) {
    if constexpr (kQuad) {
        return (r / 4) * 128 + lane * 4 + (r % 4);
    } else {
        return lane + 32 * r;
    }
}

// Split-K decode/prefill attention for exact and fast numerics (online softmax per split, merged by
// attention_combine_kernel). Grid: (token, head group of kHeadsPerBlock, key split of kKeysPerSplit). All heads share
// the single K=V head (MQA), so the warps of a block read the same rows (L1 serves the repeats).
constexpr int kHeadsPerBlock = 8;
constexpr int kKeysPerSplit = 64;

template <int D, bool kQuad>
__global__ void attention_split_kernel(StepMeta m, AttentionArgs a, int splits, int keys_per_split, float* part_acc,
                                       float* part_ml) {
    pdl_begin();
    static_assert(!kQuad || (D == kRowFp8 && kMaxPerLane % 4 == 0), "quads: fp8 rows only");
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int t = blockIdx.x;
    const int h = blockIdx.y * kHeadsPerBlock + warp;
    const int split = blockIdx.z;
    if (h >= a.heads) return;
    const int64_t pos = m.positions[t];
    const int n_window = static_cast<int>(min64(a.window, pos + 1));
    int n_keys = n_window;
    if (a.ratio > 0) n_keys += a.csa ? a.topk_k : static_cast<int>((pos + 1) / a.ratio);
    const int64_t th = static_cast<int64_t>(t) * a.heads + h;
    const float* q = a.q + th * a.dim;
    float qr[kMaxPerLane];
#pragma unroll
    for (int r = 0; r < kMaxPerLane; ++r) {
        const int i = lane_elem<kQuad>(lane, r);
        qr[r] = i < a.dim ? q[i] : 0.0f;
    }
    float mx = -INFINITY, l = 0.0f;
    float acc[kMaxPerLane] = {};
    const int begin = split * keys_per_split, end = min(n_keys, begin + keys_per_split);
    for (int j = begin; j < end; ++j) {
        const uint8_t* k = key_row(m, a, t, j, n_window);
        if (k == nullptr) continue;
        float kr[kMaxPerLane];
        if constexpr (kQuad) {
#pragma unroll
            for (int r = 0; r < kMaxPerLane; r += 4) {
                const int i = lane_elem<kQuad>(lane, r);
                if (i < a.dim) {
                    fp8_row_quad(k, i, a.format, kr + r);
                } else {
                    kr[r] = kr[r + 1] = kr[r + 2] = kr[r + 3] = 0.0f;
                }
            }
        } else {
#pragma unroll
            for (int r = 0; r < kMaxPerLane; ++r) {
                const int i = lane_elem<kQuad>(lane, r);
                kr[r] = i < a.dim ? row_elem<D>(k, i, a.format) : 0.0f;
            }
        }
        float dot = 0.0f;
#pragma unroll
        for (int r = 0; r < kMaxPerLane; ++r) dot += qr[r] * kr[r];
        const float s = warp_sum(dot) * a.scale;
        const float m_new = fmaxf(mx, s);
        const float correction = expf(mx - m_new);  // 0 on the first key (mx = -inf)
        const float p = expf(s - m_new);
        l = l * correction + p;
#pragma unroll
        for (int r = 0; r < kMaxPerLane; ++r) acc[r] = acc[r] * correction + p * kr[r];
        mx = m_new;
    }
    const int64_t part = th * splits + split;
#pragma unroll
    for (int r = 0; r < kMaxPerLane; ++r) {
        const int i = lane_elem<kQuad>(lane, r);
        if (i < a.dim) part_acc[part * a.dim + i] = acc[r];
    }
    if (lane == 0) {
        part_ml[2 * part] = mx;
        part_ml[2 * part + 1] = l;
    }
}

// Merges the splits with the sink: out = sum_s e^(m_s - M) acc_s / (sum_s e^(m_s - M) l_s + e^(sink - M)).
// The splits' (max, sum) pairs go to shared memory first, a thread per split, and with them each split's factor
// exp(max_s - mx), computed once a row instead of once an element. Where a row has at most kEarlySplits splits and a
// thread per element (decode), each thread requests its element's partials together with the pairs, so the kernel
// waits one round trip for all its loads; otherwise each element reads its splits' partials eight at a time after the
// factors. The sums keep split order either way. Above kMaxCombineSplits splits the pairs are read from global memory
// where they lie and the factors computed in place.
constexpr int kMaxCombineSplits = 512;
// Threads of a row's block: a thread per element of a Flash head (512 dims) where the rows fit the device in one wave
// at one block an SM (decode at batch 1), else a quarter of that.
constexpr int kCombineWideThreads = 512, kCombineThreads = 128;
constexpr int64_t kCombineWideRows = 132;
constexpr int kEarlySplits = 12;  // decode: 640 keys (window + 512 picks) in chunks of 64 make 10
constexpr float kNoKeys = -1.0f;  // the factor of a split that saw no key (max -inf): skipped

__global__ void __launch_bounds__(kCombineWideThreads, 1)
    attention_combine_kernel(StepMeta m, AttentionArgs a, int64_t rows, int splits, const float* part_acc,
                             const float* part_ml) {
    const int64_t th = blockIdx.x;
    const float sink = th < rows ? a.sinks[th % a.heads] : 0.0f;  // a weight: read before the wait
    pdl_begin();
    __shared__ float2 staged[kMaxCombineSplits];
    __shared__ float factor[kMaxCombineSplits];
    if (th >= rows) return;
    const float* row_acc = part_acc + th * splits * a.dim;  // [split][dim]
    // Uniform over the block: this thread's element's partials requested now (loads past the last split re-read it).
    const bool early = splits <= kEarlySplits && a.dim <= static_cast<int>(blockDim.x);
    float mine[kEarlySplits];
    if (early && static_cast<int>(threadIdx.x) < a.dim) {
#pragma unroll
        for (int s = 0; s < kEarlySplits; ++s) mine[s] = row_acc[min(s, splits - 1) * a.dim + threadIdx.x];
    }
    const auto* pairs = reinterpret_cast<const float2*>(part_ml) + th * splits;
    const bool in_shared = splits <= kMaxCombineSplits;
    if (in_shared) {
        for (int s = threadIdx.x; s < splits; s += blockDim.x) staged[s] = pairs[s];
        __syncthreads();
        pairs = staged;
    }
    float mx = sink;
    for (int s = 0; s < splits; ++s) mx = fmaxf(mx, pairs[s].x);
    float denom = expf(sink - mx);
    for (int s = 0; s < splits; ++s) {
        const float ms = pairs[s].x;
        if (ms != -INFINITY) denom += pairs[s].y * expf(ms - mx);
    }
    const auto split_factor = [&](int s) {
        const float ms = pairs[s].x;
        return ms != -INFINITY ? expf(ms - mx) : kNoKeys;
    };
    if (in_shared) {
        for (int s = threadIdx.x; s < splits; s += blockDim.x) factor[s] = split_factor(s);
        __syncthreads();
    }
    // The output's inverse RoPE from registers where the rotated pairs are neighbouring lanes of one iteration.
    const int rot0 = a.dim - a.unrotate_dims;
    const bool unrotate = a.unrotate_inv_freq != nullptr;
    const bool in_registers = unrotate && a.dim % static_cast<int>(blockDim.x) == 0 && rot0 % 2 == 0;
    for (int i = threadIdx.x; i < a.dim; i += blockDim.x) {
        float acc = 0.0f;
        const auto add = [&](int s, float v) {
            const float f = in_shared ? factor[s] : split_factor(s);
            if (f != kNoKeys) acc += v * f;
        };
        if (early) {  // in_shared too (kEarlySplits <= kMaxCombineSplits)
#pragma unroll
            for (int s = 0; s < kEarlySplits; ++s) {
                if (s < splits) add(s, mine[s]);
            }
        } else {
            batched_loads<8>(
                0, splits, 1, [&](int s) { return row_acc[s * a.dim + i]; }, add);
        }
        float out = acc / denom;
        if (in_registers) {
            const float partner = __shfl_xor_sync(0xffffffffu, out, 1);  // every lane: the whole warp is here
            if (i >= rot0) {
                const bool even = (i - rot0) % 2 == 0;
                float v0, v1;
                rope_values<float>(m, static_cast<int>(th / a.heads), (i - rot0) / 2, a.unrotate_inv_freq, true, false,
                                   even ? out : partner, even ? partner : out, v0, v1);
                out = even ? v0 : v1;
            }
        }
        a.out[th * a.dim + i] = out;
    }
    if (!unrotate || in_registers) return;
    __syncthreads();  // the row's outputs (global memory) are visible to the whole block
    float* rotated = a.out + th * a.dim + rot0;
    for (int i = threadIdx.x; i < a.unrotate_dims / 2; i += blockDim.x) {
        rope_pair<float>(m, static_cast<int>(th / a.heads), i, a.unrotate_inv_freq, true, false, rotated + 2 * i);
    }
}

constexpr int kMaxIndexPerLane = kMaxIndexDim / 32;

// Index scores: one warp per (token, entry): sum_h w_h relu(q_h . K_e); entries past the token's eligible count are not
// written (the top-k reads eligible entries only: at long contexts they were most of the buffer). The key is decoded
// once into registers (lane holds dims lane + 32 r).
template <int D, typename Acc>
__global__ void index_scores_kernel(StepMeta m, const float* q, const float* weights, const uint8_t* keys,
                                    RowFormatDev f, int heads, int ratio, int per_block, int64_t max_entries,
                                    float* scores) {
    pdl_begin();
    const int64_t id = blockIdx.x * static_cast<int64_t>(blockDim.x / 32) + threadIdx.x / 32;
    if (id >= static_cast<int64_t>(m.n_tokens) * max_entries) return;
    const int t = static_cast<int>(id / max_entries);
    const int64_t e = id % max_entries;
    const int64_t eligible = (m.positions[t] + 1) / ratio;
    if (e >= eligible) return;
    float s = -INFINITY;
    const int64_t row = paged_row(m, m.seq_of_token[t], e, per_block);
    if (row < 0) {
        if (threadIdx.x % 32 == 0) flag_error(m, kErrorBlockTable);
    } else {
        Acc sum = 0;
        const uint8_t* key = keys + row * f.bytes;
        const int lane = threadIdx.x % 32, dim = f.dim;
        float kr[kMaxIndexPerLane];
#pragma unroll
        for (int r = 0; r < kMaxIndexPerLane; ++r) {
            const int i = lane + 32 * r;
            kr[r] = i < dim ? row_elem<D>(key, i, f) : 0.0f;
        }
        for (int h = 0; h < heads; ++h) {
            const float* qh = q + (static_cast<int64_t>(t) * heads + h) * dim;
            Acc part = 0;
#pragma unroll
            for (int r = 0; r < kMaxIndexPerLane; ++r) {
                const int i = lane + 32 * r;
                if (i < dim) part += Acc(qh[i]) * kr[r];
            }
            part = warp_sum(part);
            sum += Acc(weights[static_cast<int64_t>(t) * heads + h]) * (part > Acc(0) ? part : Acc(0));
        }
        s = static_cast<float>(sum);
    }
    if (threadIdx.x % 32 == 0) scores[id] = s;
}

// Order-preserving map of a float to an unsigned key (larger float -> larger key).
__device__ uint32_t float_key(float v) {
    const uint32_t u = __float_as_uint(v);
    return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

// Exclusive prefix sum of v over the block's threads in thread order (blockDim.x a multiple of 32, <= 1024);
// scratch: 32 ints of shared memory. Every thread must call it.
__device__ __forceinline__ int32_t block_exclusive_scan(int32_t v, int32_t* scratch) {
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    int32_t inclusive = v;
#pragma unroll
    for (int d = 1; d < 32; d *= 2) {
        const int32_t up = __shfl_up_sync(0xffffffffu, inclusive, d);
        if (lane >= d) inclusive += up;
    }
    __syncthreads();  // scratch may still be read by a previous call
    if (lane == 31) scratch[warp] = inclusive;
    __syncthreads();
    int32_t before = 0;
    for (int i = 0; i < warp; ++i) before += scratch[i];
    return before + inclusive - v;
}

// Top-k per token: radix select of the k-th largest key (4 passes of 8 bits), then the picks in index order: every
// entry above the threshold, and threshold ties lowest index first (the CPU backend's tie rule). One block per token,
// a thread per digit.
constexpr int kTopkThreads = 256;
__global__ void __launch_bounds__(kTopkThreads)
    topk_kernel(StepMeta m, const float* scores, int64_t max_entries, int ratio, int k, int32_t* out) {
    pdl_begin();
    __shared__ uint32_t histogram[256];
    __shared__ uint32_t prefix, prefix_mask;
    __shared__ int32_t remaining, digit;
    __shared__ int32_t scan_scratch[32];
    const int t = blockIdx.x, lane = static_cast<int>(threadIdx.x % 32);
    const int64_t eligible = min64((m.positions[t] + 1) / ratio, max_entries);
    const int picks = static_cast<int>(min64(k, eligible));
    const float* s = scores + static_cast<int64_t>(t) * max_entries;
    int32_t* dst = out + static_cast<int64_t>(t) * k;
    if (picks == eligible) {  // every entry: the picks in index order without a select
        for (int i = threadIdx.x; i < k; i += blockDim.x) dst[i] = i < picks ? i : -1;
        return;
    }
    for (int i = threadIdx.x; i < k; i += blockDim.x) dst[i] = -1;
    if (threadIdx.x == 0) {
        prefix = 0;
        prefix_mask = 0;
        remaining = picks;  // rank (from the top) still to find inside the current prefix
    }
    __syncthreads();
    for (int shift = 24; shift >= 0; shift -= 8) {
        for (int i = threadIdx.x; i < 256; i += blockDim.x) histogram[i] = 0;
        __syncthreads();
        // The lanes sharing the digit of the warp's first counted lane add once (scores cluster in a few top bytes:
        // 32 lanes' atomics on one bin serialise), the others one by one; the trip count is the warp's, so every lane
        // takes part in the ballots. (__match_any_sync would group every digit, but its convergence barrier spilled.)
        for (int64_t base = threadIdx.x - lane; base < eligible; base += blockDim.x) {
            const int64_t e = base + lane;
            const uint32_t key = e < eligible ? float_key(s[e]) : 0u;
            const bool counted = e < eligible && (key & prefix_mask) == prefix;
            const uint32_t bin = (key >> shift) & 0xffu;
            const unsigned counted_lanes = __ballot_sync(0xffffffffu, counted);
            if (counted_lanes == 0u) continue;
            const int first = __ffs(static_cast<int>(counted_lanes)) - 1;
            const uint32_t common = __shfl_sync(0xffffffffu, bin, first);
            const unsigned sharing = __ballot_sync(0xffffffffu, counted && bin == common);
            if (lane == first) atomicAdd(&histogram[common], static_cast<uint32_t>(__popc(sharing)));
            if (counted && bin != common) atomicAdd(&histogram[bin], 1u);
        }
        if (threadIdx.x == 0) digit = 0;
        __syncthreads();
        // The digit of the wanted key: the largest d >= 1 whose entries at or above it number at least `remaining`,
        // else 0; thread i holds digit 255 - i, so one block scan gives each the count above its digit (a serial walk
        // down the digits by one thread cost ~4 us a pass).
        const int d = 255 - static_cast<int>(threadIdx.x);
        const auto count = static_cast<int32_t>(histogram[d]);
        const int32_t above_d = block_exclusive_scan(count, scan_scratch);
        const int32_t need = remaining;
        if (d >= 1 && above_d + count >= need) atomicMax(&digit, d);
        __syncthreads();
        if (d == digit) {
            prefix |= static_cast<uint32_t>(d) << shift;
            prefix_mask |= 0xffu << shift;
            remaining = need - above_d;
        }
        __syncthreads();
    }
    // prefix is now the k-th largest key; `remaining` of the entries equal to it are taken (lowest index first).
    // Compaction in index order: warp w owns the contiguous segment w of the entries and reads it 32 entries at a
    // time (coalesced); exclusive scans of the warps' counts give each warp its first output slot and first tie's
    // rank, ballots each lane its place within the warp's 32.
    const int warps = static_cast<int>(blockDim.x / 32);
    const int64_t seg = (eligible + warps - 1) / warps;
    const int64_t e0 = min64(static_cast<int64_t>(threadIdx.x / 32) * seg, eligible), e1 = min64(e0 + seg, eligible);
    const unsigned lanes_below = (1u << lane) - 1u;
    int32_t above = 0, ties = 0;
    for (int64_t base = e0; base < e1; base += 32) {
        const int64_t e = base + lane;
        const uint32_t key = e < e1 ? float_key(s[e]) : 0u;
        above += __popc(__ballot_sync(0xffffffffu, e < e1 && key > prefix));
        ties += __popc(__ballot_sync(0xffffffffu, e < e1 && key == prefix));
    }
    // Lane 0 carries its warp's counts into the scans (the other lanes add nothing); every lane takes lane 0's result.
    const int32_t above_before = __shfl_sync(0xffffffffu, block_exclusive_scan(lane == 0 ? above : 0, scan_scratch), 0);
    const int32_t ties_before = __shfl_sync(0xffffffffu, block_exclusive_scan(lane == 0 ? ties : 0, scan_scratch), 0);
    const int32_t take = remaining;
    int32_t w = above_before + min(ties_before, take), tie_rank = ties_before;
    for (int64_t base = e0; base < e1; base += 32) {
        const int64_t e = base + lane;
        const uint32_t key = e < e1 ? float_key(s[e]) : 0u;
        const bool is_tie = e < e1 && key == prefix;
        const unsigned tie_lanes = __ballot_sync(0xffffffffu, is_tie);
        const bool taken = (e < e1 && key > prefix) || (is_tie && tie_rank + __popc(tie_lanes & lanes_below) < take);
        const unsigned taken_lanes = __ballot_sync(0xffffffffu, taken);
        if (taken) dst[w + __popc(taken_lanes & lanes_below)] = static_cast<int32_t>(e);
        w += __popc(taken_lanes);
        tie_rank += __popc(tie_lanes);
    }
}

}  // namespace

template <typename Acc>
void launch_attention_acc(cudaStream_t s, const StepMeta& m, const AttentionArgs& a, unsigned blocks) {
    switch (a.format.dtype) {
        case kRowBf16:
            launch_kernel(attention_kernel<kRowBf16, Acc>, blocks, 128, 0, s, m, a);
            break;
        case kRowFp8:
            launch_kernel(attention_kernel<kRowFp8, Acc>, blocks, 128, 0, s, m, a);
            break;
        default:
            launch_kernel(attention_kernel<kRowF32, Acc>, blocks, 128, 0, s, m, a);
            break;
    }
}

void launch_attention(cudaStream_t s, const StepMeta& m, const AttentionArgs& a) {
    const int64_t rows = static_cast<int64_t>(m.n_tokens) * a.heads;
    if (rows == 0) return;
    if (a.reference) {
        launch_attention_acc<double>(s, m, a, blocks_for(rows, 4));
    } else {
        launch_attention_acc<float>(s, m, a, blocks_for(rows, 4));
    }
}

// Decode-sized steps split the keys for parallelism; large steps have enough (token, head) rows already.
int keys_per_split(int64_t n_tokens, int heads, int max_keys, int fixed) {
    if (fixed > 0) return fixed;
    return n_tokens * heads >= 2048 ? max_keys : kKeysPerSplit;
}

int attention_splits(int64_t n_tokens, int heads, int max_keys, int fixed_keys_per_split) {
    const int per = keys_per_split(n_tokens, heads, max_keys, fixed_keys_per_split);
    return (max_keys + per - 1) / per;
}

// The split kernel reads fp8 K=V rows in quads when the loads are aligned and its lane layout (4 consecutive elements
// of every 128-element chunk per lane) covers the row.
static bool quad_rows_ok(const RowFormatDev& f) {
    return fp8_quads_aligned(f) && f.dim % 128 == 0 && f.dim <= kMaxAttentionDim;
}

void launch_attention_split(cudaStream_t s, const StepMeta& m, const AttentionArgs& a, int max_keys, float* part_acc,
                            float* part_ml) {
    const int64_t rows = static_cast<int64_t>(m.n_tokens) * a.heads;
    if (rows == 0) return;
    const int per = keys_per_split(m.n_tokens, a.heads, max_keys, a.fixed_keys_per_split);
    const int splits = attention_splits(m.n_tokens, a.heads, max_keys, a.fixed_keys_per_split);
    const dim3 grid(static_cast<unsigned>(m.n_tokens), blocks_for(a.heads, kHeadsPerBlock),
                    static_cast<unsigned>(splits));
    switch (a.format.dtype) {
        case kRowBf16:
            launch_kernel(attention_split_kernel<kRowBf16, false>, grid, kHeadsPerBlock * 32, 0, s, m, a, splits, per,
                          part_acc, part_ml);
            break;
        case kRowFp8:
            if (quad_rows_ok(a.format)) {
                launch_kernel(attention_split_kernel<kRowFp8, true>, grid, kHeadsPerBlock * 32, 0, s, m, a, splits, per,
                              part_acc, part_ml);
            } else {
                launch_kernel(attention_split_kernel<kRowFp8, false>, grid, kHeadsPerBlock * 32, 0, s, m, a, splits,
                              per, part_acc, part_ml);
            }
            break;
        default:
            launch_kernel(attention_split_kernel<kRowF32, false>, grid, kHeadsPerBlock * 32, 0, s, m, a, splits, per,
                          part_acc, part_ml);
            break;
    }
    launch_attention_combine(s, m, a, rows, splits, part_acc, part_ml);
}

void launch_attention_combine(cudaStream_t s, const StepMeta& m, const AttentionArgs& a, int64_t rows, int splits,
                              const float* part_acc, const float* part_ml) {
    if (rows <= 0) return;
    const int threads = rows <= kCombineWideRows ? kCombineWideThreads : kCombineThreads;
    launch_kernel(attention_combine_kernel, static_cast<unsigned>(rows), threads, 0, s, m, a, rows, splits, part_acc,
                  part_ml);
}

template <typename Acc>
void launch_index_scores_simt(cudaStream_t s, const StepMeta& m, const float* q, const float* weights,
                              const uint8_t* keys, const RowFormatDev& f, int heads, int ratio, int per_block,
                              int64_t max_entries, float* scores) {
    const unsigned blocks = blocks_for(m.n_tokens * max_entries, 4);
    switch (f.dtype) {
        case kRowBf16:
            launch_kernel(index_scores_kernel<kRowBf16, Acc>, blocks, 128, 0, s, m, q, weights, keys, f, heads, ratio,
                          per_block, max_entries, scores);
            break;
        case kRowFp8:
            launch_kernel(index_scores_kernel<kRowFp8, Acc>, blocks, 128, 0, s, m, q, weights, keys, f, heads, ratio,
                          per_block, max_entries, scores);
            break;
        default:
            launch_kernel(index_scores_kernel<kRowF32, Acc>, blocks, 128, 0, s, m, q, weights, keys, f, heads, ratio,
                          per_block, max_entries, scores);
            break;
    }
}

void launch_index_scores(cudaStream_t s, const StepMeta& m, const IndexScoresArgs& a, bool tensor_cores, bool f64) {
    if (m.n_tokens == 0) return;
    const RowFormatDev& f = a.key_format;
    if (tensor_cores && index_scores_mma_supported(f, a.heads)) {
        launch_index_scores_mma(s, m, a);
    } else if (f64) {
        launch_index_scores_simt<double>(s, m, a.q, a.weights, a.keys, f, a.heads, a.ratio, a.per_block, a.max_entries,
                                         a.scores);
    } else {
        launch_index_scores_simt<float>(s, m, a.q, a.weights, a.keys, f, a.heads, a.ratio, a.per_block, a.max_entries,
                                        a.scores);
    }
}

void launch_topk(cudaStream_t s, const StepMeta& m, const float* scores, int64_t max_entries, int ratio, int k,
                 int32_t* topk) {
    if (m.n_tokens > 0) {
        launch_kernel(topk_kernel, static_cast<unsigned>(m.n_tokens), kTopkThreads, 0, s, m, scores, max_entries, ratio,
                      k, topk);
    }
}

}  // namespace dsv4::cuda
