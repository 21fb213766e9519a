// Mixture of experts on the GPU (model-spec 2.11): router (scores, learned top-k with the bias for selection only,
// or hash routing), per-(token, expert) SwiGLU with the clamp, the shared expert, and the combine in a fixed order.
// Expert weights stay FP4 (or FP8) and are decoded inside the kernels. Expert ids are checked on the device.
#include "backend/cuda/kernels.h"
#include "backend/cuda/pdl.cuh"

namespace dsv4::cuda {
namespace {

constexpr int kMaxExpertsPerLane = kMaxRoutedExperts / 32;

template <typename Acc>
__device__ float score_of(float logit, int func) {
    const Acc l = logit;
    if (func == 0) {  // sqrtsoftplus (PyTorch's softplus threshold 20)
        return static_cast<float>(sqrt_acc(l > Acc(20) ? l : log1p_acc(exp_acc(l))));
    }
    return static_cast<float>(Acc(1) / (Acc(1) + exp_acc(-l)));  // sigmoid; softmax is normalised by the caller
}

// One warp per token. Acc: the arithmetic of the numerics mode (cuda_common.cuh); scores are compared as floats.
// kPerLane: experts a lane holds (expert lane + 32 r in register r). Every array is indexed by unrolled loops only, so
// it stays in registers (an index known only at run time put them in local memory: ~10 us a layer at batch 1).
template <typename Acc, int kPerLane>
__global__ void route_kernel(StepMeta m, const float* logits, int experts, int k, int func, const float* bias,
                             const int32_t* tid2eid, bool hash, bool normalize, float route_scale, float* weights,
                             int32_t* ids) {
    const int lane = threadIdx.x % 32;
    float bias_of[kPerLane];  // the selection bias of the lane's experts: a weight, read before the wait (pdl.cuh)
#pragma unroll
    for (int r = 0; r < kPerLane; ++r) {
        const int e = lane + 32 * r;
        bias_of[r] = bias != nullptr && e < experts ? bias[e] : 0.0f;
    }
    pdl_begin();
    const int t = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    if (t >= m.n_tokens) return;
    float s[kPerLane];
    const float* row = logits + static_cast<int64_t>(t) * experts;
    float mx = -INFINITY;
#pragma unroll
    for (int r = 0; r < kPerLane; ++r) {
        const int e = lane + 32 * r;
        s[r] = e < experts ? row[e] : -INFINITY;
        mx = fmaxf(mx, s[r]);
    }
    if (func == 2) {  // softmax over the experts
        mx = warp_max(mx);
        Acc sum = 0;
#pragma unroll
        for (int r = 0; r < kPerLane; ++r) {
            if (lane + 32 * r < experts) sum += exp_acc(Acc(s[r]) - Acc(mx));
        }
        sum = warp_sum(sum);
#pragma unroll
        for (int r = 0; r < kPerLane; ++r) {
            s[r] = lane + 32 * r < experts ? static_cast<float>(exp_acc(Acc(s[r]) - Acc(mx)) / sum) : 0.0f;
        }
    } else {
#pragma unroll
        for (int r = 0; r < kPerLane; ++r) {
            if (lane + 32 * r < experts) s[r] = score_of<Acc>(s[r], func);
        }
    }
    float pick[kPerLane];  // what selection compares: score + bias (the bias for selection only)
#pragma unroll
    for (int r = 0; r < kPerLane; ++r) {
        const int e = lane + 32 * r;
        pick[r] = e < experts ? s[r] + bias_of[r] : 0.0f;
    }
    uint32_t taken = 0;  // bit r: expert lane + 32 r chosen already
    int32_t chosen[kMaxExpertsPerToken];
    float chosen_score[kMaxExpertsPerToken];
#pragma unroll
    for (int j = 0; j < kMaxExpertsPerToken; ++j) {
        if (j >= k) break;
        int32_t e_sel;
        if (hash) {
            e_sel = tid2eid[static_cast<int64_t>(m.tokens[t]) * k + j];
        } else {
            // argmax of score + bias over experts not chosen yet; ties -> lowest id.
            float best = -INFINITY;
            int best_e = experts;
#pragma unroll
            for (int r = 0; r < kPerLane; ++r) {
                const int e = lane + 32 * r;
                const float v = pick[r];
                if (e < experts && ((taken >> r) & 1u) == 0 && (v > best || (v == best && e < best_e))) {
                    best = v;
                    best_e = e;
                }
            }
            for (int o = 16; o > 0; o >>= 1) {
                const float ob = __shfl_xor_sync(0xffffffffu, best, o);
                const int oe = __shfl_xor_sync(0xffffffffu, best_e, o);
                if (ob > best || (ob == best && oe < best_e)) {
                    best = ob;
                    best_e = oe;
                }
            }
            e_sel = best_e;
        }
        if (e_sel < 0 || e_sel >= experts) {
            if (lane == 0) flag_error(m, kErrorExpertId);
            e_sel = 0;
        }
        chosen[j] = e_sel;
        float own = 0.0f;  // the chosen expert's score, from the lane and register holding it
#pragma unroll
        for (int r = 0; r < kPerLane; ++r) {
            if (r == e_sel / 32) own = s[r];
        }
        chosen_score[j] = __shfl_sync(0xffffffffu, own, e_sel % 32);
        if (lane == e_sel % 32) taken |= 1u << (e_sel / 32);
    }
    if (lane != 0) return;
    Acc sum = 0;
#pragma unroll
    for (int j = 0; j < kMaxExpertsPerToken; ++j) {
        if (j < k) sum += chosen_score[j];
    }
#pragma unroll
    for (int j = 0; j < kMaxExpertsPerToken; ++j) {
        if (j >= k) break;
        Acc v = chosen_score[j];
        if (normalize) v /= sum + Acc(1e-20f);
        weights[static_cast<int64_t>(t) * k + j] = static_cast<float>(v * Acc(route_scale));
        ids[static_cast<int64_t>(t) * k + j] = chosen[j];
    }
}

// out[p][r] = W_{ids[p]}[r] . x[p / x_div]: one warp per (pair, output row). weights = device array of WeightRef.
template <typename Acc>
__global__ void expert_linear_kernel(StepMeta m, const WeightRef* table, int n_experts, const int32_t* ids,
                                     int64_t pairs, int x_div, const float* x, int64_t k, int64_t rows, bool round_out,
                                     float* out) {
    pdl_begin();
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int64_t r = blockIdx.y * static_cast<int64_t>(blockDim.x / 32) + warp;
    const int64_t p = blockIdx.x;
    if (r >= rows || p >= pairs) return;
    const int32_t e = ids[p];
    if (e < 0 || e >= n_experts) {
        if (lane == 0 && r == 0) flag_error(m, kErrorExpertId);
        return;
    }
    const WeightRef& w = table[e];
    const float* xv = x + (p / x_div) * k;
    Acc acc = 0;
    for (int64_t j = lane; j < k; j += 32) acc += Acc(weight_at(w, r, j)) * xv[j];
    acc = warp_sum(acc);
    if (lane == 0) out[p * rows + r] = store_acc(acc, round_out);
}

// act = silu(min(g, limit)) * clamp(u, -limit, limit) * row_weight (reference: weight in, bf16 out).
template <typename Acc>
__global__ void swiglu_kernel(const float* g, const float* u, int64_t rows, int64_t width, float limit,
                              const float* row_weights, bool round, float* act) {
    pdl_begin();
    const int64_t id = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
    if (id >= rows * width) return;
    Acc v = swiglu_acc<Acc>(g[id], u[id], limit);
    if (row_weights != nullptr) v *= row_weights[id / width];
    act[id] = store_acc(v, round);
}

// y[t] = sum_j routed[t * k + j] (* weight when applied after W2) + shared[t], in a fixed order.
template <typename Acc>
__global__ void combine_kernel(const float* routed, const float* weights, const float* shared, int64_t n, int k,
                               int64_t d, bool weight_after, bool round, float* y) {
    pdl_begin();
    const int64_t id = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
    if (id >= n * d) return;
    const int64_t t = id / d, i = id % d;
    Acc acc = 0;
    for (int j = 0; j < k; ++j) {
        const Acc v = routed[(t * k + j) * d + i];
        acc = weight_after ? combine_add(acc, v, Acc(weights[t * k + j])) : acc + v;
    }
    if (shared != nullptr) acc += shared[id];
    y[id] = store_acc(acc, round);
}

// An id outside [0, n_experts) is left out of every group and flagged (the step then fails at its synchronisation,
// as in the per-pair kernels).
__global__ void count_experts_kernel(StepMeta m, const int32_t* ids, int64_t pairs, int n_experts, int32_t* counts) {
    pdl_begin();
    const int64_t p = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
    if (p >= pairs) return;
    const int32_t e = ids[p];
    if (e >= 0 && e < n_experts) {
        atomicAdd(&counts[e], 1);
    } else {
        flag_error(m, kErrorExpertId);
    }
}

// Pairs grouped by expert: cursor[e] starts at the expert's offset; the order inside an expert does not matter
// (every row is computed on its own).
__global__ void scatter_pairs_kernel(const int32_t* ids, int64_t pairs, int n_experts, int32_t* cursor,
                                     int32_t* row_ids) {
    pdl_begin();
    const int64_t p = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
    if (p >= pairs) return;
    const int32_t e = ids[p];
    if (e >= 0 && e < n_experts) row_ids[atomicAdd(&cursor[e], 1)] = static_cast<int32_t>(p);
}

// One thread turns the per-expert counts into offsets (written to cursor, where the scatter starts) and the tile
// list: tile t = rows [tile_row0[t], + tile_rows[t]) of expert tile_expert[t]; tile_count[0] = the number of tiles.
// Device-side so that the grouping can be recorded in a CUDA graph (no host round trip).
__global__ void plan_tiles_kernel(const int32_t* counts, int n_experts, int rows_per_tile, int max_tiles,
                                  int32_t* cursor, int32_t* tile_expert, int32_t* tile_row0, int32_t* tile_rows,
                                  int32_t* tile_count) {
    pdl_begin();
    int32_t total = 0;
    int tiles = 0;
    for (int e = 0; e < n_experts; ++e) {
        cursor[e] = total;
        for (int32_t r = 0; r < counts[e] && tiles < max_tiles; r += rows_per_tile, ++tiles) {
            tile_expert[tiles] = e;
            tile_row0[tiles] = total + r;
            tile_rows[tiles] = min(rows_per_tile, counts[e] - r);
        }
        total += counts[e];
    }
    tile_count[0] = tiles;
}

}  // namespace

void launch_plan_tiles(cudaStream_t s, const int32_t* counts, int n_experts, int rows_per_tile, int max_tiles,
                       int32_t* cursor, int32_t* tile_expert, int32_t* tile_row0, int32_t* tile_rows,
                       int32_t* tile_count) {
    launch_kernel(plan_tiles_kernel, 1, 1, 0, s, counts, n_experts, rows_per_tile, max_tiles, cursor, tile_expert,
                  tile_row0, tile_rows, tile_count);
}

void launch_add_expert_counts(cudaStream_t s, const StepMeta& m, const int32_t* ids, int64_t pairs, int n_experts,
                              int32_t* counts) {
    if (pairs > 0)
        launch_kernel(count_experts_kernel, blocks_for(pairs, 256), 256, 0, s, m, ids, pairs, n_experts, counts);
}

void launch_count_experts(cudaStream_t s, const StepMeta& m, const int32_t* ids, int64_t pairs, int n_experts,
                          int32_t* counts) {
    cudaMemsetAsync(counts, 0, n_experts * sizeof(int32_t), s);
    launch_add_expert_counts(s, m, ids, pairs, n_experts, counts);
}

void launch_scatter_pairs(cudaStream_t s, const int32_t* ids, int64_t pairs, int n_experts, int32_t* cursor,
                          int32_t* row_ids) {
    if (pairs > 0)
        launch_kernel(scatter_pairs_kernel, blocks_for(pairs, 256), 256, 0, s, ids, pairs, n_experts, cursor, row_ids);
}

void launch_route(cudaStream_t s, const StepMeta& m, const float* logits, int experts, int k, int func,
                  const float* bias, const int32_t* tid2eid, bool hash, bool normalize, float route_scale, bool f64,
                  float* weights, int32_t* ids) {
    if (m.n_tokens == 0) return;
    const unsigned blocks = blocks_for(m.n_tokens, 4);
    // Registers a lane: 8 cover 256 experts (every model we know), 32 the kernel's limit.
    auto launch = [&](auto kernel) {
        launch_kernel(kernel, blocks, 128, 0, s, m, logits, experts, k, func, bias, tid2eid, hash, normalize,
                      route_scale, weights, ids);
    };
    const bool few = experts <= 8 * 32;
    if (f64) {
        few ? launch(route_kernel<double, 8>) : launch(route_kernel<double, kMaxExpertsPerLane>);
    } else {
        few ? launch(route_kernel<float, 8>) : launch(route_kernel<float, kMaxExpertsPerLane>);
    }
}

void launch_expert_linear(cudaStream_t s, const StepMeta& m, const WeightRef* table, int n_experts, const int32_t* ids,
                          int64_t pairs, int x_div, const float* x, int64_t k, int64_t rows, bool round_out, bool f64,
                          float* out) {
    if (pairs == 0 || rows == 0) return;
    const dim3 grid(static_cast<unsigned>(pairs), blocks_for(rows, 4));
    if (f64) {
        launch_kernel(expert_linear_kernel<double>, grid, 128, 0, s, m, table, n_experts, ids, pairs, x_div, x, k, rows,
                      round_out, out);
    } else {
        launch_kernel(expert_linear_kernel<float>, grid, 128, 0, s, m, table, n_experts, ids, pairs, x_div, x, k, rows,
                      round_out, out);
    }
}

// Reference numerics (`reference`): bf16 output and double arithmetic.
void launch_swiglu(cudaStream_t s, const float* g, const float* u, int64_t rows, int64_t width, float limit,
                   const float* row_weights, bool reference, float* act) {
    if (rows * width == 0) return;
    const unsigned blocks = blocks_for(rows * width, 256);
    if (reference) {
        launch_kernel(swiglu_kernel<double>, blocks, 256, 0, s, g, u, rows, width, limit, row_weights, true, act);
    } else {
        launch_kernel(swiglu_kernel<float>, blocks, 256, 0, s, g, u, rows, width, limit, row_weights, false, act);
    }
}

void launch_combine(cudaStream_t s, const float* routed, const float* weights, const float* shared, int64_t n, int k,
                    int64_t d, bool weight_after, bool reference, float* y) {
    if (n * d == 0) return;
    const unsigned blocks = blocks_for(n * d, 256);
    if (reference) {
        launch_kernel(combine_kernel<double>, blocks, 256, 0, s, routed, weights, shared, n, k, d, weight_after, true,
                      y);
    } else {
        launch_kernel(combine_kernel<float>, blocks, 256, 0, s, routed, weights, shared, n, k, d, weight_after, false,
                      y);
    }
}

}  // namespace dsv4::cuda
