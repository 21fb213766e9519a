#include "fake_engine.h"

#include <algorithm>
#include <deque>

namespace dsv4::testing {
namespace {

using Clock = std::chrono::steady_clock;

uint64_t mix64(uint64_t x) {
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebULL;
    x ^= x >> 31;
    return x;
}

uint64_t hash_prompt(const std::vector<int32_t>& prompt) {
    uint64_t h = 0xcbf29ce484222325ULL;
    for (int32_t t : prompt) h = mix64(h ^ static_cast<uint32_t>(t));
    return h;
}

bool contains(const std::vector<int64_t>& ids, int32_t token) {
    return std::find(ids.begin(), ids.end(), static_cast<int64_t>(token)) != ids.end();
}

}  // namespace

class FakeEngine::Stream : public ResultStream {
  public:
    Stream(int n, std::shared_ptr<std::atomic<int64_t>> events, std::shared_ptr<std::atomic<int64_t>> ns_total,
           std::shared_ptr<std::atomic<int64_t>> ns_max)
        : n_(n), events_(std::move(events)), ns_total_(std::move(ns_total)), ns_max_(std::move(ns_max)) {}

    void push(RequestOutput event) {
        std::lock_guard lock(mutex_);
        queue_.emplace_back(std::move(event), Clock::now());
        ready_.notify_one();
    }

    std::optional<RequestOutput> pop(std::chrono::milliseconds timeout) override {
        std::unique_lock lock(mutex_);
        if (finished_popped_ == n_) return std::nullopt;
        if (!ready_.wait_for(lock, timeout, [&] { return !queue_.empty(); })) return std::nullopt;
        auto [event, pushed] = std::move(queue_.front());
        queue_.pop_front();
        if (event.finished) ++finished_popped_;
        const int64_t ns = std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - pushed).count();
        events_->fetch_add(1);
        ns_total_->fetch_add(ns);
        int64_t seen = ns_max_->load();
        while (ns > seen && !ns_max_->compare_exchange_weak(seen, ns)) {
        }
        return std::move(event);
    }

    bool done() const override {
        std::lock_guard lock(mutex_);
        return finished_popped_ == n_;
    }

  private:
    int n_;
    mutable std::mutex mutex_;
    std::condition_variable ready_;
    std::deque<std::pair<RequestOutput, Clock::time_point>> queue_;
    int finished_popped_ = 0;
    std::shared_ptr<std::atomic<int64_t>> events_;
    std::shared_ptr<std::atomic<int64_t>> ns_total_;
    std::shared_ptr<std::atomic<int64_t>> ns_max_;
};

FakeEngine::FakeEngine(FakeEngineOptions options)
    : options_(std::move(options)),
      handoff_events_(std::make_shared<std::atomic<int64_t>>(0)),
      handoff_ns_total_(std::make_shared<std::atomic<int64_t>>(0)),
      handoff_ns_max_(std::make_shared<std::atomic<int64_t>>(0)),
      random_state_(static_cast<uint64_t>(Clock::now().time_since_epoch().count())) {
    if (options_.word_tokens.empty()) options_.word_tokens = {100, 101, 102, 103};
    thread_ = std::thread([this] { loop(); });
}

FakeEngine::~FakeEngine() {
    if (thread_.joinable()) shutdown(std::chrono::milliseconds(0));
}

