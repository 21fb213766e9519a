// ExpertTierMoe: the MoE sub-layer with host-resident routed experts (the MoeDispatch seam, model/moe_dispatch.h),
// carrying out the policy of dist/expert_cache.h. Every routed expert lives in host memory in checkpoint form
// (WeightStore::upload_host_linear, pinned on a GPU); the device's expert cache holds `slots` of them per layer
// (--gpu-experts). Per MoE layer of a step:
//   1. the routing ids come to the host (a synchronisation per layer: the price of deciding per step; a device-side
//      plan, as for expert parallelism, is the next step) and the cache plans hits, fetches and host pairs;
//   2. fetches copy host experts into slots (WeightStore::fetch_expert: the copy stream on a GPU) and the layer's
//      handle table is refreshed in place (update_expert_handles);
//   3. pairs of resident experts run on the device (ModelOps::moe_routed); pairs of host experts run on the host CPU
//      (ModelOps::moe_routed of a host backend over the experts' host bytes) and their rows are copied up;
//   4. the shared expert and the combine run on the device, in moe's order (moe_routed, moe_shared, moe_combine: the
//      CPU moe op's exact composition).
// Fetching versus computing on the host is the policy's per-expert choice (ExpertCacheConfig::min_pairs_to_fetch),
// so both paths can be measured per batch size. Residency never changes the bits of pairs computed on the device (the
// same bytes, the same kernels); host pairs carry the host backend's numerics: bit-identical in exact numerics on the
// CPU backend and in reference numerics (where the CPU and the GPU agree bit for bit), close in fast numerics.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "backend/backend.h"
#include "dist/expert_cache.h"
#include "model/moe_dispatch.h"

namespace dsv4::dist {

struct ExpertTierStats {
    int64_t fetched_bytes = 0;     // host -> device expert copies (steps and rebalances)
    int64_t activation_bytes = 0;  // activation rows down and routed rows up for host pairs
    int64_t host_pairs = 0;
    int64_t layers_with_host_pairs = 0;
};

class ExpertTierMoe final : public MoeDispatch {
  public:
    // host_experts[layer][expert]: every routed expert of every MoE layer in host form. host_ops computes the host
    // pairs (a CPU backend; the device itself when the device is the CPU). The initial residency is place()'s on
    // `counts` (empty: the lowest ids), fetched now.
    ExpertTierMoe(Backend& device, ModelOps& host_ops, std::vector<std::vector<ExpertWeights>> host_experts,
                  const ExpertCacheConfig& cache, std::span<const std::vector<int64_t>> counts = {});

    void moe(int layer, const Tensor& h, const MoeWeights& w, const Tensor& weights, const Tensor& ids, float limit,
             Tensor y) override;
    // Between steps: the cache's rebalancing fetches.
    void end_step();

    const ExpertCache& cache() const { return cache_; }
    const ExpertTierStats& stats() const { return stats_; }

  private:
    void apply(int layer, const std::vector<ExpertFetch>& fetches);
    MoeWeights& device_weights(int layer, const MoeWeights& w);
    // routed [pairs, d]: device pairs by moe_routed on their gathered rows, host pairs on host_ops, in pair order.
    void routed_with_host_pairs(int layer, const Tensor& h, const MoeWeights& wl, const std::vector<int32_t>& ids,
                                const Tensor& weights, int k, float limit, Tensor routed);

    Backend& device_;
    ModelOps& host_ops_;
    std::vector<std::vector<ExpertWeights>> host_experts_;
    ExpertCache cache_;
    std::vector<std::vector<ExpertWeights>> slot_handles_;  // [layer][slot]: the expert a slot holds, on the device
    std::vector<MoeWeights> device_layers_;  // per layer: the model's weights with the resident experts' handles
    std::vector<bool> device_layer_ready_;
    ExpertTierStats stats_;
};

}  // namespace dsv4::dist
