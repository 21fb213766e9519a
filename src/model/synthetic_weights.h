// Synthetic DeepSeek-V4 weights made directly in a backend's memory in the real formats (FP8 + UE8M0 block scales,
// FP4 + per-32 scales, BF16, F32): full-size benchmarks without a 156 GB checkpoint on disk. Random values with the
// statistics of the fixture generator (linear weights N(0, fan_in^-1/2), norms ~1, mHC mixes of order 1, router
// weights and biases that spread tokens over all experts, hash tables with distinct experts per token).
#pragma once

#include <cstdint>
#include <vector>

#include "backend/backend.h"
#include "backend/weights.h"
#include "config/model_config.h"
#include "model/draft_weights.h"
#include "model/expert_residency.h"
#include "model/host_expert_sink.h"

namespace dsv4 {

// Only the experts `residency` names are made (the others draw their seeds all the same, so a rank holds the same
// values as a single device would). routing_skew: Zipf exponents of expert popularity (model/synthetic_routing.h;
// empty = even routing). host_experts: when given, the experts `residency` leaves out are made in host memory
// instead (WeightStore::synthetic_host_linear) and handed to it, for the expert tier.
ModelWeights make_synthetic_weights(const ModelConfig& config, Backend& backend, uint64_t seed,
                                    const ExpertResidency& residency = {}, const std::vector<double>& routing_skew = {},
                                    HostExpertSink* host_experts = nullptr);

// Random draft stages (MTP or DSpark, `layout`) for the same config, from their own seed stream.
DraftWeights make_synthetic_draft_weights(const ModelConfig& config, Backend& backend, const DraftLayout& layout,
                                          uint64_t seed);

}  // namespace dsv4