SubmitResult FakeEngine::submit(GenerateRequest request) {
    std::lock_guard lock(mutex_);
    const SamplingParams& params = request.params;
    auto reject = [](AdmissionError error, std::string message) {
        SubmitResult result;
        result.error = error;
        result.message = std::move(message);
        return result;
    };
    if (draining_) return reject(AdmissionError::kDraining, "the engine is shutting down");
    if (request.prompt_tokens.empty()) return reject(AdmissionError::kInvalid, "empty prompt");
    for (int32_t t : request.prompt_tokens) {
        if (t < 0 || t >= options_.info.vocab_size) return reject(AdmissionError::kInvalid, "token id out of range");
    }
    if (params.n < 1 || params.max_tokens < 1) return reject(AdmissionError::kInvalid, "bad n or max_tokens");
    if (static_cast<int64_t>(request.prompt_tokens.size()) + params.max_tokens > options_.info.max_model_len) {
        return reject(AdmissionError::kTooLong, "prompt + max_tokens exceeds the context");
    }
    if (live_.count(request.request_id) != 0) return reject(AdmissionError::kInvalid, "duplicate request id");
    // Like the engine: only requests beyond the running slots are queued.
    if (static_cast<int>(live_.size()) - options_.max_running >= options_.max_queued_requests) {
        return reject(AdmissionError::kQueueFull, "the fake engine queue is full");
    }
    Live live;
    live.stream = std::make_shared<Stream>(params.n, handoff_events_, handoff_ns_total_, handoff_ns_max_);
    live.completions.resize(static_cast<size_t>(params.n));
    const bool greedy = params.temperature < 1e-5;
    for (int i = 0; i < params.n; ++i) {
        uint64_t seed = 0;
        if (!greedy) seed = params.seed ? *params.seed + static_cast<uint64_t>(i) + 1 : mix64(++random_state_);
        live.completions[static_cast<size_t>(i)].seed = seed;
        if (params.constraint) live.completions[static_cast<size_t>(i)].constraint = params.constraint->start();
    }
    if (options_.script) live.script = options_.script(request.prompt_tokens);
    totals_.prompt_tokens_total += static_cast<int64_t>(request.prompt_tokens.size());
    totals_.prefix_cache_queries += static_cast<int64_t>(request.prompt_tokens.size());
    live.request = std::move(request);
    SubmitResult result;
    result.stream = live.stream;
    const std::string id = live.request.request_id;
    live_.emplace(id, std::move(live));
    order_.push_back(id);
    wake_.notify_all();
    return result;
}

void FakeEngine::abort(const std::string& request_id) {
    std::lock_guard lock(mutex_);
    auto it = live_.find(request_id);
    if (it == live_.end() || it->second.abort_requested) return;
    it->second.abort_requested = true;
    it->second.abort_step = steps_;
    int generated = 0;
    for (const Completion& c : it->second.completions) generated = std::max(generated, c.generated);
    aborts_.push_back(AbortRecord{request_id, Clock::now(), generated});
    wake_.notify_all();
}

void FakeEngine::finish(const std::string& request_id, int completion_index) {
    std::lock_guard lock(mutex_);
    auto it = live_.find(request_id);
    if (it == live_.end() || completion_index < 0 ||
        completion_index >= static_cast<int>(it->second.completions.size())) {
        return;
    }
    it->second.completions[static_cast<size_t>(completion_index)].finish_requested = true;
}

EngineStats FakeEngine::stats() const {
    std::lock_guard lock(mutex_);
    EngineStats stats = totals_;
    for (const auto& [id, live] : live_) (live.running ? stats.running : stats.waiting) += 1;
    stats.kv_cache_usage = static_cast<double>(stats.running) / std::max(1, options_.max_running);
    return stats;
}

void FakeEngine::shutdown(std::chrono::milliseconds grace) {
    std::unique_lock lock(mutex_);
    if (stop_) return;
    draining_ = true;
    idle_.wait_for(lock, grace, [&] { return live_.empty(); });
    for (auto& [id, live] : live_) {
        if (!live.abort_requested) {
            live.abort_requested = true;
            live.abort_step = steps_;
        }
    }
    wake_.notify_all();
    idle_.wait(lock, [&] { return live_.empty(); });
    stop_ = true;
    wake_.notify_all();
    lock.unlock();
    thread_.join();
    if (options_.on_shutdown) options_.on_shutdown(handoff());
}

void FakeEngine::loop() {
    std::unique_lock lock(mutex_);
    auto next = Clock::now();
    while (!stop_) {
        if (live_.empty()) {
            idle_.notify_all();
            wake_.wait(lock, [&] { return stop_ || !live_.empty(); });
            next = Clock::now() + options_.step_interval;
            continue;
        }
        wake_.wait_until(lock, next, [&] { return stop_; });
        if (stop_) break;
        // Steps start at least one interval apart: a late wake-up (a loaded CI machine) must not be caught up with a
        // burst of closely spaced steps, or phases a test times (decode = 3 intervals) come out short.
        next = Clock::now() + options_.step_interval;
        std::vector<std::pair<std::shared_ptr<Stream>, RequestOutput>> events;
        step_locked(events);
        lock.unlock();
        for (auto& [stream, event] : events) stream->push(std::move(event));
        lock.lock();
    }
}

