// ExpertParallelMoe: the MoE sub-layer across ranks (the MoeDispatch seam of model/moe_dispatch.h). Attention is
// data parallel (each rank runs its own sequences); at every MoE layer each rank routes its tokens, sends every
// (token, expert) pair to a rank holding the expert (itself when it holds one: dispatch_plan.h), computes the pairs
// it receives with its resident experts (ModelOps::moe_routed), returns the results, and combines them locally with
// its shared expert in moe's order (ModelOps::moe_combine): in exact numerics the logits are bit-identical to one
// rank's.
//
// Exchanges (all ranks must agree, so the mode is fixed per step from every rank's token count in begin_step):
//   normal       counts all-gathered, then rows, weights and ids all-to-all with exact counts (prefill-sized steps);
//   low latency  no count round: fixed-capacity slots per peer (capacity = the step's largest rank batch x top-k),
//                counts and ids in a fixed-size header (decode-sized steps; every size static, as CUDA graphs need).
// Dual-batch overlap splits a rank's tokens in two micro-batches and orders the work dispatch A, dispatch B, shared
// expert, experts A, combine A, experts B, combine B: with the exchanges on their own stream, A's combine runs while
// B's experts compute (on the loopback every step is synchronous; the order is the same, so are the bits).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "backend/model_ops.h"
#include "config/model_config.h"
#include "dist/communicator.h"
#include "dist/expert_placement.h"
#include "dist/routing_counters.h"
#include "model/moe_dispatch.h"

namespace dsv4::dist {

struct ExpertParallelOptions {
    bool dual_batch_overlap = false;
    // Steps whose largest rank batch is at most this many tokens use the low-latency exchange; 0: never.
    int64_t low_latency_max_tokens = 128;
};

// Per-rank counters (dsv4 bench offline --expert-parallel prints them; the server's /metrics per rank).
struct ExpertParallelStats {
    int64_t steps = 0;
    int64_t moe_layers = 0;
    int64_t low_latency_layers = 0;
    int64_t pairs_local = 0;     // pairs this rank computed for its own tokens
    int64_t pairs_sent = 0;      // pairs sent to other ranks
    int64_t pairs_received = 0;  // pairs other ranks sent here
    int64_t bytes_sent = 0;      // payload bytes this rank put on the wire (dispatch + combine)
    double exchange_seconds = 0.0;
};

class ExpertParallelMoe final : public MoeDispatch {
  public:
    ExpertParallelMoe(Communicator& comm, ModelOps& ops, const ModelConfig& config,
                      std::shared_ptr<const ExpertPlacement> placement, ExpertParallelOptions options = {});

    // Every rank, before each forward step, with its own token count (one small all-gather): fixes the step's
    // exchange mode and low-latency capacity for all layers.
    void begin_step(int64_t local_tokens);
    void moe(int layer, const Tensor& h, const MoeWeights& w, const Tensor& weights, const Tensor& ids, float limit,
             Tensor y) override;

    // Takes effect at the next layer; call between steps (eplb_controller.h).
    void set_placement(std::shared_ptr<const ExpertPlacement> placement);
    const ExpertPlacement& placement() const { return *placement_; }
    RoutingCounters& counters() { return counters_; }
    const ExpertParallelStats& stats() const { return stats_; }
    Communicator& communicator() { return comm_; }
    bool low_latency_step() const { return low_latency_; }

  private:
    struct Exchange;
    void dispatch(const LayerPlacement& layer, const Tensor& h, const Tensor& weights, const std::vector<int32_t>& ids,
                  int64_t begin, int64_t end, int k, Exchange& ex);
    void exchange_normal(Exchange& ex);
    void exchange_low_latency(Exchange& ex);
    void compute(const MoeWeights& w, float limit, Exchange& ex);
    void combine(Exchange& ex, Tensor routed, int k);
    std::vector<int64_t> gather_counts(const std::vector<int64_t>& mine);
    std::vector<int32_t> read_i32(const Tensor& t);

    Communicator& comm_;
    ModelOps& ops_;
    const int64_t hidden_;
    const int top_k_;
    std::shared_ptr<const ExpertPlacement> placement_;
    ExpertParallelOptions options_;
    RoutingCounters counters_;
    ExpertParallelStats stats_;
    bool low_latency_ = false;
    int64_t capacity_ = 0;  // low-latency slots per peer
    bool step_begun_ = false;
};

}  // namespace dsv4::dist
