#include "engine/step_budget.h"

#include <algorithm>

namespace dsv4 {

int default_step_tokens(const EngineConfig& c) {
    const bool tiered = c.gpu_experts >= 0;
    return c.device == "cuda" && !tiered ? kLargeStepTokens : kSmallStepTokens;
}

StepBudget resolve_step_budget(const EngineConfig& c) {
    StepBudget b;
    b.max_num_batched_tokens = c.max_num_batched_tokens > 0 ? c.max_num_batched_tokens : default_step_tokens(c);
    if (c.long_prefill_token_threshold >= 0) {
        b.long_prefill_token_threshold = c.long_prefill_token_threshold;
    } else {  // a short request waits behind at most half a small step's prefill; a large step is one prompt's
        b.long_prefill_token_threshold =
            b.max_num_batched_tokens > kSmallStepTokens ? b.max_num_batched_tokens : b.max_num_batched_tokens / 2;
    }
    return b;
}

int64_t default_cuda_workspace_mib(int step_tokens, bool drafting) {
    const int64_t per_token_quarters = drafting ? 5 : 4;  // MiB / 4 a token
    return std::max<int64_t>(kMinWorkspaceMib, 2048 + int64_t{step_tokens} * per_token_quarters / 4);
}

int64_t cuda_workspace_mib(const EngineConfig& c) {
    if (c.cuda_workspace_mib > 0) return c.cuda_workspace_mib;
    return default_cuda_workspace_mib(resolve_step_budget(c).max_num_batched_tokens, c.speculative.enabled());
}

}  // namespace dsv4