void FakeEngine::step_locked(std::vector<std::pair<std::shared_ptr<Stream>, RequestOutput>>& events) {
    ++steps_;
    ++totals_.steps_total;
    // Step time as a real engine reports it, fixed so clients can check what they derive: 4 ms, a quarter host work,
    // half of it sampling.
    totals_.step_seconds_total += kFakeStepSeconds;
    totals_.step_host_seconds_total += kFakeStepSeconds * kFakeHostShare;
    totals_.step_sample_seconds_total += kFakeStepSeconds * kFakeSampleShare;
    totals_.workspace_bytes = kFakeWorkspaceBytes;
    totals_.workspace_high_water_bytes = std::min(kFakeWorkspaceBytes, kFakeWorkspaceBytes / 4 * steps_);
    const auto now = Clock::now();
    int running = 0;
    for (const auto& [id, live] : live_) running += live.running ? 1 : 0;
    for (const std::string& id : order_) {  // admit in submission order
        Live& live = live_.at(id);
        if (live.running || running >= options_.max_running) continue;
        live.running = true;
        live.scheduled_at = now;
        live.ready_at = now + options_.first_token_delay;
        ++running;
    }
    std::vector<std::string> done;
    for (const std::string& id : order_) {
        Live& live = live_.at(id);
        if (!live.running && !live.abort_requested) continue;
        if (!live.abort_requested && now < live.ready_at) continue;
        for (int i = 0; i < static_cast<int>(live.completions.size()); ++i) {
            Completion& c = live.completions[static_cast<size_t>(i)];
            if (c.finished) continue;
            RequestOutput event;
            event.completion_index = i;
            event.prompt_tokens = static_cast<int>(live.request.prompt_tokens.size());
            event.scheduled_at = live.scheduled_at;
            if (live.abort_requested) {
                c.finished = true;
                event.finished = true;
                event.finish_reason = FinishReason::kAbort;
                max_abort_steps_ = std::max(max_abort_steps_, steps_ - live.abort_step);
            } else if (c.finish_requested) {
                c.finished = true;
                event.finished = true;
                event.finish_reason = FinishReason::kStop;
            } else {
                advance_completion(live, i, event);
            }
            events.emplace_back(live.stream, std::move(event));
        }
        const bool all_finished = std::all_of(live.completions.begin(), live.completions.end(),
                                              [](const Completion& c) { return c.finished; });
        if (all_finished) done.push_back(id);
    }
    int64_t step_tokens = 0;
    for (const auto& [stream, event] : events) step_tokens += static_cast<int64_t>(event.tokens.size());
    const auto bound = std::lower_bound(kStepTokenBounds.begin(), kStepTokenBounds.end(), step_tokens);
    ++totals_.steps_by_tokens[static_cast<size_t>(bound - kStepTokenBounds.begin())];
    totals_.step_tokens_total += step_tokens;
    for (const std::string& id : done) {
        live_.erase(id);
        order_.erase(std::find(order_.begin(), order_.end(), id));
        ++totals_.requests_finished_total;
    }
}

void FakeEngine::advance_completion(Live& live, int index, RequestOutput& event) {
    Completion& c = live.completions[static_cast<size_t>(index)];
    const int32_t token = next_token(live, c, index);
    ++c.generated;
    ++totals_.generation_tokens_total;
    event.tokens.push_back(with_logprobs(token, live.request.params));
    const FinishReason reason = finish_check(live, c, token);
    if (reason != FinishReason::kNone) {
        c.finished = true;
        event.finished = true;
        event.finish_reason = reason;
        if (reason == FinishReason::kStop) event.stop_token = token;
    }
}

int32_t FakeEngine::token_at(const Live& live, const Completion& completion, int, int position) const {
    const SamplingParams& params = live.request.params;
    if (live.script) {
        const int script_len = static_cast<int>(live.script->size());
        if (position < script_len) return (*live.script)[static_cast<size_t>(position)];
        const bool eos_allowed = !params.ignore_eos && position + 1 > params.min_tokens;
        if (position == script_len && eos_allowed && !options_.info.eos_token_ids.empty()) {
            return options_.info.eos_token_ids[0];
        }
    }
    const uint64_t h = mix64(hash_prompt(live.request.prompt_tokens) ^ mix64(completion.seed) ^
                             mix64(static_cast<uint64_t>(position) + 0x9e37));
    return options_.word_tokens[h % options_.word_tokens.size()];
}

