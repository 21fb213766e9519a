// ExpertTierMoe: the MoE sub-layer with host-resident routed experts (the MoeDispatch seam, model/moe_dispatch.h),
// carrying out the policy of dist/expert_cache.h. Each routed expert lives in exactly one place: one of the `slots`
// per layer of the device's expert cache (--gpu-experts), or host memory in the device's form (checkpoint form, a
// GPU's FP4 codes sign-split: WeightStore::upload_host_linear, pinned on a GPU), so host memory holds only the experts
// the device does not (plus one expert's worth for the write-back below). Loading hands every expert to put()
// (HostExpertSink): the initial placement's go into their slots and their host memory is given back. Per MoE layer of a
// step:
//   1. the routing ids come to the host (a synchronisation per layer: the price of deciding per step; a device-side
//      plan, as for expert parallelism, is the next step) and the cache plans hits, fetches and host pairs;
//   2. a fetch writes the slot's expert back to a free host expert (WeightStore::store_expert), copies the new
//      expert in (fetch_expert: the copy stream on a GPU), and the new expert's host memory becomes the next free one;
//      the layer's handle table is refreshed in place (update_expert_handles);
//   3. pairs of resident experts run on the device (ModelOps::moe_routed); pairs of host experts run on the host CPU
//      (ModelOps::moe_routed of a host backend over the experts' host bytes) and their rows are copied up;
//   4. the shared expert and the combine run on the device, in moe's order (moe_routed, moe_shared, moe_combine: the
//      CPU moe op's exact composition).
// Steps of at most ExpertCacheConfig::read_in_place_max_tokens tokens skip the plan: the layer's handle table holds
// every expert, resident ones at their slots and the others at their host memory (mapped pinned memory, which the
// kernels read over PCIe), the backend's own moe op runs over it, and the routing is counted on the device
// (ModelOps::count_expert_pairs) and handed to the policy between steps (ExpertCache::observe). Nothing waits on the
// host, so decode steps run as CUDA graphs (device_only), with the bits of the plain model's moe op.
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
#include "model/host_expert_sink.h"
#include "model/moe_dispatch.h"

namespace dsv4::dist {

struct ExpertTierStats {
    int64_t fetched_bytes = 0;       // host -> device expert copies (loading, steps and rebalances)
    int64_t written_back_bytes = 0;  // device -> host copies of evicted experts
    int64_t activation_bytes = 0;    // activation rows down and routed rows up for host pairs
    int64_t host_pairs = 0;
    int64_t layers_with_host_pairs = 0;
    // Expert bytes that in-place pairs read from host memory (each pair's GEMV reads its expert whole; pairs of one
    // expert in one step may share reads through L2, so this bounds the PCIe bytes from above).
    int64_t in_place_pair_bytes = 0;
};

// The numerics of the CPU backend that computes a tier's host pairs for a device in `device_numerics`: the same, but
// reference for a GPU's fast numerics (the CPU has no fast numerics; reference is where the CPU and the GPU agree bit
// for bit, and the closest to fast).
inline Numerics host_pairs_numerics(Numerics device_numerics) {
    return device_numerics == Numerics::kFast ? Numerics::kReference : device_numerics;
}

class ExpertTierMoe final : public MoeDispatch, public HostExpertSink {
  public:
    // host_ops computes the host pairs (a CPU backend; the device itself when the device is the CPU). The initial
    // residency is place()'s on `counts` (empty: the lowest ids). The experts arrive through put(), then
    // finish_loading() checks that all did.
    ExpertTierMoe(Backend& device, ModelOps& host_ops, const ExpertCacheConfig& cache,
                  std::span<const std::vector<int64_t>> counts = {});

    // An expert made in host memory by a weight loader: kept there, or moved into its slot (its host memory given
    // back, except one expert's kept for write-backs). Every expert must have the first one's size.
    void put(int layer, int expert, const ExpertWeights& host) override;
    // Before the layer's first put: its initial placement from the experts' expected shares.
    void expected_popularity(int layer, std::span<const double> shares) override;
    void finish_loading();

    void moe(int layer, const Tensor& h, const MoeWeights& w, const Tensor& weights, const Tensor& ids, float limit,
             Tensor y) override;
    bool device_only(int64_t tokens) const override;
    // Between steps: the pairs counted on the device (in-place steps) handed to the policy, then the cache's
    // rebalancing fetches.
    void end_step();

    const ExpertCache& cache() const { return cache_; }
    const ExpertTierStats& stats() const { return stats_; }
    // Host memory the tier holds: the experts not resident and the free one.
    int64_t host_bytes() const;
    // The handles of where an expert is now: its slot's on the device, else its host memory's.
    ExpertWeights where(int layer, int expert) const;

  private:
    void apply(int layer, const std::vector<ExpertFetch>& fetches);
    MoeWeights& device_weights(int layer, const MoeWeights& w);
    // The handles a layer's table holds for an expert not in a slot: its host memory where steps read in place,
    // else none (planned steps never send a pair to it).
    ExpertWeights unplaced_handles(int layer, int expert) const;
    bool in_place_enabled() const { return cache_.config().read_in_place_max_tokens > 0; }
    // routed [pairs, d]: device pairs by moe_routed on their gathered rows, host pairs on host_ops, in pair order.
    void routed_with_host_pairs(int layer, const Tensor& h, const MoeWeights& wl, const std::vector<int32_t>& ids,
                                const Tensor& weights, int k, float limit, Tensor routed);

    Backend& device_;
    ModelOps& host_ops_;
    ExpertCache cache_;
    std::vector<std::vector<ExpertWeights>> host_experts_;  // [layer][expert]: valid while the expert is not resident
    std::vector<ExpertWeights> free_host_;                  // host experts holding no expert (write-back targets)
    int64_t expert_bytes_ = 0;                              // every expert's size (the first put's; 0 before)
    std::vector<bool> put_;                                 // [layer][expert]: handed over by the loader
    bool loaded_ = false;
    std::vector<std::vector<ExpertWeights>> slot_handles_;  // [layer][slot]: the expert a slot holds, on the device
    std::vector<MoeWeights> device_layers_;  // per layer: the model's weights with the resident experts' handles
    std::vector<bool> device_layer_ready_;
    ExpertTierStats stats_;
};

}  // namespace dsv4::dist
