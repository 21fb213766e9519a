#include "engine/engine_core.h"

#include <algorithm>
#include <chrono>
#include <exception>

#include "core/clock.h"
#include "core/error.h"
#include "sample/sampling_params.h"

namespace dsv4 {

EngineCore::EngineCore(EngineParts parts)
    : config_(std::move(parts.config)),
      info_(std::move(parts.info)),
      backend_(std::move(parts.backend)),
      model_(std::move(parts.model)),
      drafter_(std::move(parts.drafter)),
      host_backend_(std::move(parts.host_backend)),
      expert_tier_(std::move(parts.expert_tier)),
      tier_memory_(std::move(parts.tier_memory)),
      tiers_(std::move(parts.tiers)),
      kv_(parts.kv),
      scheduler_(std::move(parts.scheduler), kv_),
      runner_(*model_->model, config_.enforce_eager) {
    runner_.set_drafter(drafter_.get(), parts.verify_method);
    runner_.set_oracle_acceptance(parts.oracle_alpha);
    kv_.attach_tiers(tiers_.get());
    runner_.set_tiers(kv_.tiers());
    publish_stats();
    thread_ = std::thread([this] { run(); });
}

EngineCore::~EngineCore() {
    shutdown(std::chrono::milliseconds(0));
}

SubmitResult EngineCore::reject(AdmissionError error, std::string message) const {
    SubmitResult r;
    r.error = error;
    r.message = std::move(message);
    return r;
}

// Parameter and token checks against the model and the configuration; empty when the request is acceptable.
std::string EngineCore::validate(const GenerateRequest& request) const {
    if (request.request_id.empty()) return "request_id must not be empty";
    if (request.prompt_tokens.empty()) return "the prompt has no tokens";
    for (size_t i = 0; i < request.prompt_tokens.size(); ++i) {
        const int32_t t = request.prompt_tokens[i];
        if (t < 0 || t >= info_.vocab_size) {
            return fmt::format("prompt token {} at index {} is outside the vocabulary [0, {})", t, i, info_.vocab_size);
        }
    }
    try {
        validate_sampling_params(request.params, info_.vocab_size);
    } catch (const std::exception& e) {
        return e.what();
    }
    if (request.params.n > config_.max_num_seqs) {
        return fmt::format("n = {} exceeds the engine's max_num_seqs ({})", request.params.n, config_.max_num_seqs);
    }
    return {};
}

SubmitResult EngineCore::submit(GenerateRequest request) {
    if (std::string problem = validate(request); !problem.empty()) {
        return reject(AdmissionError::kInvalid, std::move(problem));
    }
    const auto prompt = static_cast<int64_t>(request.prompt_tokens.size());
    if (prompt + request.params.max_tokens > info_.max_model_len) {
        return reject(
            AdmissionError::kTooLong,
            fmt::format("this model's context length is {} tokens; the request asks for {} ({} in the "
                        "prompt, {} max_tokens)",
                        info_.max_model_len, prompt + request.params.max_tokens, prompt, request.params.max_tokens));
    }
    std::lock_guard<std::mutex> lock(mutex_);
    if (draining_) return reject(AdmissionError::kDraining, "the engine is shutting down");
    if (streams_.contains(request.request_id)) {
        return reject(AdmissionError::kInvalid, fmt::format("request id '{}' is already in use", request.request_id));
    }
    // Requests that will have to wait: those not running yet (inbox, in transit, the scheduler's queue) beyond the
    // sequence slots still free. An idle engine with free slots queues nothing, however fast requests arrive.
    const int64_t pending = static_cast<int64_t>(inbox_.requests.size()) + transit_requests_ + waiting_requests_;
    const int64_t queued = std::max<int64_t>(0, pending - free_slots_);
    if (queued >= config_.max_queued_requests) {
        return reject(AdmissionError::kQueueFull,
                      fmt::format("{} requests are waiting for a free sequence slot (max_num_queued_reqs {})", queued,
                                  config_.max_queued_requests));
    }
    const int64_t queued_tokens = inbox_tokens_ + transit_tokens_ + waiting_tokens_;
    if (queued_tokens + prompt > config_.max_queued_tokens) {
        return reject(AdmissionError::kQueueFull,
                      fmt::format("{} prompt tokens are queued; {} more exceed max_queued_tokens {}", queued_tokens,
                                  prompt, config_.max_queued_tokens));
    }
    auto stream = std::make_shared<ResultStreamQueue>(std::max(1, request.params.n));
    streams_.emplace(request.request_id, stream);
    inbox_tokens_ += prompt;
    inbox_.requests.push_back(std::move(request));
    wake_.notify_one();
    SubmitResult r;
    r.stream = std::move(stream);
    return r;
}

void EngineCore::abort(const std::string& request_id) {
    std::lock_guard<std::mutex> lock(mutex_);
    inbox_.aborts.push_back(request_id);
    wake_.notify_one();
}

void EngineCore::finish(const std::string& request_id, int completion_index) {
    std::lock_guard<std::mutex> lock(mutex_);
    inbox_.finishes.emplace_back(request_id, completion_index);
    wake_.notify_one();
}

EngineStats EngineCore::stats() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return stats_;
}