int32_t FakeEngine::next_token(const Live& live, Completion& completion, int index) const {
    const int32_t proposal = token_at(live, completion, index, completion.generated);
    if (!completion.constraint) return proposal;
    std::vector<uint64_t> mask(static_cast<size_t>((options_.info.vocab_size + 63) / 64));
    const TokenMaskSummary summary = completion.constraint->fill_allowed(mask);
    auto allowed = [&](int32_t t) { return t >= 0 && ((mask[static_cast<size_t>(t) >> 6] >> (t & 63)) & 1) != 0; };
    int32_t token = proposal;
    if (!allowed(token)) {
        std::vector<int32_t> ids;
        for (int32_t t = 0; t < options_.info.vocab_size; ++t) {
            if (allowed(t)) ids.push_back(t);
        }
        if (summary.end_allowed && !options_.info.eos_token_ids.empty()) {
            token = options_.info.eos_token_ids[0];
        } else if (!ids.empty()) {
            token = ids[mix64(completion.seed ^ static_cast<uint64_t>(proposal) * 0x9e37) % ids.size()];
        }
    }
    completion.constraint->accept(token);
    return token;
}

GeneratedToken FakeEngine::with_logprobs(int32_t token, const SamplingParams& params) const {
    GeneratedToken out;
    out.token = token;
    if (!params.logprobs) return out;
    const float logprob = -0.1f * static_cast<float>(1 + token % 13);
    out.logprob = logprob;
    out.top.push_back({token, logprob});
    const auto& words = options_.word_tokens;
    for (int k = 1; k < *params.logprobs; ++k) {
        out.top.push_back({words[static_cast<size_t>(token + k) % words.size()], logprob - static_cast<float>(k)});
    }
    if (*params.logprobs == 0) out.top.clear();
    return out;
}

FinishReason FakeEngine::finish_check(const Live& live, const Completion& completion, int32_t token) const {
    const SamplingParams& params = live.request.params;
    const bool past_min = completion.generated > params.min_tokens;
    std::vector<int64_t> eos(options_.info.eos_token_ids.begin(), options_.info.eos_token_ids.end());
    if (past_min && !params.ignore_eos && contains(eos, token)) return FinishReason::kStop;
    if (past_min && contains(params.stop_token_ids, token)) return FinishReason::kStop;
    if (completion.generated >= params.max_tokens) return FinishReason::kLength;
    const auto total = static_cast<int64_t>(live.request.prompt_tokens.size()) + completion.generated;
    if (total >= options_.info.max_model_len) return FinishReason::kLength;
    return FinishReason::kNone;
}

std::vector<int32_t> FakeEngine::expected_tokens(const std::vector<int32_t>& prompt, const SamplingParams& params,
                                                 int completion_index) const {
    Live live;
    live.request.prompt_tokens = prompt;
    live.request.params = params;
    if (options_.script) live.script = options_.script(prompt);
    Completion c;
    if (params.temperature >= 1e-5 && params.seed) c.seed = *params.seed + static_cast<uint64_t>(completion_index) + 1;
    if (params.constraint) c.constraint = params.constraint->start();
    std::vector<int32_t> tokens;
    for (;;) {
        const int32_t token = next_token(live, c, completion_index);
        ++c.generated;
        tokens.push_back(token);
        if (finish_check(live, c, token) != FinishReason::kNone) return tokens;
    }
}

int FakeEngine::live_requests() const {
    std::lock_guard lock(mutex_);
    return static_cast<int>(live_.size());
}

std::vector<FakeEngine::AbortRecord> FakeEngine::aborts() const {
    std::lock_guard lock(mutex_);
    return aborts_;
}

int64_t FakeEngine::max_steps_to_apply_abort() const {
    std::lock_guard lock(mutex_);
    return max_abort_steps_;
}

FakeHandoffStats FakeEngine::handoff() const {
    FakeHandoffStats stats;
    stats.events = handoff_events_->load();
    stats.seconds_total = static_cast<double>(handoff_ns_total_->load()) * 1e-9;
    stats.seconds_max = static_cast<double>(handoff_ns_max_->load()) * 1e-9;
    return stats;
}

}  // namespace dsv4::testing
