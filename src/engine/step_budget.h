// The step token budget (--max-num-batched-tokens), the per-request prefill cap (--long-prefill-token-threshold) and
// the CUDA step scratch that budget needs (--cuda-workspace-mib), where the configuration leaves them to the engine:
// one place for these defaults (the engine, the capacity plan's workspace, `dsv4 bench offline`'s prefill chunk).
//
// Why the CUDA default is 8,192 tokens: a grouped expert GEMM over 8K tokens keeps the tensor cores busier than four
// over 2K (an 8K prompt prefilled in one chunk: 6,326 -> 7,512 tok/s), and on the seeds' serving protocol C64 went
// from 788 to 858 tok/s with TTFT unchanged and TPOT lower (H200, flash-160, docs/performance-log.md 2026-12-06
// seventh session); vLLM's default on GPUs of 70 GiB or more is 8,192 as well. Its steps used up to 4,977 MiB of
// scratch there (5,298 MiB for one 8K prompt), and one H100 run needed more than 6 GiB; with MTP drafts (the
// drafter's own pass over the step's tokens and the target's hidden rows it reads) 9,372 MiB: the workspace default
// grows with the budget, faster with a drafter. The CPU and the expert tier (--gpu-experts, where device memory is
// better spent on resident experts) keep 2,048.
#pragma once

#include <cstdint>

#include "dsv4/engine.h"

namespace dsv4 {

inline constexpr int kSmallStepTokens = 2048;      // the CPU's and the expert tier's budget
inline constexpr int kLargeStepTokens = 8192;      // CUDA's
inline constexpr int64_t kMinWorkspaceMib = 6144;  // CUDA step scratch at budgets up to 4,096 tokens

struct StepBudget {
    int max_num_batched_tokens = kSmallStepTokens;
    int long_prefill_token_threshold = kSmallStepTokens / 2;  // 0: no cap below the budget
};

// The device's default budget: the large one on CUDA without the expert tier, else the small one.
int default_step_tokens(const EngineConfig& c);

// The configuration's budget and cap, defaults filled in (max_num_batched_tokens 0: default_step_tokens; cap -1: half
// the small budget, the whole large one).
StepBudget resolve_step_budget(const EngineConfig& c);

// The CUDA step scratch for a budget: 6 GiB, or 2 GiB + 1 MiB a token where that is more (10 GiB at 8,192 tokens);
// with a drafter (speculative decoding) 1.25 MiB a token (12 GiB at 8,192).
int64_t default_cuda_workspace_mib(int step_tokens, bool drafting = false);

// The CUDA step scratch of the configuration: --cuda-workspace-mib, else default_cuda_workspace_mib of its budget.
int64_t cuda_workspace_mib(const EngineConfig& c);

}  // namespace dsv4
