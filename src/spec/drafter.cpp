#include "spec/drafter.h"

#include "core/error.h"

namespace dsv4 {

// Defined in mtp_drafter.cpp and dspark_drafter.cpp.
std::unique_ptr<Drafter> make_mtp_drafter(DeepseekV4& model, DraftWeights weights, const DraftOptions& options);
std::unique_ptr<Drafter> make_dspark_drafter(DeepseekV4& model, DraftWeights weights, const DraftOptions& options);

std::unique_ptr<Drafter> make_drafter(std::string_view method, DeepseekV4& model, DraftWeights weights,
                                      const DraftOptions& options) {
    DSV4_CHECK(options.num_speculative_tokens >= 1 && options.num_speculative_tokens <= kMaxVerifyDrafts,
               "num_speculative_tokens must be in [1, {}], got {}", kMaxVerifyDrafts, options.num_speculative_tokens);
    DSV4_CHECK(options.confidence_threshold >= 0.0 && options.confidence_threshold < 1.0,
               "the confidence threshold must be in [0, 1), got {}", options.confidence_threshold);
    if (method == "mtp") return make_mtp_drafter(model, std::move(weights), options);
    if (method == "dspark") return make_dspark_drafter(model, std::move(weights), options);
    fail("unknown speculative method '{}' (want mtp or dspark)", method);
}

}  // namespace dsv4
