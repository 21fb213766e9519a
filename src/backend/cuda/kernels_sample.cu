// ModelOps::sample_rows on the GPU: a cluster of kRowBlocks blocks per draw, each block a contiguous part of the row,
// their histograms, sums and maxima merged through distributed shared memory (one block a row ran its ~7 passes over
// 129,280 logits on one SM: ~0.7 ms a draw on the H100). backend/sample_rows.h defines the result and
// backend/sample_rows_math.h holds the arithmetic shared with the host reference, so the two agree bit for bit.
// Passes over the row (each reads it from L2 or memory; the masses are recomputed rather than stored):
//   1. NaN / +inf in the raw row: no choice;
//   2. with edits or a mask: the processed row is written to scratch (mask, then the sparse edits);
//   3. the largest logit and its lowest index (greedy draws end here);
//   4. top_k: the k-th largest logit, by a radix select over the logits' order keys (4 passes of 8 bits);
//   5. top_p: the largest logit c whose upper tail holds top_p of the fixed-point mass, by the same radix select
//      weighted by mass;
//   6. the draw: each thread sums the kept mass of a contiguous slice of ids, a block scan orders the slices, and the
//      thread whose slice holds floor(u * kept) walks it (a probing draw leaves its probe out of the slices and
//      reports the probe's and the row's kept mass);
//   7. when asked, the raw logprobs (core/logprobs.h), by the cluster's first block alone over the whole row (rare:
//      kept simple): log-sum-exp of the raw row in double (a fixed reduction order), the token's rank, and the top
//      tokens by a count-weighted select of the n-th largest logit and an ordered compaction of the ties at it.
// Every sum is of integers (masses) or counts, so the result does not depend on the order of the additions.
#include <cooperative_groups.h>

#include "backend/cuda/kernels.h"
#include "backend/cuda/pdl.cuh"
#include "backend/sample_rows_math.h"

