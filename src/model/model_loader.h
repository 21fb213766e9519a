// Opens a model directory (config.json + safetensors shards) on a backend: parses the config, maps and validates the
// checkpoint, checks its FP8 bytes against the dialect config.json claims (model/fp8_weights.h: refused with both
// dialects named when they disagree), converts them exactly to the backend's dialect when it differs, allocates the
// backend's sequence state and binds the weights.
#pragma once

#include <filesystem>
#include <memory>
#include <optional>

#include "backend/backend.h"
#include "core/fp8_convert.h"
#include "loader/checkpoint.h"
#include "model/deepseek_v4.h"
#include "model/draft_weights.h"
#include "model/expert_residency.h"
#include "model/synthetic_weights.h"
#include "model/weight_binding.h"

namespace dsv4 {

struct LoadedModel {
    std::optional<Checkpoint> checkpoint;  // must outlive the model: CPU weights point into its mapping
    std::unique_ptr<DeepseekV4> model;
    // The checkpoint's tensors (experts uploaded later: expert placement); FP8 weights in the backend's dialect
    // (converted copies live here when the checkpoint's differs).
    std::optional<BoundWeights> bound;
    Fp8ConversionReport fp8_conversion;  // what the load-time dialect conversion did (empty when none was needed)
    DraftWeights drafts;                 // the draft stages, when asked for (speculative decoding: src/spec)
};

// What a model is loaded with for speculative decoding: the draft stages' weights and `state_stages` draft rings per
// slot (state layers after the model's: config_with_draft_state). 0: neither.
struct DraftLoad {
    int state_stages = 0;
};

// residency: the routed experts this backend holds (expert parallelism); empty = all.
std::unique_ptr<LoadedModel> load_model(const std::filesystem::path& dir, Backend& backend, const StateConfig& state,
                                        const ExpertResidency& residency = {}, const DraftLoad& drafts = {});

// A model with random weights made directly on the backend (model/synthetic_weights.h): no checkpoint. With
// drafts.state_stages > 0, random draft stages of the config's kind (DSpark when it has dspark_* keys, else MTP).
// routing_skew: Zipf exponents of expert popularity (model/synthetic_routing.h; empty = even routing). host_experts:
// the experts `residency` leaves out, made in host memory instead (model/synthetic_weights.h).
std::unique_ptr<LoadedModel> make_synthetic_model(const ModelConfig& config, Backend& backend, const StateConfig& state,
                                                  uint64_t seed, const ExpertResidency& residency = {},
                                                  const DraftLoad& drafts = {},
                                                  const std::vector<double>& routing_skew = {},
                                                  HostExpertSink* host_experts = nullptr);

}  // namespace dsv4
