// EngineCore: the Engine of include/dsv4/engine.h. One engine thread runs the step loop:
//   drain the inbox (new requests, aborts, finishes) -> Scheduler::schedule -> ModelRunner::execute (state ops,
//   forward, sampling) -> Scheduler::update -> apply the update's state ops -> publish events to the streams.
// Other threads only touch the inbox, the stream map and the published stats, under one mutex; the scheduler, the
// KV manager and the model belong to the engine thread. Admission control (validation, lengths, queue caps,
// draining) happens synchronously in submit().
#pragma once

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "backend/backend.h"
#include "dist/expert_tier_moe.h"
#include "dsv4/engine.h"
#include "engine/result_stream.h"
#include "kv/kv_cache_manager.h"
#include "model/model_loader.h"
#include "runtime/model_runner.h"
#include "sched/scheduler.h"
#include "spec/drafter.h"

namespace dsv4 {

struct EngineParts {
    EngineConfig config;
    std::unique_ptr<Backend> backend;
    std::unique_ptr<LoadedModel> model;                // loaded on backend, whose state matches kv
    std::unique_ptr<Backend> host_backend;             // the expert tier's host pairs (null: none, or the backend)
    std::unique_ptr<dist::ExpertTierMoe> expert_tier;  // host-resident experts (null: every expert on the device)
    KvCacheConfig kv;
    HostBuffer tier_memory;          // the host KV pool (allocated by the backend: pinned on a GPU)
    std::unique_ptr<KvTiers> tiers;  // host / disk tiers of the prefix cache (null: none)
    SchedulerConfig scheduler;
    ModelInfo info;
    std::unique_ptr<Drafter> drafter;  // speculative decoding (null: off); drafts on model's backend
    VerifyMethod verify_method = VerifyMethod::kStandard;
    double oracle_alpha = 0.0;  // oracle acceptance (SpeculativeConfig::oracle_acceptance_length); 0: off
};

class EngineCore final : public Engine {
  public:
    explicit EngineCore(EngineParts parts);
    ~EngineCore() override;

    SubmitResult submit(GenerateRequest request) override;
    void abort(const std::string& request_id) override;
    void finish(const std::string& request_id, int completion_index) override;
    const ModelInfo& model_info() const override { return info_; }
    EngineStats stats() const override;
    void shutdown(std::chrono::milliseconds grace) override;

    // Test hooks (engine state counters; consistent between steps).
    struct StateCounts {
        int free_slots = 0;
        int free_blocks = 0;
        int num_blocks = 0;
        int snapshots_used = 0;
        int live_requests = 0;
    };
    StateCounts state_counts() const;

  private:
    struct Inbox {
        std::vector<GenerateRequest> requests;
        std::vector<std::string> aborts;
        std::vector<std::pair<std::string, int>> finishes;
        bool empty() const { return requests.empty() && aborts.empty() && finishes.empty(); }
    };

    SubmitResult reject(AdmissionError error, std::string message) const;
    std::string validate(const GenerateRequest& request) const;
    void run();
    void process(Inbox& inbox);
    void step();
    void fail_step(const SchedulerOutput& output, const std::string& error);
    void publish(UpdateResult& result);
    void publish_stats();
    void record_step(int64_t tokens);
    // A completed step's wall time, the part of it its forward passes took (the rest is host work) and its sampling.
    void record_step_time(double seconds, const RunnerOutput& runner_output);

    EngineConfig config_;
    ModelInfo info_;
    std::unique_ptr<Backend> backend_;
    std::unique_ptr<LoadedModel> model_;
    std::unique_ptr<Drafter> drafter_;
    std::unique_ptr<Backend> host_backend_;
    std::unique_ptr<dist::ExpertTierMoe> expert_tier_;  // set as the model's MoE dispatcher
    HostBuffer tier_memory_;
    std::unique_ptr<KvTiers> tiers_;  // before kv_: the manager and the runner point to it
    KvCacheManager kv_;
    Scheduler scheduler_;
    ModelRunner runner_;

    mutable std::mutex mutex_;
    std::condition_variable wake_;  // engine thread: inbox or stop
    std::condition_variable idle_;  // shutdown: the engine ran out of work
    Inbox inbox_;
    int64_t inbox_tokens_ = 0;
    std::unordered_map<std::string, std::shared_ptr<ResultStreamQueue>> streams_;  // live requests
    int waiting_requests_ = 0;  // published by the engine thread after each step
    int64_t waiting_tokens_ = 0;
    int free_slots_ = 0;            // sequence slots not held by running (or fork-pending) sequences
    int64_t transit_requests_ = 0;  // taken from the inbox, not yet in the published waiting count
    int64_t transit_tokens_ = 0;
    bool idle_now_ = true;
    bool draining_ = false;
    bool stop_ = false;
    bool joined_ = false;
    EngineStats stats_;
    StateCounts counts_;
    std::thread thread_;
};

}  // namespace dsv4
