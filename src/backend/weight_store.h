// WeightStore: the model's weights as a backend holds them, uploaded once in checkpoint form (FP8 + UE8M0 128x128
// block scales, FP4 e2m1 + per-32 scales, BF16: backend/weights.h) and decoded inside the kernels; a backend may
// re-pack codes exactly where its weights say so (the CUDA backend's FP4 words, WeightRef::fp4_layout). The
// checkpoint's host views stay valid while the model lives. The expert tier (routed experts resident in host memory, a
// device cache of some of them: dist/expert_tier_moe.h) is the role at the end of this interface.
#pragma once

#include <cstdint>
#include <vector>

#include "backend/weights.h"
#include "loader/tensor_view.h"

namespace dsv4 {

class WeightStore {
  public:
    virtual ~WeightStore() = default;

    // A linear weight [rows, cols] with its scales (null for BF16/F32); block_rows x block_cols values share a scale.
    // FP8 codes arrive in the backend's dialect (Backend::fp8_dialect(): the loader converts them exactly first).
    virtual WeightRef upload_linear(const TensorView& weight, const TensorView* scale, WeightFormat format,
                                    int64_t rows, int64_t cols, int block_rows, int block_cols) = 0;
    // A BF16/F32 vector, stored as float32.
    virtual VecRef upload_vector(const TensorView& values) = 0;
    // An I64/I32 table, stored as int32; every entry checked to lie in [0, max_value).
    virtual TableRef upload_table(const TensorView& values, int64_t max_value) = 0;

    // The set of resident routed experts of some layer changed (expert placement, between steps): drop anything
    // cached from the old set (the CUDA backend's per-layer expert handle tables).
    virtual void expert_set_changed() {}

    // Optional (benchmarks and synthetic models, made on the device with no checkpoint file). The defaults fail,
    // naming the backend.
    // A random weight in checkpoint form: N(0, stddev) values quantized with valid scales (FP8 block / FP4 row) or
    // stored as BF16 / F32. Deterministic from the seed.
    virtual WeightRef synthetic_linear(WeightFormat format, int64_t rows, int64_t cols, float stddev, uint64_t seed);
    // A float32 vector of N(mean, stddev) values.
    virtual VecRef synthetic_vector(int64_t n, float mean, float stddev, uint64_t seed);
    // A [rows, cols] table of int32 in [0, max_value), each row's entries distinct (hash routing), spread uniformly.
    virtual TableRef synthetic_table(int64_t rows, int64_t cols, int64_t max_value, uint64_t seed);

    // --- Expert tier role (dist/expert_tier_moe.h, dist/expert_cache.h). Optional: the defaults fail, naming it.
    // A routed-expert matrix kept in host memory in this backend's form (checkpoint form; a GPU's FP4 codes in its
    // WeightRef::fp4_layout, which the CPU backend reads too), pinned and mapped on a GPU (so fetches are DMA and
    // kernels may read it in place), writable (an evicted expert is written back over a fetched one's): the source of
    // fetches into the expert cache and what the host CPU computes with. Its pointers are host addresses (on a GPU
    // also device addresses), valid while the backend lives or until released.
    virtual WeightRef upload_host_linear(const TensorView& weight, const TensorView* scale, WeightFormat format,
                                         int64_t rows, int64_t cols, int block_rows, int block_cols);
    // The same made from a seed (synthetic models: as synthetic_linear, but in host memory).
    virtual WeightRef synthetic_host_linear(WeightFormat format, int64_t rows, int64_t cols, float stddev,
                                            uint64_t seed);
    // Device memory for `slots` experts in each of `layers` MoE layers, each slot the size of `expert` (w1, w2, w3 and
    // their scales, in checkpoint form).
    virtual void create_expert_cache(int layers, int slots, const ExpertWeights& expert);
    // Copies a host expert into a slot and returns its handles in device memory. On a GPU the copy runs on the copy
    // stream after the work queued before (which may still read the slot's previous expert) and completes before the
    // work queued after. Call between MoE ops.
    virtual ExpertWeights fetch_expert(int layer, int slot, const ExpertWeights& host);
    // Copies the expert a slot holds into `host` (host experts of the same shapes: upload_host_linear's), ordered after
    // the work queued before (fetches, and kernels that read `host` in place) and before the fetches queued after; the
    // bytes are in `host` when it returns (the host may compute with them at once). The write-back of an evicted
    // expert: host memory keeps only experts not resident.
    virtual void store_expert(int layer, int slot, const ExpertWeights& host);
    // Gives back the host memory of an expert made by upload_host_linear / synthetic_host_linear (one that went into a
    // slot at load). Waits for copies in flight that read it.
    virtual void release_host_expert(const ExpertWeights& host);
    // `w.experts` changed in place (the same vector, other handles): refresh anything derived from it (the CUDA
    // backend rewrites its device handle table at the same address, so recorded graphs stay valid).
    virtual void update_expert_handles(const MoeWeights& w) { (void)w; }
    // Counters of routed (token, expert) pairs per MoE layer, for the tier's steps that read host experts in place
    // (their routing stays on the device: ModelOps::count_expert_pairs adds to these). Made once, zeroed.
    virtual void create_expert_pair_counters(int layers, int experts);
    // The counts since the last call, [layer * experts + expert], after the work queued before; zeroes them.
    virtual std::vector<int64_t> take_expert_pair_counts();
};

}  // namespace dsv4