EngineCore::StateCounts EngineCore::state_counts() const {
    std::lock_guard<std::mutex> lock(mutex_);
    StateCounts counts = counts_;
    counts.live_requests = static_cast<int>(streams_.size());
    return counts;
}

void EngineCore::shutdown(std::chrono::milliseconds grace) {
    {
        std::unique_lock<std::mutex> lock(mutex_);
        if (joined_) return;
        draining_ = true;
        idle_.wait_for(lock, grace, [&] { return idle_now_ && inbox_.empty(); });
        stop_ = true;
        wake_.notify_all();
        joined_ = true;  // later calls return at once
    }
    if (thread_.joinable()) thread_.join();
}

void EngineCore::run() {
    for (;;) {
        Inbox inbox;
        bool stop = false;
        {
            std::unique_lock<std::mutex> lock(mutex_);
            const bool busy = scheduler_.has_work();
            if (!busy && inbox_.empty()) {
                idle_now_ = true;
                idle_.notify_all();
            }
            wake_.wait(lock, [&] { return stop_ || busy || !inbox_.empty(); });
            if (!inbox_.empty()) idle_now_ = false;
            std::swap(inbox, inbox_);
            // Counted by the scheduler's waiting queue once process() has added them and published the stats.
            transit_requests_ = static_cast<int64_t>(inbox.requests.size());
            transit_tokens_ = inbox_tokens_;
            inbox_tokens_ = 0;
            stop = stop_;
        }
        process(inbox);
        if (stop) {
            UpdateResult result;
            scheduler_.abort_all(result);
            publish_stats();
            publish(result);
            break;
        }
        if (scheduler_.has_work()) step();
    }
    std::lock_guard<std::mutex> lock(mutex_);
    idle_now_ = true;
    idle_.notify_all();
}

void EngineCore::process(Inbox& inbox) {
    UpdateResult result;
    for (const GenerateRequest& request : inbox.requests) {
        try {
            scheduler_.add(request);
        } catch (const std::exception& e) {  // validated in submit(): not expected, but never lose a stream
            for (int i = 0; i < std::max(1, request.params.n); ++i) {
                CompletionUpdate u;
                u.request_id = request.request_id;
                u.output.completion_index = i;
                u.output.finished = true;
                u.output.finish_reason = FinishReason::kError;
                u.output.error = e.what();
                result.outputs.push_back(std::move(u));
            }
            result.finished_requests.push_back(request.request_id);
        }
    }
    for (const std::string& id : inbox.aborts) scheduler_.abort(id, result);
    for (const auto& [id, index] : inbox.finishes) scheduler_.finish(id, index, result);
    publish_stats();
    publish(result);
}

void EngineCore::step() {
    const auto start = std::chrono::steady_clock::now();
    SchedulerOutput output = scheduler_.schedule();
    if (output.empty()) {  // nothing fits right now (cannot last: a lone request always fits); do not spin
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
        return;
    }
    RunnerOutput runner_output;
    try {
        runner_output = runner_.execute(output);
    } catch (const std::exception& e) {
        fail_step(output, fmt::format("the engine step failed: {}", e.what()));
        return;
    }
    UpdateResult result = scheduler_.update(output, runner_output);
    try {
        runner_.apply(result.state_ops);
    } catch (const std::exception& e) {  // a snapshot or fork copy failed: the state can no longer be trusted
        UpdateResult failed;
        scheduler_.abort_all(failed);
        for (CompletionUpdate& u : failed.outputs) {
            u.output.finish_reason = FinishReason::kError;
            u.output.error = fmt::format("state update failed: {}", e.what());
        }
        publish_stats();
        publish(result);
        publish(failed);
        return;
    }
    if (expert_tier_) expert_tier_->end_step();  // rebalancing fetches, between steps
    record_step(output.num_batched_tokens);
    publish_stats();  // before the events: a client that saw a request finish sees its state freed in the stats
    publish(result);
    record_step_time(seconds_since(start), runner_output);
}

