#include "model/model_loader.h"

#include "core/error.h"
#include "model/fp8_weights.h"
#include "model/synthetic_weights.h"
#include "model/weight_binding.h"
#include "model/weights_loader.h"

namespace dsv4 {

std::unique_ptr<LoadedModel> load_model(const std::filesystem::path& dir, Backend& backend, const StateConfig& state,
                                        const ExpertResidency& residency, const DraftLoad& drafts) {
    DSV4_CHECK(std::filesystem::is_directory(dir), "model directory {} does not exist", dir.string());
    ModelConfig config = load_model_config(dir / "config.json");
    auto loaded = std::unique_ptr<LoadedModel>(new LoadedModel{Checkpoint::open(dir), nullptr, std::nullopt, {}, {}});
    loaded->bound = bind_weights(config, *loaded->checkpoint);  // every problem reported at once
    // The FP8 bytes must be in the dialect config.json claims (the 2x trap), then in the backend's (exact conversion).
    check_fp8_dialect(fp8_dialect_evidence(config, *loaded->bound), config.fp8_dialect, dir.string());
    loaded->fp8_conversion = convert_fp8_weights(config, *loaded->bound, backend.fp8_dialect());
    // Weights first: the state is then sized against the memory that is really left.
    ModelWeights weights = load_model_weights(config, *loaded->bound, backend, residency);
    if (drafts.state_stages > 0) loaded->drafts = load_draft_weights(config, *loaded->bound, backend);
    backend.create_state(config_with_draft_state(config, drafts.state_stages), state);
    loaded->model = std::make_unique<DeepseekV4>(std::move(config), std::move(weights), backend);
    return loaded;
}

std::unique_ptr<LoadedModel> make_synthetic_model(const ModelConfig& config, Backend& backend, const StateConfig& state,
                                                  uint64_t seed, const ExpertResidency& residency,
                                                  const DraftLoad& drafts, const std::vector<double>& routing_skew,
                                                  HostExpertSink* host_experts) {
    ModelWeights weights = make_synthetic_weights(config, backend, seed, residency, routing_skew, host_experts);
    auto loaded = std::make_unique<LoadedModel>();
    if (drafts.state_stages > 0) {
        const DraftLayout layout = config.dspark ? kDsparkLayout : kMtpLayout;
        loaded->drafts = make_synthetic_draft_weights(config, backend, layout, seed);
    }
    backend.synchronize();
    backend.create_state(config_with_draft_state(config, drafts.state_stages), state);  // after the weights
    loaded->model = std::make_unique<DeepseekV4>(config, std::move(weights), backend);
    return loaded;
}

}  // namespace dsv4
