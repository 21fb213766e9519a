// Turns the validated tensor set (weight_binding.h: original names, HF renames resolved) into the per-layer weight
// structs, uploading each tensor to the backend in its checkpoint form.
#pragma once

#include <vector>

#include "backend/backend.h"
#include "backend/weights.h"
#include "config/model_config.h"
#include "model/draft_weights.h"
#include "model/expert_residency.h"
#include "model/host_expert_sink.h"
#include "model/weight_binding.h"

namespace dsv4 {

// Uploads every tensor except the routed experts `residency` leaves out (invalid WeightRefs in their place).
ModelWeights load_model_weights(const ModelConfig& config, const BoundWeights& bound, Backend& backend,
                                const ExpertResidency& residency = {});
// The draft stages the binder found (bound.drafts; empty DraftWeights when there are none), every expert resident.
DraftWeights load_draft_weights(const ModelConfig& config, const BoundWeights& bound, Backend& backend);
// One routed expert of one layer (expert placement changes between steps: src/dist).
ExpertWeights load_expert_weights(const ModelConfig& config, const BoundWeights& bound, Backend& backend, int layer,
                                  int expert);
// Every routed expert of every layer made in host memory (WeightStore::upload_host_linear) and handed to the expert
// tier, one at a time.
void load_host_experts(const ModelConfig& config, const BoundWeights& bound, Backend& backend, HostExpertSink& sink);

}  // namespace dsv4
