#include "server/generation/generation.h"

#include <fmt/format.h>

#include <algorithm>

#include "core/clock.h"

namespace dsv4::server {
namespace {

using namespace std::chrono_literals;

constexpr auto kDrainDeadline = 10s;  // how long an aborted request may take to deliver its last events

ApiError submit_error(const SubmitResult& result) {
    switch (result.error) {
        case AdmissionError::kInvalid:
            return ApiError(400, "invalid_request_error", result.message);
        case AdmissionError::kTooLong:
            return ApiError(400, "invalid_request_error", result.message, "max_tokens", "context_length_exceeded");
        case AdmissionError::kQueueFull:
            return ApiError(429, "rate_limit_error",
                            result.message.empty() ? "The engine queue is full" : result.message, {}, "queue_full")
                .with_retry_after(1);
        case AdmissionError::kDraining:
            return unavailable_error("The server is shutting down", "draining", 5);
        case AdmissionError::kNone:
            break;
    }
    return internal_error("The engine returned no result stream");
}

FinishLabel finish_label(std::string_view reason) {
    if (reason == "length") return FinishLabel::kLength;
    if (reason == "abort") return FinishLabel::kAbort;
    return FinishLabel::kStop;
}

}  // namespace

std::string openai_finish_reason(FinishReason reason, bool saw_tool_calls) {
    switch (reason) {
        case FinishReason::kStop:
            return saw_tool_calls ? "tool_calls" : "stop";
        case FinishReason::kLength:
            return "length";
        case FinishReason::kAbort:
            return "abort";
        case FinishReason::kError:
            return "error";
        case FinishReason::kNone:
            break;
    }
    return "stop";
}

GenerationRun::GenerationRun(Engine& engine, const tokenizer::Tokenizer& tokenizer, ServerMetrics& metrics,
                             GenerationSpec spec)
    : engine_(&engine), tokenizer_(&tokenizer), metrics_(&metrics), spec_(std::move(spec)) {
    const int n = spec_.params.n;
    for (EngineJob& job : spec_.jobs) {
        JobState state;
        state.job = std::move(job);
        jobs_.push_back(std::move(state));
    }
    spec_.jobs.clear();
    choices_.resize(jobs_.size() * static_cast<size_t>(n));
    for (size_t i = 0; i < choices_.size(); ++i) {
        ChoiceConfig config = spec_.choice;
        if (choices_.size() > 1) config.tool_call_id_prefix += fmt::format("{}_", i);
        choices_[i].pipeline = std::make_unique<ChoicePipeline>(*tokenizer_, std::move(config));
    }
}

GenerationRun::~GenerationRun() {
    if (!all_done()) abort_all();
}

void GenerationRun::submit() {
    for (size_t i = 0; i < jobs_.size(); ++i) {
        GenerateRequest request;
        request.request_id = jobs_[i].job.request_id;
        request.prompt_tokens = jobs_[i].job.prompt_tokens;
        request.params = spec_.params;
        jobs_[i].submitted = Clock::now();
        SubmitResult result = engine_->submit(std::move(request));
        if (!result.stream) {
            for (size_t j = 0; j < i; ++j) engine_->abort(jobs_[j].job.request_id);
            jobs_.resize(i);  // only admitted jobs remain (for drain bookkeeping)
            throw submit_error(result);
        }
        jobs_[i].stream = std::move(result.stream);
        metrics_->request_max_num_generation_tokens.observe(spec_.params.max_tokens);
        metrics_->request_params_max_tokens.observe(spec_.params.max_tokens);
        metrics_->request_params_n.observe(spec_.params.n);
    }
}

std::vector<std::string> GenerationRun::request_ids() const {
    std::vector<std::string> ids;
    for (const JobState& job : jobs_) ids.push_back(job.job.request_id);
    return ids;
}

void GenerationRun::abort_all() {
    for (const JobState& job : jobs_) {
        if (job.stream && !job.stream->done()) engine_->abort(job.job.request_id);
    }
}

bool GenerationRun::all_done() const {
    for (const JobState& job : jobs_) {
        if (job.stream && !job.stream->done()) return false;
    }
    return true;
}

std::optional<std::pair<size_t, RequestOutput>> GenerationRun::next_event(std::chrono::milliseconds wait) {
    if (jobs_.size() == 1) {
        if (auto event = jobs_[0].stream->pop(wait)) return std::make_pair(size_t{0}, std::move(*event));
        return std::nullopt;
    }
    // Several prompts: take whatever is ready, round robin; if nothing is, wait briefly on one stream.
    for (size_t step = 0; step < jobs_.size(); ++step) {
        const size_t k = (rotation_ + step) % jobs_.size();
        if (jobs_[k].stream->done()) continue;
        if (auto event = jobs_[k].stream->pop(0ms)) {
            rotation_ = k + 1;
            return std::make_pair(k, std::move(*event));
        }
    }
    for (size_t step = 0; step < jobs_.size(); ++step) {
        const size_t k = (rotation_ + step) % jobs_.size();
        if (jobs_[k].stream->done()) continue;
        rotation_ = k + 1;
        if (auto event = jobs_[k].stream->pop(std::min<std::chrono::milliseconds>(wait, 1ms))) {
            return std::make_pair(k, std::move(*event));
        }
        break;
    }
    return std::nullopt;
}

UsageCounts GenerationRun::run(ResponseSink& sink, const std::atomic<bool>& client_gone) {
    bool writing = sink.on_start();
    client_left_ = !writing;
    while (writing && !all_done()) {
        if (client_gone.load(std::memory_order_relaxed)) {
            client_left_ = true;
            break;
        }
        auto next = next_event(50ms);
        if (!next) continue;
        const auto popped = Clock::now();
        const bool has_tokens = !next->second.tokens.empty();
        writing = handle_event(next->first, next->second, sink);
        if (!writing && !failed_) client_left_ = true;
        if (has_tokens && writing) {
            metrics_->event_overhead.observe(std::chrono::duration<double>(Clock::now() - popped).count());
        }
    }
    // The watcher's abort can finish the request before this loop sees the flag: it still was a disconnect.
    if (client_gone.load()) client_left_ = true;
    if (client_left_ || failed_) {
        if (client_left_) metrics_->count_client_disconnect();
        abort_all();
        drain_after_abort();
    } else {
        sink.on_complete(usage());
    }
    return usage();
}

void GenerationRun::drain_after_abort() {
    const auto deadline = Clock::now() + kDrainDeadline;
    while (!all_done() && Clock::now() < deadline) {
        auto next = next_event(20ms);
        if (!next) continue;
        RequestOutput& event = next->second;
        JobState& job = jobs_[next->first];
        observe_completion_timing(next->first, event);
        if (event.finished && ++job.finished_completions == spec_.params.n) {
            metrics_->e2e_latency.observe(seconds_since(spec_.arrival));
        }
        const int choice = static_cast<int>(next->first) * spec_.params.n + event.completion_index;
        if (event.finished && choice >= 0 && static_cast<size_t>(choice) < choices_.size() && !choices_[choice].ended) {
            choices_[choice].ended = true;
            metrics_->count_finish(FinishLabel::kAbort);
        }
    }
}

void GenerationRun::observe_completion_timing(size_t job_index, const RequestOutput& event) {
    const int n = spec_.params.n;
    if (event.completion_index < 0 || event.completion_index >= n) return;
    ChoiceState& choice = choices_[job_index * static_cast<size_t>(n) + static_cast<size_t>(event.completion_index)];
    if (event.scheduled_at && !choice.scheduled_at) choice.scheduled_at = event.scheduled_at;
    if (!event.tokens.empty()) {
        const auto now = Clock::now();
        if (!choice.first_token) choice.first_token = now;
        choice.last_token = now;
        choice.tokens += static_cast<int64_t>(event.tokens.size());
    }
    if (!event.finished) return;
    const auto seconds = [](Clock::time_point from, Clock::time_point to) {
        return std::max(0.0, std::chrono::duration<double>(to - from).count());
    };
    if (choice.scheduled_at) metrics_->queue_time.observe(seconds(jobs_[job_index].submitted, *choice.scheduled_at));
    if (!choice.first_token) return;  // nothing generated: no prefill or decode phase to report
    if (choice.scheduled_at) {
        metrics_->prefill_time.observe(seconds(*choice.scheduled_at, *choice.first_token));
        metrics_->inference_time.observe(seconds(*choice.scheduled_at, choice.last_token));
    }
    const double decode = seconds(*choice.first_token, choice.last_token);
    metrics_->decode_time.observe(decode);
    if (choice.tokens > 1)
        metrics_->request_time_per_output_token.observe(decode / static_cast<double>(choice.tokens - 1));
}

void GenerationRun::observe_token_timing(JobState& job, const RequestOutput& event) {
    if (event.tokens.empty()) return;
    const auto now = Clock::now();
    if (!job.saw_token) {
        metrics_->time_to_first_token.observe(std::chrono::duration<double>(now - spec_.arrival).count());
        job.saw_token = true;
    } else {
        metrics_->inter_token_latency.observe(std::chrono::duration<double>(now - job.last_token_time).count());
    }
    job.last_token_time = now;
}

bool GenerationRun::handle_event(size_t job_index, RequestOutput& event, ResponseSink& sink) {
    JobState& job = jobs_[job_index];
    const int n = spec_.params.n;
    if (event.completion_index < 0 || event.completion_index >= n) return true;  // not ours: ignore
    observe_token_timing(job, event);
    observe_completion_timing(job_index, event);
    job.cached_tokens = std::max(job.cached_tokens, event.cached_prompt_tokens);
    if (event.finished && ++job.finished_completions == n) {
        metrics_->e2e_latency.observe(seconds_since(spec_.arrival));
        metrics_->request_prompt_tokens.observe(static_cast<double>(job.job.prompt_tokens.size()));
    }
    const int choice = static_cast<int>(job_index) * n + event.completion_index;
    ChoiceState& state = choices_[static_cast<size_t>(choice)];
    if (state.ended) return true;  // tokens generated after a stop string: never shown
    if (event.finished && event.finish_reason == FinishReason::kError) {
        failed_ = true;
        metrics_->count_finish(FinishLabel::kError);
        sink.on_error(internal_error(event.error.empty() ? "The engine failed the request" : event.error));
        return false;
    }
    const bool stop_finish = event.finished && event.finish_reason == FinishReason::kStop;
    ChoiceUpdate update = state.pipeline->push(event.tokens, stop_finish ? event.stop_token : std::nullopt);
    if (update.stopped) {
        engine_->finish(job.job.request_id, event.completion_index);
        ChoiceEnd end;
        end.finish_reason = "stop";
        end.stop_string = update.stop_reason;
        return end_choice(choice, std::move(update), std::move(end), sink);
    }
    if (event.finished) {
        ChoiceEnd end;
        end.finish_reason = openai_finish_reason(event.finish_reason, state.pipeline->saw_tool_calls());
        // vLLM reports stop_token_ids matches as stop_reason; EOS gives null.
        const auto& stop_ids = spec_.params.stop_token_ids;
        if (stop_finish && event.stop_token &&
            std::find(stop_ids.begin(), stop_ids.end(), *event.stop_token) != stop_ids.end()) {
            end.stop_token = *event.stop_token;
        }
        return end_choice(choice, std::move(update), std::move(end), sink);
    }
    if (update.empty()) return true;
    return sink.on_update(choice, update, usage());
}

bool GenerationRun::end_choice(int choice, ChoiceUpdate update, ChoiceEnd end, ResponseSink& sink) {
    ChoiceState& state = choices_[static_cast<size_t>(choice)];
    state.ended = true;
    ChoiceUpdate tail = state.pipeline->finish();
    for (OutputDelta& delta : tail.deltas) append_merged(update.deltas, std::move(delta));
    // Tool calls can first appear in the tail (closed at the end); the finish reason must say so.
    if (end.finish_reason == "stop" && state.pipeline->saw_tool_calls()) end.finish_reason = "tool_calls";
    metrics_->count_finish(finish_label(end.finish_reason));
    metrics_->request_generation_tokens.observe(state.pipeline->completion_tokens());
    const UsageCounts counts = usage();
    if (!update.empty() && !sink.on_update(choice, update, counts)) return false;
    return sink.on_choice_end(choice, end, counts);
}

UsageCounts GenerationRun::usage() const {
    UsageCounts counts;
    for (const JobState& job : jobs_) {
        counts.prompt_tokens += static_cast<int>(job.job.prompt_tokens.size());
        counts.cached_tokens += job.cached_tokens;
    }
    for (const ChoiceState& choice : choices_) {
        counts.completion_tokens += choice.pipeline->completion_tokens();
        counts.reasoning_tokens += choice.pipeline->reasoning_tokens();
    }
    return counts;
}

}  // namespace dsv4::server
