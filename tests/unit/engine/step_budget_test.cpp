// The engine's step budget defaults (engine/step_budget.h): per device, with the expert tier, and what an explicit
// setting keeps; the CUDA workspace that follows the budget.
#include "engine/step_budget.h"

#include <gtest/gtest.h>

namespace dsv4 {
namespace {

EngineConfig on(const char* device) {
    EngineConfig c;
    c.device = device;
    return c;
}

TEST(StepBudget, DefaultsFollowTheDevice) {
    const StepBudget cpu = resolve_step_budget(on("cpu"));
    EXPECT_EQ(cpu.max_num_batched_tokens, 2048);
    EXPECT_EQ(cpu.long_prefill_token_threshold, 1024);
    const StepBudget cuda = resolve_step_budget(on("cuda"));
    EXPECT_EQ(cuda.max_num_batched_tokens, 8192);
    EXPECT_EQ(cuda.long_prefill_token_threshold, 8192);
    EngineConfig tiered = on("cuda");
    tiered.gpu_experts = 200;  // device memory goes to resident experts: the small budget
    EXPECT_EQ(resolve_step_budget(tiered).max_num_batched_tokens, 2048);
    EXPECT_EQ(resolve_step_budget(tiered).long_prefill_token_threshold, 1024);
}

TEST(StepBudget, ExplicitSettingsAreKept) {
    EngineConfig c = on("cuda");
    c.max_num_batched_tokens = 2048;
    EXPECT_EQ(resolve_step_budget(c).max_num_batched_tokens, 2048);
    EXPECT_EQ(resolve_step_budget(c).long_prefill_token_threshold, 1024);  // half of a small budget
    c.long_prefill_token_threshold = 0;                                    // no cap
    EXPECT_EQ(resolve_step_budget(c).long_prefill_token_threshold, 0);
    c = on("cpu");
    c.max_num_batched_tokens = 16384;
    c.long_prefill_token_threshold = 512;
    EXPECT_EQ(resolve_step_budget(c).max_num_batched_tokens, 16384);
    EXPECT_EQ(resolve_step_budget(c).long_prefill_token_threshold, 512);
}

TEST(StepBudget, WorkspaceGrowsWithTheBudget) {
    EXPECT_EQ(default_cuda_workspace_mib(2048), 6144);
    EXPECT_EQ(default_cuda_workspace_mib(4096), 6144);
    EXPECT_EQ(default_cuda_workspace_mib(8192), 10240);  // measured high water 4,977 MiB at C64 on flash-160
    EXPECT_EQ(default_cuda_workspace_mib(16384), 18432);
    EXPECT_EQ(default_cuda_workspace_mib(8192, true), 12288);  // with MTP drafts: 9,372 MiB measured at C64
}

TEST(StepBudget, TheConfiguredWorkspaceWins) {
    EngineConfig c = on("cuda");
    EXPECT_EQ(cuda_workspace_mib(c), 10240);
    c.speculative.method = "mtp";
    c.speculative.num_speculative_tokens = 3;
    EXPECT_EQ(cuda_workspace_mib(c), 12288);
    c.max_num_batched_tokens = 2048;
    EXPECT_EQ(cuda_workspace_mib(c), 6144);
    c.cuda_workspace_mib = 7000;
    EXPECT_EQ(cuda_workspace_mib(c), 7000);
}

}  // namespace
}  // namespace dsv4
