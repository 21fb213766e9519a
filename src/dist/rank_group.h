// Running the ranks of one process: one worker thread per rank (per GPU with NCCL, per loopback rank in the tests),
// and one expert-parallel forward step. A rank that fails aborts its communicator, so its peers' collectives fail
// with CommError and their threads end too (no hang); run_ranks then reports the root cause.
#pragma once

#include <functional>
#include <span>

#include "dist/communicator.h"
#include "dist/expert_parallel_moe.h"
#include "model/deepseek_v4.h"

namespace dsv4::dist {

// Runs body(rank) on one thread per communicator and joins them all. Rethrows the first failure that was not a
// CommError (the rank that really failed), else the first CommError, as dsv4::Error "expert-parallel rank R: ...".
void run_ranks(std::span<Communicator* const> comms, const std::function<void(int rank)>& body);

// One step on one rank: the dispatcher's begin_step with the batch's token count, then the model's forward. A rank
// with nothing to run passes an empty batch and still takes part in every layer's exchanges.
ForwardResult expert_parallel_forward(DeepseekV4& model, ExpertParallelMoe& moe, const StepBatch& batch,
                                      const ForwardRequest& request = {});

}  // namespace dsv4::dist
