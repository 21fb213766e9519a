// HostExpertSink: where the weight loaders hand the routed experts they make in host memory
// (WeightStore::upload_host_linear / synthetic_host_linear) when an expert tier holds them (dist/expert_tier_moe.h).
// The sink keeps each one in host memory or moves it into a device slot and gives its host memory back, so host
// memory never holds every expert at once (the full model's experts outweigh a host's memory).
#pragma once

#include <span>

#include "backend/weights.h"

namespace dsv4 {

class HostExpertSink {
  public:
    virtual ~HostExpertSink() = default;
    // Every routed expert of every MoE layer, once each, in any order.
    virtual void put(int layer, int expert, const ExpertWeights& host) = 0;
    // Optional, before a layer's experts are put: each expert's expected share of the layer's routing, where the
    // loader knows it (synthetic skewed routers), so that the sink's initial placement starts warm.
    virtual void expected_popularity(int layer, std::span<const double> shares) {
        (void)layer;
        (void)shares;
    }
};

}  // namespace dsv4
