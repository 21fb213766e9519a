#include "spec/drafter.h"

#include "core/error.h"

namespace dsv4 {

// Defined in mtp_drafter.cpp and dspark_drafter.cpp; the weights were checked here.
std::unique_ptr<Drafter> make_mtp_drafter(DeepseekV4& model, DraftWeights weights, const DraftOptions& options);
std::unique_ptr<Drafter> make_dspark_drafter(DeepseekV4& model, DraftWeights weights, const DraftOptions& options);

namespace {

// What a checkpoint offers instead, for the error of a method it cannot run.
std::string_view what_it_has(const DraftWeights& w) {
    switch (w.layout.kind) {
        case DraftKind::kMtp:
            return "this checkpoint has an MTP stage: use method 'mtp'";
        case DraftKind::kDspark:
            return "this checkpoint has DSpark stages: use method 'dspark'";
        case DraftKind::kNone:
            break;
    }
    return "this checkpoint has no draft stages";
}

}  // namespace

std::unique_ptr<Drafter> make_drafter(std::string_view method, DeepseekV4& model, DraftWeights weights,
                                      const DraftOptions& options) {
    DSV4_CHECK(options.num_speculative_tokens >= 1 && options.num_speculative_tokens <= kMaxVerifyDrafts,
               "num_speculative_tokens must be in [1, {}], got {}", kMaxVerifyDrafts, options.num_speculative_tokens);
    DSV4_CHECK(options.confidence_threshold >= 0.0 && options.confidence_threshold < 1.0,
               "the confidence threshold must be in [0, 1), got {}", options.confidence_threshold);
    if (method == "mtp") {
        DSV4_CHECK(weights.layout.kind == DraftKind::kMtp && !weights.mtp.empty(),
                   "speculative method 'mtp' needs the MTP stage of the original V4 checkpoint (mtp.0.e_proj, "
                   "mtp.0.h_proj, ...); {}",
                   what_it_has(weights));
        return make_mtp_drafter(model, std::move(weights), options);
    }
    if (method == "dspark") {
        DSV4_CHECK(weights.layout.kind == DraftKind::kDspark && weights.dspark.has_value() &&
                       model.config().dspark.has_value(),
                   "speculative method 'dspark' needs the DSpark stages of a -0731 checkpoint (mtp.0.main_proj, "
                   "markov_head, ...) and its dspark_* config keys; {}",
                   what_it_has(weights));
        return make_dspark_drafter(model, std::move(weights), options);
    }
    fail("unknown speculative method '{}' (want mtp or dspark)", method);
}

int draft_state_stages(std::string_view method, const ModelConfig& model) {
    if (method == "mtp") return kMtpStages;
    DSV4_CHECK(method == "dspark", "unknown speculative method '{}' (want mtp or dspark)", method);
    DSV4_CHECK(model.dspark.has_value(),
               "speculative method 'dspark' needs a -0731 checkpoint (dspark_* keys in config.json); this model has "
               "{}",
               model.num_nextn_predict_layers > 0 ? "an MTP stage: use method 'mtp'" : "no draft stages");
    return kDsparkStages;
}

}  // namespace dsv4
