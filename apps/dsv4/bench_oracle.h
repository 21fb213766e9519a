// `dsv4 bench offline --speculative-config JSON --oracle-acceptance L1,L2,...`: speculative decoding's throughput
// without a trained drafter. The drafts are the target's own greedy continuation (precomputed by plain decoding,
// which is also the baseline), and each is accepted with a per-token probability alpha chosen so that the expected
// tokens per verify step is L: E = (1 - alpha^(k+1)) / (1 - alpha). Verify steps (k + 1 real tokens per sequence,
// every row's logits to the host, the drafter's hidden states) and drafter steps (absorbing the accepted rows,
// proposing k drafts) run for real on a synthetic model with synthetic draft stages; only the accept decision is
// the oracle's. Reported with the byte ratio of a verify step to a decode step under even routing.
#pragma once

#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "config/model_config.h"
#include "dsv4/engine.h"
#include "state/state_config.h"

namespace dsv4::cli {

struct OracleOptions {
    SpeculativeConfig speculative;
    std::vector<double> acceptance_lengths{2.5, 3.0, 5.6};
    std::vector<int> batches{1};
    int64_t context = 256;  // tokens prefilled (real prefill: the CPU backend has no synthetic state)
    int steps = 8;          // timed verify steps per point
    int64_t prefill_chunk = 2048;
    uint64_t seed = 1;
    bool enforce_eager = false;
    std::string model_dir;  // a checkpoint with draft stages instead of synthetic weights (the CPU backend needs one)
    // Called with the state's model (the draft stages' layers included) and the state before anything is allocated:
    // the capacity plan, so that a model that cannot fit fails with its bytes and flags, not in cudaMalloc.
    std::function<void(const ModelConfig&, const StateConfig&)> check_capacity;
};

// Runs every (batch, acceptance length) point on `backend` (which holds no model yet) and prints a table. config is
// the synthetic model's, or options.model_dir's.
nlohmann::json run_oracle(const ModelConfig& config, Backend& backend, const OracleOptions& options);

}  // namespace dsv4::cli