namespace dsv4::cuda {
namespace {

namespace cg = cooperative_groups;

constexpr int kRowBlocks = 8;  // a portable cluster size
constexpr int kSampleThreads = 512;
constexpr int kSampleWarps = kSampleThreads / 32;
constexpr int kDigitBits = 8;
constexpr int kDigits = 1 << kDigitBits;
constexpr int kKeyBits = 32;

struct SampleShared {
    unsigned long long hist[kDigits];    // this block's weight of the entries under the prefix, by their next digit
    unsigned long long merged[kDigits];  // the row's (hist summed over the cluster)
    // A select pass's histograms, one for each pair of warps (summed into hist after the pass): a warp adds its digit
    // groups' weights there, so the warps do not all contend for the few bins a pass's weight falls in.
    unsigned long long pair_hist[kSampleWarps / 2][kDigits];
    unsigned int candidates;   // entries with a weight in this block (pass 0 of a select)
    uint32_t prefix;           // the select's decided key bits
    unsigned long long above;  // weight of the entries with a key above the prefix's range
    double target;
    bool keep_all;                // the select found no threshold: nothing is removed
    unsigned long long best_key;  // block_argmax's answer
    unsigned long long share;     // this block's value in a merge over the cluster
    unsigned long long warp_sum[kSampleWarps];
    double warp_double[kSampleWarps];
    int32_t drawn;  // the draw's token (written into the first block's by the thread that finds it), for the logprobs
    int32_t top_tokens[kMaxDrawLogprobs];
    float top_values[kMaxDrawLogprobs];
};

// The ids a block works on: a contiguous part of the row, its results merged over the draw's cluster, or (clustered
// false) the whole row by one block.
struct RowPart {
    int64_t begin = 0, end = 0;
    bool clustered = false;
};

// The draw's cluster block `rank`'s part of a row of `vocab` ids: equal parts in whole warps of ids.
__device__ RowPart cluster_part(int64_t vocab, unsigned rank) {
    const int64_t per_block = ((vocab + kRowBlocks - 1) / kRowBlocks + 31) / 32 * 32;
    return RowPart{min64(vocab, rank * per_block), min64(vocab, (rank + 1) * per_block), true};
}

// Publishes this block's block-uniform `value` to the draw's cluster and calls visit(rank, value) with every block's,
// in rank order, in every thread. Every block reads the others' shares before the second barrier, so none is
// rewritten (or its block gone) while read.
template <typename Visit>
__device__ void cluster_visit_shares(unsigned long long value, SampleShared& sm, Visit visit) {
    cg::cluster_group cluster = cg::this_cluster();
    if (threadIdx.x == 0) sm.share = value;
    cluster.sync();
    for (unsigned b = 0; b < kRowBlocks; ++b) visit(b, *cluster.map_shared_rank(&sm.share, b));
    cluster.sync();
}

// The maximum (kMax) or sum of each block's block-uniform `value` over the part's cluster, in every thread.
template <bool kMax>
__device__ unsigned long long cluster_merge(unsigned long long value, SampleShared& sm, const RowPart& part) {
    if (!part.clustered) return value;
    unsigned long long merged = 0;
    cluster_visit_shares(value, sm,
                         [&](unsigned, unsigned long long v) { merged = kMax ? max(merged, v) : merged + v; });
    return merged;
}

// The sum of `value` over the cluster's blocks before this one (and `total`, over all of them), in every thread.
__device__ unsigned long long cluster_exclusive_sum(unsigned long long value, SampleShared& sm, const RowPart& part,
                                                    unsigned long long& total) {
    if (!part.clustered) return total = value, 0;
    const unsigned rank = cg::this_cluster().block_rank();
    unsigned long long before = 0;
    total = 0;
    cluster_visit_shares(value, sm, [&](unsigned b, unsigned long long v) {
        if (b < rank) before += v;
        total += v;
    });
    return before;
}

// sm.merged = sm.hist summed over the part's cluster.
__device__ void cluster_merge_hist(SampleShared& sm, const RowPart& part) {
    if (!part.clustered) {
        for (int digit = threadIdx.x; digit < kDigits; digit += kSampleThreads) sm.merged[digit] = sm.hist[digit];
        return;
    }
    cg::cluster_group cluster = cg::this_cluster();
    cluster.sync();
    for (int digit = threadIdx.x; digit < kDigits; digit += kSampleThreads) {
        unsigned long long sum = 0;
        for (unsigned b = 0; b < kRowBlocks; ++b) sum += cluster.map_shared_rank(sm.hist, b)[digit];
        sm.merged[digit] = sum;
    }
    cluster.sync();
}

// The raw row holds NaN or +inf.
__device__ bool row_has_fault(const float* raw, const RowPart& part, SampleShared& sm) {
    bool bad = false;
    for (int64_t i = part.begin + threadIdx.x; i < part.end; i += kSampleThreads) bad |= !(raw[i] < INFINITY);
    const bool block_bad = __syncthreads_or(bad) != 0;
    return cluster_merge<true>(block_bad ? 1 : 0, sm, part) != 0;
}

// The part of the processed row in `px`: the mask's banned tokens at -inf, then each edited token in the part (one
// thread an edit: a token is edited at most once in a draw).
__device__ void process_row(const float* raw, const RowDraw& d, const SampleRowsDev& p, const RowPart& part,
                            float* px) {
    const uint64_t* mask = d.mask >= 0 ? p.masks + d.mask * sample_mask_words(p.vocab) : nullptr;
    for (int64_t i = part.begin + threadIdx.x; i < part.end; i += kSampleThreads) {
        float v = raw[i];
        if (mask != nullptr && ((mask[i >> 6] >> (i & 63)) & 1) == 0) v = -INFINITY;
        px[i] = v;
    }
    __syncthreads();
    for (int64_t e = threadIdx.x; e < d.edit_count; e += kSampleThreads) {
        const LogitEdit edit = p.edits[d.edit_begin + e];
        if (edit.token >= part.begin && edit.token < part.end) px[edit.token] = apply_logit_edit(px[edit.token], edit);
    }
    __syncthreads();
}

// (logit, id) as one key whose unsigned order is argmax_better's: the larger logit first, then the lower id.
__device__ unsigned long long argmax_key(float x, int64_t i) {
    const float canonical = x == 0.0f ? 0.0f : x;  // -0 equals +0 in argmax_better: the lower id wins
    return (static_cast<unsigned long long>(logit_order_key(canonical)) << 32) |
           (0xffffffffu - static_cast<uint32_t>(i));
}

// The largest logit (no NaN) of the row and its lowest index, in every thread: each warp's largest key joins
// sm.best_key by one shared atomic max, then the blocks' keys are merged.
__device__ void row_argmax(const float* x, const RowPart& part, SampleShared& sm, float& best, int32_t& best_i) {
    if (threadIdx.x == 0) sm.best_key = 0;  // below every logit's key (-inf's is 0x007fffff << 32 | ...)
    unsigned long long key = 0;
    for (int64_t i = part.begin + threadIdx.x; i < part.end; i += kSampleThreads) key = max(key, argmax_key(x[i], i));
    for (int offset = 16; offset > 0; offset /= 2) key = max(key, __shfl_down_sync(0xffffffffu, key, offset));
    __syncthreads();  // sm.best_key is reset
    if (threadIdx.x % 32 == 0 && key != 0) atomicMax(&sm.best_key, key);
    __syncthreads();
    const unsigned long long block_key = sm.best_key;
    __syncthreads();  // sm is reused next
    const unsigned long long found = cluster_merge<true>(block_key, sm, part);
    best = found == 0 ? -INFINITY : logit_from_order_key(static_cast<uint32_t>(found >> 32));
    best_i = found == 0 ? 0 : static_cast<int32_t>(0xffffffffu - static_cast<uint32_t>(found));
}

// An entry's weight in a select: 1 for top_k's count, its mass for top_p.
template <bool kMass>
__device__ unsigned long long select_weight(float x, const SampleShape& shape) {
    if constexpr (kMass) {
        return candidate_mass(x, shape);
    } else {
        return 1;
    }
}

// One pass of the radix select over the block's part: the weights of the entries under the prefix, by their digit at
// `shift`, into sm.hist (which the caller zeroed; sm.candidates gets the count). A warp adds the weights of its lanes
// with the same digit first, one digit at a time (a pass's weight falls in a few digits), and its lowest such lane
// adds the sum to the warp pair's bins; every sum is of integers, so the order of the additions does not matter.
// Weights are below 2^47, so a warp's sum of their 23-bit halves fits 32 bits (redux.sync adds 32-bit values).
template <bool kMass>
__device__ void select_histogram(const float* x, const RowPart& part, const SampleShape& shape, uint32_t prefix,
                                 uint32_t prefix_mask, int shift, SampleShared& sm) {
    constexpr unsigned kAll = 0xffffffffu;
    const int lane = threadIdx.x % 32;
    unsigned long long* bins = sm.pair_hist[threadIdx.x / 64];
    for (int i = threadIdx.x; i < kSampleWarps / 2 * kDigits; i += kSampleThreads) (&sm.pair_hist[0][0])[i] = 0;
    __syncthreads();
    unsigned counted_here = 0;
    for (int64_t base = part.begin; base < part.end; base += kSampleThreads) {  // the same trip count in every thread
        const int64_t i = base + threadIdx.x;
        unsigned long long weight = 0;
        uint32_t key = 0;
        if (i < part.end) {
            key = logit_order_key(x[i]);
            if ((key & prefix_mask) == prefix) weight = select_weight<kMass>(x[i], shape);
        }
        const bool counted = weight != 0;
        counted_here += counted ? 1u : 0u;
        const unsigned digit = (key >> shift) & (kDigits - 1);
        const auto hi = static_cast<unsigned>(weight >> 23), lo = static_cast<unsigned>(weight & 0x7fffffu);
        for (unsigned pending = __ballot_sync(kAll, counted); pending != 0;) {
            const int leader = __ffs(pending) - 1;
            const unsigned d = __shfl_sync(kAll, digit, leader);
            const bool mine = counted && digit == d;
            const unsigned hi_sum = __reduce_add_sync(kAll, mine ? hi : 0u);
            const unsigned lo_sum = __reduce_add_sync(kAll, mine ? lo : 0u);
            if (lane == leader) atomicAdd(&bins[d], (static_cast<unsigned long long>(hi_sum) << 23) + lo_sum);
            pending &= ~__ballot_sync(kAll, mine);
        }
    }
    const unsigned warp_counted = __reduce_add_sync(kAll, counted_here);
    if (lane == 0 && warp_counted != 0) atomicAdd(&sm.candidates, warp_counted);
    __syncthreads();
    for (int digit = threadIdx.x; digit < kDigits; digit += kSampleThreads) {
        unsigned long long sum = 0;
        for (int pair = 0; pair < kSampleWarps / 2; ++pair) sum += sm.pair_hist[pair][digit];
        sm.hist[digit] = sum;
    }
}

// Thread 0, after a pass: the highest digit whose bucket brings the weight at or above it to the target narrows the
// prefix; when no digit does (the target exceeds all the weight), nothing is removed.
__device__ void select_narrow(int shift, SampleShared& sm) {
    unsigned long long weight = sm.above;
    for (int digit = kDigits - 1; digit >= 0; --digit) {
        if (static_cast<double>(weight + sm.merged[digit]) >= sm.target) {
            sm.prefix |= static_cast<uint32_t>(digit) << shift;
            sm.above = weight;
            return;
        }
        weight += sm.merged[digit];
    }
    sm.keep_all = true;
}

// The largest logit c such that the entries with logit >= c weigh at least the target: for top_k (count weights,
// target k) the k-th largest logit; for top_p (mass weights, target top_p of the candidates' mass, goal = top_p)
// the cutoff, or -inf when there are fewer than two candidates or rounding makes the target unreachable. Every block
// of a cluster decides the same from the same merged histograms.
template <bool kMass>
__device__ float select_logit(const float* x, const RowPart& part, const SampleShape& shape, double goal,
                              SampleShared& sm) {
    if (threadIdx.x == 0) sm.prefix = 0, sm.above = 0, sm.keep_all = false, sm.target = goal;
    uint32_t prefix = 0, prefix_mask = 0;
    for (int shift = kKeyBits - kDigitBits; shift >= 0; shift -= kDigitBits) {
        if (threadIdx.x == 0) sm.candidates = 0;
        __syncthreads();
        select_histogram<kMass>(x, part, shape, prefix, prefix_mask, shift, sm);
        __syncthreads();
        cluster_merge_hist(sm, part);
        const bool first_pass = kMass && shift == kKeyBits - kDigitBits;
        const unsigned long long candidates = first_pass ? cluster_merge<false>(sm.candidates, sm, part) : 0;
        __syncthreads();
        if (threadIdx.x == 0) {
            if (first_pass) {  // the first pass sees every candidate
                unsigned long long total = 0;
                for (int i = 0; i < kDigits; ++i) total += sm.merged[i];
                sm.target = goal * static_cast<double>(total);
                sm.keep_all = candidates <= 1;
            }
            if (!sm.keep_all) select_narrow(shift, sm);
        }
        __syncthreads();
        const bool keep_all = sm.keep_all;
        prefix = sm.prefix;
        __syncthreads();  // every thread has read the pass's answer before the next pass (or select) rewrites it
        if (keep_all) return -INFINITY;
        prefix_mask |= static_cast<uint32_t>(kDigits - 1) << shift;
    }
    return logit_from_order_key(prefix);
}

// Exclusive block scan of one value a thread; `total` gets the block's sum.
__device__ unsigned long long block_exclusive_scan(unsigned long long v, SampleShared& sm, unsigned long long& total) {
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    unsigned long long inclusive = v;
    for (int offset = 1; offset < 32; offset *= 2) {
        const unsigned long long up = __shfl_up_sync(0xffffffffu, inclusive, offset);
        if (lane >= offset) inclusive += up;
    }
    if (lane == 31) sm.warp_sum[warp] = inclusive;
    __syncthreads();
    unsigned long long before = 0;
    total = 0;
    for (int w = 0; w < kSampleWarps; ++w) {
        if (w < warp) before += sm.warp_sum[w];
        total += sm.warp_sum[w];
    }
    return before + inclusive - v;
}

// The kept mass of one token: a candidate at or above the top_p cutoff.
__device__ unsigned long long kept_mass(float x, const SampleShape& shape, float cutoff) {
    return x < cutoff ? 0 : candidate_mass(x, shape);
}

// Where a draw's token goes: the draw's output and, when the logprobs are asked, the cluster's first block's sm.drawn
// (drawn_at).
__device__ void publish_token(int32_t token, int32_t* out, int32_t* drawn_at) {
    *out = token;
    if (drawn_at != nullptr) *drawn_at = token;
}

// The draw: the token where the kept mass, summed in id order, first exceeds floor(u * kept). Each thread sums a
// contiguous slice of the block's part, a block scan and a scan over the cluster's blocks order the slices. A probing
// draw (probe >= 0) sums every token but the probe, writes the masses to *probe_out and, when nothing but the probe is
// kept, draws the probe.
__device__ void draw_token(const float* x, const RowPart& part, const SampleShape& shape, float cutoff, double uniform,
                           int32_t probe, SampleShared& sm, int32_t* out, int32_t* drawn_at, ProbeMasses* probe_out) {
    const int64_t slice = (part.end - part.begin + kSampleThreads - 1) / kSampleThreads;
    const int64_t begin = min64(part.end, part.begin + threadIdx.x * slice), end = min64(part.end, begin + slice);
    auto mass_of = [&](int64_t i) { return i == probe ? 0ull : kept_mass(x[i], shape, cutoff); };
    unsigned long long mine = 0;
    for (int64_t i = begin; i < end; ++i) mine += mass_of(i);
    unsigned long long block_kept = 0, kept = 0;
    const unsigned long long in_block = block_exclusive_scan(mine, sm, block_kept);
    const unsigned long long before = cluster_exclusive_sum(block_kept, sm, part, kept) + in_block;
    const bool first = threadIdx.x == 0 && cg::this_cluster().block_rank() == 0;
    if (probe >= 0) {
        const unsigned long long probe_mass = kept_mass(x[probe], shape, cutoff);
        if (first && probe_out != nullptr) *probe_out = ProbeMasses{probe_mass, kept + probe_mass};
        if (kept == 0) {  // the probe holds all the kept mass
            if (first) publish_token(probe, out, drawn_at);
            return;
        }
    }
    const unsigned long long target = draw_target(uniform, kept);
    if (target < before || target >= before + mine) return;  // exactly one thread's slice holds the target
    unsigned long long mass = before;
    for (int64_t i = begin; i < end; ++i) {
        mass += mass_of(i);
        if (mass > target) {
            publish_token(static_cast<int32_t>(i), out, drawn_at);
            return;
        }
    }
}

// Block sum of one double a thread, in a fixed order (the same bits on every run), in every thread.
__device__ double block_sum_fixed(double v, SampleShared& sm) {
    for (int offset = 16; offset > 0; offset /= 2) v += __shfl_down_sync(0xffffffffu, v, offset);
    if (threadIdx.x % 32 == 0) sm.warp_double[threadIdx.x / 32] = v;
    __syncthreads();
    double total = 0.0;
    for (int w = 0; w < kSampleWarps; ++w) total += sm.warp_double[w];
    __syncthreads();
    return total;
}

// log(sum(exp(row))) of the raw row (no NaN or +inf; some entry finite), max subtracted first; one block.
__device__ double row_log_sum_exp(const float* raw, const RowPart& whole, SampleShared& sm) {
    float best;
    int32_t best_i;
    row_argmax(raw, whole, sm, best, best_i);
    double sum = 0.0;
    for (int64_t i = threadIdx.x; i < whole.end; i += kSampleThreads) sum += exp(static_cast<double>(raw[i]) - best);
    return static_cast<double>(best) + log(block_sum_fixed(sum, sm));
}

// The `count` largest logits of the raw row in sm.top_*, unordered: those above the count-th largest logit c, then the
// lowest ids equal to c (a block scan over contiguous id slices keeps id order); one block.
__device__ void collect_top(const float* raw, const RowPart& whole, int count, SampleShared& sm) {
    const float c = select_logit<false>(raw, whole, SampleShape{}, count, sm);
    const int64_t slice = (whole.end + kSampleThreads - 1) / kSampleThreads;
    const int64_t begin = min64(whole.end, threadIdx.x * slice), end = min64(whole.end, begin + slice);
    unsigned long long above = 0, tied = 0;
    for (int64_t i = begin; i < end; ++i) above += raw[i] > c ? 1 : 0, tied += raw[i] == c ? 1 : 0;
    unsigned long long above_total = 0, tied_total = 0;
    unsigned long long above_before = block_exclusive_scan(above, sm, above_total);
    __syncthreads();  // the scans share sm.warp_sum
    unsigned long long tied_before = block_exclusive_scan(tied, sm, tied_total);
    const unsigned long long needed = static_cast<unsigned long long>(count) - above_total;
    for (int64_t i = begin; i < end; ++i) {
        if (raw[i] > c) {
            sm.top_tokens[above_before] = static_cast<int32_t>(i), sm.top_values[above_before] = raw[i];
            ++above_before;
        } else if (raw[i] == c && tied_before < needed) {
            const unsigned long long at = above_total + tied_before++;
            sm.top_tokens[at] = static_cast<int32_t>(i), sm.top_values[at] = raw[i];
        }
    }
    __syncthreads();
}

// The raw logprobs of `token` (compute_raw_logprobs' definition) into *out; one block over the whole row.
__device__ void report_logprobs(const float* raw, int64_t vocab, int32_t token, int count, SampleShared& sm,
                                DrawLogprobs* out) {
    const RowPart whole{0, vocab, false};
    const double lse = row_log_sum_exp(raw, whole, sm);
    const float logit = raw[token];
    double at_least = 0.0;  // tokens with a raw logit >= the token's (a count: exact in double)
    for (int64_t i = threadIdx.x; i < vocab; i += kSampleThreads) at_least += raw[i] >= logit ? 1.0 : 0.0;
    const double rank = block_sum_fixed(at_least, sm);
    count = static_cast<int>(min64(count, vocab));
    if (count > 0) collect_top(raw, whole, count, sm);
    if (threadIdx.x != 0) return;
    for (int i = 1; i < count; ++i) {  // insertion sort: larger logit first, ties: lower id first
        const int32_t t = sm.top_tokens[i];
        const float v = sm.top_values[i];
        int j = i;
        for (; j > 0 && (sm.top_values[j - 1] < v || (sm.top_values[j - 1] == v && sm.top_tokens[j - 1] > t)); --j) {
            sm.top_tokens[j] = sm.top_tokens[j - 1], sm.top_values[j] = sm.top_values[j - 1];
        }
        sm.top_tokens[j] = t, sm.top_values[j] = v;
    }
    out->logprob = static_cast<float>(static_cast<double>(logit) - lse);
    out->rank = static_cast<int32_t>(rank);
    out->count = count;
    for (int i = 0; i < count; ++i) {
        out->top_tokens[i] = sm.top_tokens[i];
        out->top_logprobs[i] = static_cast<float>(static_cast<double>(sm.top_values[i]) - lse);
    }
}

// Steps 4-6 for a draw that is not greedy, over the block's part (publish_token says where the token goes).
__device__ void draw_from(const float* x, const RowDraw& d, float best, int64_t vocab, const RowPart& part,
                          SampleShared& sm, int32_t* out, int32_t* drawn_at, ProbeMasses* probe_out) {
    SampleShape shape;
    shape.best = best;
    shape.inv_temperature = 1.0 / d.temperature;
    shape.min_p = d.min_p;
    if (d.top_k > 0 && d.top_k < vocab) shape.floor = select_logit<false>(x, part, shape, d.top_k, sm);
    const float cutoff = d.top_p < 1.0 ? select_logit<true>(x, part, shape, d.top_p, sm) : -INFINITY;
    draw_token(x, part, shape, cutoff, d.uniform, d.probe, sm, out, drawn_at, probe_out);
}

// A draw a cluster. Every return below follows a cluster barrier that ends the last reads of another block's shared
// memory, and the one write into the first block's (the drawn token, only when logprobs are asked) is followed by one.
__global__ void __cluster_dims__(kRowBlocks, 1, 1) __launch_bounds__(kSampleThreads, 2)
    sample_rows_kernel(SampleRowsDev p) {
    pdl_begin();
    __shared__ SampleShared sm;
    const cg::cluster_group cluster = cg::this_cluster();
    const int64_t draw = blockIdx.x / kRowBlocks;
    const bool first = cluster.block_rank() == 0;
    const RowDraw d = p.draws[draw];
    int32_t* out = p.out + draw;
    const float* raw = p.logits + d.row * p.vocab;
    const RowPart part = cluster_part(p.vocab, cluster.block_rank());
    const bool report = d.logprobs >= 0 && p.logprobs != nullptr;
    if (first && threadIdx.x == 0) *out = sm.drawn = kNoSample;  // before the barriers of every later write
    if (row_has_fault(raw, part, sm)) return;
    const float* x = raw;
    if (draw_processes_row(d)) {
        float* px = p.processed + draw * p.vocab;
        process_row(raw, d, p, part, px);
        x = px;
    }
    float best;
    int32_t best_i;
    row_argmax(x, part, sm, best, best_i);
    if (best == -INFINITY) return;
    if (d.greedy) {
        if (first && threadIdx.x == 0) *out = sm.drawn = best_i;
    } else {
        int32_t* drawn_at = report ? cluster.map_shared_rank(&sm.drawn, 0) : nullptr;
        ProbeMasses* probe_out = p.probes != nullptr ? p.probes + draw : nullptr;
        draw_from(x, d, best, p.vocab, part, sm, out, drawn_at, probe_out);
    }
    if (!report) return;
    cluster.sync();  // the drawn token is in the first block's sm.drawn
    if (!first) return;
    const int32_t token = sm.drawn;
    if (token != kNoSample) report_logprobs(raw, p.vocab, token, d.logprobs, sm, p.logprobs + draw);
}

}  // namespace

void launch_sample_rows(cudaStream_t s, const SampleRowsDev& p) {
    if (p.draw_count > 0)
        launch_kernel(sample_rows_kernel, static_cast<unsigned>(p.draw_count * kRowBlocks), kSampleThreads, 0, s, p);
}

}  // namespace dsv4::cuda