void EngineCore::record_step(int64_t tokens) {
    const auto bound = std::lower_bound(kStepTokenBounds.begin(), kStepTokenBounds.end(), tokens);
    const auto bucket = static_cast<size_t>(bound - kStepTokenBounds.begin());
    std::lock_guard<std::mutex> lock(mutex_);
    ++stats_.steps_total;
    ++stats_.steps_by_tokens[bucket];
    stats_.step_tokens_total += tokens;
}

void EngineCore::record_step_time(double seconds, const RunnerOutput& runner_output) {
    std::lock_guard<std::mutex> lock(mutex_);
    stats_.step_seconds_total += seconds;
    stats_.step_host_seconds_total += std::max(0.0, seconds - runner_output.forward_seconds);
    stats_.step_sample_seconds_total += runner_output.sample_seconds;
}

void EngineCore::fail_step(const SchedulerOutput& output, const std::string& error) {
    UpdateResult result;
    for (const ScheduledSequence& entry : output.seqs) scheduler_.fail(entry.seq->group->request_id, error, result);
    publish_stats();
    publish(result);
}

void EngineCore::publish(UpdateResult& result) {
    std::vector<std::pair<std::shared_ptr<ResultStreamQueue>, RequestOutput*>> pushes;
    {
        std::lock_guard<std::mutex> lock(mutex_);
        for (CompletionUpdate& u : result.outputs) {
            auto it = streams_.find(u.request_id);
            if (it != streams_.end()) pushes.emplace_back(it->second, &u.output);
        }
        for (const std::string& id : result.finished_requests) streams_.erase(id);
    }
    for (auto& [stream, output] : pushes) stream->push(std::move(*output));
}

void EngineCore::publish_stats() {
    const SchedulerStats& s = scheduler_.stats();
    const KvCacheStats& k = kv_.stats();
    StateCounts counts;
    counts.free_slots = kv_.num_free_slots();
    counts.free_blocks = kv_.num_free_blocks();
    counts.num_blocks = kv_.block_pool().num_blocks();
    counts.snapshots_used = kv_.snapshot_pool().num_used();
    const int waiting = scheduler_.num_waiting();
    const int64_t waiting_tokens = scheduler_.num_waiting_tokens();
    std::lock_guard<std::mutex> lock(mutex_);
    counts_ = counts;
    waiting_requests_ = waiting;
    waiting_tokens_ = waiting_tokens;
    free_slots_ = counts.free_slots;
    transit_requests_ = 0;
    transit_tokens_ = 0;
    stats_.running = scheduler_.num_running();
    stats_.waiting = waiting;
    stats_.prompt_tokens_total = s.prompt_tokens_total;
    stats_.generation_tokens_total = s.generation_tokens_total;
    stats_.prefix_cache_queries = k.prefix_queries;
    stats_.prefix_cache_hits = k.prefix_hits;
    for (size_t t = 0; t < k.prefix_hits_by_tier.size(); ++t)
        stats_.prefix_cache_hits_by_tier[t] = k.prefix_hits_by_tier[t];
    if (expert_tier_) {
        const dist::ExpertCacheStats& c = expert_tier_->cache().stats();
        stats_.expert_pairs = c.pairs;
        stats_.expert_hit_pairs = c.hit_pairs;
        stats_.expert_host_pairs = c.host_pairs;
        stats_.expert_in_place_pairs = c.in_place_pairs;
        stats_.expert_in_place_bytes = expert_tier_->stats().in_place_pair_bytes;
        stats_.expert_fetched_bytes = expert_tier_->stats().fetched_bytes;
        stats_.expert_activation_bytes = expert_tier_->stats().activation_bytes;
    }
    if (const KvTiers* tiers = kv_.tiers()) {
        stats_.kv_offloaded_bytes = tiers->stats().offloaded_bytes;
        stats_.kv_loaded_bytes = tiers->stats().loaded_bytes;
        stats_.kv_disk_loaded_bytes = tiers->stats().staged_bytes;
        if (const DiskKvStore* disk = tiers->disk()) {
            stats_.kv_disk_written_bytes = disk->stats().bytes_written;
            stats_.kv_disk_corrupt = disk->stats().corrupt;
        }
    }
    stats_.kv_cache_usage = kv_.usage();
    stats_.preemptions_total = s.preemptions_total;
    stats_.requests_finished_total = s.requests_finished_total;
    stats_.spec_drafts_total = s.spec_drafts_total;
    stats_.spec_draft_tokens_total = s.spec_draft_tokens_total;
    stats_.spec_accepted_tokens_total = s.spec_accepted_tokens_total;
    stats_.spec_accepted_per_pos = s.spec_accepted_per_pos;
    const Profiler& device = model_->model->backend();
    stats_.workspace_bytes = device.workspace_bytes();
    stats_.workspace_high_water_bytes = device.workspace_high_water_bytes();
}

}  // namespace dsv4
