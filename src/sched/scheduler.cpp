#include "sched/scheduler.h"

#include <algorithm>

#include "core/error.h"
#include "sample/stop_checker.h"

namespace dsv4 {
namespace {

uint64_t splitmix64(uint64_t x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

template <typename Container>
void erase_value(Container& c, Sequence* seq) {
    auto it = std::find(c.begin(), c.end(), seq);
    if (it != c.end()) c.erase(it);
}

}  // namespace

Scheduler::Scheduler(SchedulerConfig config, KvCacheManager& kv) : config_(std::move(config)), kv_(kv) {
    DSV4_CHECK(config_.max_num_seqs > 0 && config_.max_num_batched_tokens > 0,
               "scheduler: max_num_seqs ({}) and "
               "max_num_batched_tokens ({}) must be positive",
               config_.max_num_seqs, config_.max_num_batched_tokens);
    DSV4_CHECK(config_.vocab_size > 0, "scheduler: vocab_size must be positive");
}

void Scheduler::add(const GenerateRequest& request) {
    DSV4_CHECK(!groups_.contains(request.request_id), "request id '{}' is already in use", request.request_id);
    DSV4_CHECK(!request.prompt_tokens.empty(), "request '{}' has an empty prompt", request.request_id);
    auto group = std::make_unique<RequestGroup>();
    group->request_id = request.request_id;
    group->params = request.params;
    group->prompt = request.prompt_tokens;
    group->arrival = arrivals_++;
    if (!group->params.seed && config_.seed != 0) group->params.seed = splitmix64(config_.seed ^ group->arrival);
    const std::vector<int64_t> prompt64(request.prompt_tokens.begin(), request.prompt_tokens.end());
    const int n = std::max(1, request.params.n);
    for (int i = 0; i < n; ++i) {
        SamplerState sampler(group->params, prompt64, config_.eos_token_ids, config_.vocab_size, i);
        auto seq = std::make_unique<Sequence>(group.get(), i, std::move(sampler));
        seq->tokens = request.prompt_tokens;
        seq->status = i == 0 ? SequenceStatus::kWaiting : SequenceStatus::kForkPending;
        group->seqs.push_back(std::move(seq));
    }
    group->forked = n == 1;
    group->unfinished = n;
    waiting_.push_back(group->seqs[0].get());
    groups_.emplace(request.request_id, std::move(group));
}

int64_t Scheduler::num_waiting_tokens() const {
    int64_t total = 0;
    for (const Sequence* s : waiting_) total += s->num_tokens();
    return total;
}

int64_t Scheduler::chunk_tokens(const Sequence& seq, int64_t start, int64_t budget) const {
    int64_t n = seq.num_tokens() - start;
    if (n > 1 && config_.long_prefill_token_threshold > 0)
        n = std::min<int64_t>(n, config_.long_prefill_token_threshold);
    return std::min(n, budget);
}

int64_t Scheduler::drafts_to_feed(const Sequence& seq, int64_t budget) const {
    if (!spec_active_ || seq.draft.tokens.empty() || seq.num_computed + 1 != seq.num_tokens()) return 0;
    int64_t k = std::min<int64_t>(static_cast<int64_t>(seq.draft.tokens.size()), budget - 1);
    // No position past the context limit, no draft past max_tokens (the token after the drafts is emitted too).
    if (config_.max_model_len > 0) k = std::min(k, config_.max_model_len - seq.num_tokens());
    k = std::min<int64_t>(k, seq.group->params.max_tokens - seq.num_output_tokens() - 1);
    return std::max<int64_t>(k, 0);
}

void Scheduler::add_verify_entry(SchedulerOutput& out, Sequence* seq, int64_t drafts) {
    ScheduledSequence entry;
    entry.seq = seq;
    entry.start = seq->num_computed;
    entry.num_tokens = static_cast<int32_t>(1 + drafts);
    entry.sample = true;
    entry.drafts.assign(seq->draft.tokens.begin(), seq->draft.tokens.begin() + drafts);
    out.num_batched_tokens += entry.num_tokens;
    out.seqs.push_back(std::move(entry));
}

void Scheduler::add_entry(SchedulerOutput& out, Sequence* seq, int64_t start, int64_t end) {
    ScheduledSequence entry;
    entry.seq = seq;
    entry.start = start;
    entry.num_tokens = static_cast<int32_t>(end - start);
    entry.sample = end == seq->num_tokens();
    RequestGroup& group = *seq->group;
    if (entry.sample && !group.forked && seq->completion_index == 0) {
        for (size_t i = 1; i < group.seqs.size(); ++i) {
            if (group.seqs[i]->status == SequenceStatus::kForkPending)
                entry.fork_children.push_back(group.seqs[i].get());
        }
    }
    out.num_batched_tokens += entry.num_tokens;
    out.seqs.push_back(std::move(entry));
}

SchedulerOutput Scheduler::schedule() {
    erase_finished_groups();  // groups failed between steps
    SchedulerOutput out;
    int64_t budget = config_.max_num_batched_tokens;
    auto small_enough = [&](size_t batch) {
        return config_.spec_disable_batch_size <= 0 || batch <= static_cast<size_t>(config_.spec_disable_batch_size);
    };
    // Drafts are fed when the running batch is small enough; proposed for the next step when this one is.
    spec_active_ = config_.num_speculative_tokens > 0 && small_enough(running_.size());
    const bool preempted = schedule_running(out, budget);
    if (!preempted) admit_waiting(out, budget);
    out.propose_drafts = config_.num_speculative_tokens > 0 && small_enough(out.seqs.size());
    return out;
}

// Serves running sequences in order; returns whether any was preempted.
bool Scheduler::schedule_running(SchedulerOutput& out, int64_t& budget) {
    bool preempted = false;
    for (size_t i = 0; i < running_.size() && budget > 0;) {
        Sequence* seq = running_[i];
        const int64_t start = seq->num_computed;
        const int64_t drafts = drafts_to_feed(*seq, budget);
        const int64_t end = drafts > 0 ? start + 1 + drafts
                                       : kv_.limit_chunk(seq->kv, start, start + chunk_tokens(*seq, start, budget),
                                                         seq->num_prompt_tokens());
        bool self_preempted = false;
        while (!kv_.grow(seq->kv, end)) {
            Sequence* victim = running_.back();
            preempt(victim, out);
            preempted = true;
            if (victim == seq) {
                self_preempted = true;
                break;
            }
        }
        if (self_preempted) break;  // it was the last running sequence
        if (drafts > 0) {
            add_verify_entry(out, seq, drafts);
            budget -= 1 + drafts;
            ++i;
            continue;
        }
        add_entry(out, seq, start, end);
        budget -= end - start;
        ++i;
    }
    return preempted;
}

void Scheduler::admit_waiting(SchedulerOutput& out, int64_t& budget) {
    while (!waiting_.empty() && budget > 0) {
        Sequence* seq = waiting_.front();
        RequestGroup& group = *seq->group;
        int slots = 1;
        if (!group.forked && seq->completion_index == 0) {
            for (size_t i = 1; i < group.seqs.size(); ++i) {
                slots += group.seqs[i]->status == SequenceStatus::kForkPending ? 1 : 0;
            }
        }
        if (num_running() + reserved_slots_ + slots > config_.max_num_seqs || kv_.num_free_slots() < slots) break;
        const PrefixHit hit = kv_.find_prefix(seq->kv, seq->tokens);
        const int64_t start = hit.tokens;
        const int64_t end =
            kv_.limit_chunk(seq->kv, start, start + chunk_tokens(*seq, start, budget), seq->num_prompt_tokens());
        if (kv_.blocks_needed_to_admit(hit, end) > kv_.num_free_blocks()) break;
        waiting_.pop_front();
        if (!group.first_scheduled) group.first_scheduled = std::chrono::steady_clock::now();
        kv_.admit(seq->kv, kv_.take_slot(), hit, end, out.state_ops);
        if (!seq->reported) {
            seq->cached_prompt_tokens = hit.tokens;
            if (seq->completion_index == 0 && seq->num_output_tokens() == 0) {
                stats_.prompt_tokens_total += group.num_prompt_tokens();
            }
        }
        for (int i = 1; i < slots; ++i) {
            Sequence* child = nullptr;
            for (auto& s : group.seqs) {
                if (s->status == SequenceStatus::kForkPending && s->reserved_slot < 0) {
                    child = s.get();
                    break;
                }
            }
            child->reserved_slot = kv_.take_slot();
            ++reserved_slots_;
        }
        seq->num_computed = start;
        seq->status = SequenceStatus::kRunning;
        running_.push_back(seq);
        add_entry(out, seq, start, end);
        budget -= end - start;
    }
}

void Scheduler::release_fork_reservations(RequestGroup& group) {
    for (auto& s : group.seqs) {
        if (s->reserved_slot < 0) continue;
        kv_.release_slot(s->reserved_slot);
        s->reserved_slot = -1;
        --reserved_slots_;
    }
}

void Scheduler::requeue(Sequence* seq) {
    kv_.free(seq->kv);
    seq->num_computed = 0;
    seq->draft = {};
    seq->status = SequenceStatus::kWaiting;
    erase_value(running_, seq);
    if (!seq->group->forked) release_fork_reservations(*seq->group);
    waiting_.push_front(seq);
}

void Scheduler::preempt(Sequence* victim, SchedulerOutput& out) {
    requeue(victim);
    ++out.num_preempted;
    ++stats_.preemptions_total;
}

UpdateResult Scheduler::update(const SchedulerOutput& output, const RunnerOutput& runner) {
    DSV4_CHECK(runner.samples.size() == output.seqs.size(), "scheduler: {} runner results for {} scheduled sequences",
               runner.samples.size(), output.seqs.size());
    UpdateResult result;
    for (size_t j = 0; j < output.seqs.size(); ++j) {
        const ScheduledSequence& entry = output.seqs[j];
        Sequence* seq = entry.seq;
        if (seq->status != SequenceStatus::kRunning) continue;  // its request failed earlier in this update
        const SequenceSample& sample = runner.samples[j];
        if (!entry.drafts.empty()) {
            update_verified(entry, sample, result);
            continue;
        }
        const int64_t before = seq->num_computed;
        seq->num_computed += entry.num_tokens;
        kv_.on_computed(seq->kv, seq->tokens, before, seq->num_computed, result.state_ops, sample.written_end);
        seq->draft = sample.next_draft;
        if (!sample.error.empty()) {
            fail(seq->group->request_id, sample.error, result);
            continue;
        }
        if (!entry.sample) continue;
        DSV4_CHECK(sample.tokens.size() == 1 + entry.fork_children.size(),
                   "scheduler: {} sampled tokens for {} "
                   "completions",
                   sample.tokens.size(), 1 + entry.fork_children.size());
        if (!entry.fork_children.empty()) fork_group(seq, entry, sample, result);
        append_token(seq, sample.tokens[0], result);
    }
    erase_finished_groups();
    return result;
}

void Scheduler::update_verified(const ScheduledSequence& entry, const SequenceSample& sample, UpdateResult& result) {
    Sequence* seq = entry.seq;
    seq->draft = {};
    if (!sample.error.empty()) {
        fail(seq->group->request_id, sample.error, result);
        return;
    }
    DSV4_CHECK(!sample.tokens.empty() && sample.accepted >= 0 &&
                   sample.accepted + 1 == static_cast<int>(sample.tokens.size()) &&
                   sample.accepted <= static_cast<int>(entry.drafts.size()),
               "scheduler: a verify step of {} drafts returned {} tokens ({} accepted)", entry.drafts.size(),
               sample.tokens.size(), sample.accepted);
    record_acceptance(static_cast<int>(entry.drafts.size()), sample.accepted);
    const int64_t before = seq->num_computed;
    for (const GeneratedToken& token : sample.tokens) {
        append_token(seq, token, result);
        if (seq->finished()) return;  // EOS, a stop token or the length limit among the accepted tokens
    }
    // Positions before + 1 + accepted onwards held rejected drafts: they are fed again (overwritten) later.
    seq->num_computed = before + 1 + sample.accepted;
    const int64_t target_end = before + entry.num_tokens;
    if (target_end - seq->num_computed > kv_.config().rewind_capacity) {
        // The rejected rows evicted ring rows the next step needs: recompute (the prefix cache keeps what it can).
        ++stats_.spec_reprefills_total;
        requeue(seq);
        return;
    }
    kv_.on_computed(seq->kv, seq->tokens, before, seq->num_computed, result.state_ops,
                    std::max(target_end, sample.written_end));
    seq->draft = sample.next_draft;
}

void Scheduler::record_acceptance(int drafts, int accepted) {
    ++stats_.spec_drafts_total;
    stats_.spec_draft_tokens_total += drafts;
    stats_.spec_accepted_tokens_total += accepted;
    if (static_cast<int>(stats_.spec_accepted_per_pos.size()) < drafts) stats_.spec_accepted_per_pos.resize(drafts, 0);
    for (int i = 0; i < accepted; ++i) ++stats_.spec_accepted_per_pos[i];
}

void Scheduler::fork_group(Sequence* parent, const ScheduledSequence& entry, const SequenceSample& sample,
                           UpdateResult& result) {
    RequestGroup& group = *parent->group;
    group.forked = true;
    std::vector<Sequence*> requeue;
    for (size_t i = 0; i < entry.fork_children.size(); ++i) {
        Sequence* child = entry.fork_children[i];
        child->kv.slot = child->reserved_slot;
        child->reserved_slot = -1;
        --reserved_slots_;
        child->num_computed = parent->num_computed;
        child->cached_prompt_tokens = parent->cached_prompt_tokens;
        child->status = SequenceStatus::kRunning;
        append_token(child, sample.tokens[i + 1], result);
        if (child->finished()) continue;  // finished on its first token: no state needed (freed already)
        if (kv_.fork(parent->kv, parent->num_computed, child->kv, result.state_ops)) {
            running_.push_back(child);
        } else {  // no block for its copy of the partial block: recompute it later
            kv_.free(child->kv);
            child->num_computed = 0;
            child->status = SequenceStatus::kWaiting;
            requeue.push_back(child);
        }
    }
    waiting_.insert(waiting_.begin(), requeue.begin(), requeue.end());
}

void Scheduler::append_token(Sequence* seq, const GeneratedToken& token, UpdateResult& result) {
    seq->tokens.push_back(token.token);
    ++stats_.generation_tokens_total;
    const RequestGroup& group = *seq->group;
    FinishInput input;
    input.last_token = token.token;
    input.num_output_tokens = seq->num_output_tokens();
    input.num_total_tokens = seq->num_tokens();
    input.max_model_len = config_.max_model_len;
    const FinishCause cause = check_finish(group.params, config_.eos_token_ids, input);
    emit(seq, {token}, result);
    switch (cause) {
        case FinishCause::kNone:
            return;
        case FinishCause::kEos:
        case FinishCause::kStopString:
            finish_sequence(seq, FinishReason::kStop, std::nullopt, "", result);
            return;
        case FinishCause::kStopToken:
            finish_sequence(seq, FinishReason::kStop, token.token, "", result);
            return;
        case FinishCause::kLength:
            finish_sequence(seq, FinishReason::kLength, std::nullopt, "", result);
            return;
    }
}

void Scheduler::emit(Sequence* seq, std::vector<GeneratedToken> tokens, UpdateResult& result) {
    CompletionUpdate update;
    update.request_id = seq->group->request_id;
    update.output.completion_index = seq->completion_index;
    update.output.tokens = std::move(tokens);
    if (!seq->reported) {
        update.output.prompt_tokens = static_cast<int>(seq->num_prompt_tokens());
        update.output.cached_prompt_tokens = static_cast<int>(seq->cached_prompt_tokens);
        update.output.scheduled_at = seq->group->first_scheduled;
        seq->reported = true;
    }
    result.outputs.push_back(std::move(update));
}

void Scheduler::finish_sequence(Sequence* seq, FinishReason reason, std::optional<int32_t> stop_token,
                                const std::string& error, UpdateResult& result) {
    if (seq->finished()) return;
    if (seq->status == SequenceStatus::kRunning) erase_value(running_, seq);
    if (seq->status == SequenceStatus::kWaiting) erase_value(waiting_, seq);
    kv_.free(seq->kv);
    if (seq->reserved_slot >= 0) {
        kv_.release_slot(seq->reserved_slot);
        seq->reserved_slot = -1;
        --reserved_slots_;
    }
    seq->status = SequenceStatus::kFinished;
    // The finished flag rides on the event that carried the last token when there is one.
    if (!result.outputs.empty() && result.outputs.back().request_id == seq->group->request_id &&
        result.outputs.back().output.completion_index == seq->completion_index &&
        !result.outputs.back().output.finished) {
        RequestOutput& last = result.outputs.back().output;
        last.finished = true;
        last.finish_reason = reason;
        last.stop_token = stop_token;
        last.error = error;
    } else {
        emit(seq, {}, result);
        RequestOutput& last = result.outputs.back().output;
        last.finished = true;
        last.finish_reason = reason;
        last.stop_token = stop_token;
        last.error = error;
    }
    RequestGroup& group = *seq->group;
    if (--group.unfinished == 0) {
        ++stats_.requests_finished_total;
        result.finished_requests.push_back(group.request_id);
        finished_groups_.push_back(group.request_id);
    }
}

void Scheduler::erase_finished_groups() {
    for (const std::string& id : finished_groups_) groups_.erase(id);
    finished_groups_.clear();
}

void Scheduler::abort(const std::string& request_id, UpdateResult& result) {
    auto it = groups_.find(request_id);
    if (it == groups_.end()) return;
    for (auto& seq : it->second->seqs) finish_sequence(seq.get(), FinishReason::kAbort, std::nullopt, "", result);
    erase_finished_groups();
}

void Scheduler::finish(const std::string& request_id, int completion_index, UpdateResult& result) {
    auto it = groups_.find(request_id);
    if (it == groups_.end()) return;
    auto& seqs = it->second->seqs;
    if (completion_index < 0 || completion_index >= static_cast<int>(seqs.size())) return;
    Sequence* seq = seqs[completion_index].get();
    if (seq->status == SequenceStatus::kForkPending) return;  // no token yet: nothing a stop string could match
    finish_sequence(seq, FinishReason::kStop, std::nullopt, "", result);
    erase_finished_groups();
}

void Scheduler::fail(const std::string& request_id, const std::string& error, UpdateResult& result) {
    auto it = groups_.find(request_id);
    if (it == groups_.end()) return;
    for (auto& seq : it->second->seqs) finish_sequence(seq.get(), FinishReason::kError, std::nullopt, error, result);
    // Not erased here: update() may still hold entries of this group (erased at its end).
}

void Scheduler::abort_all(UpdateResult& result) {
    std::vector<std::string> ids;
    ids.reserve(groups_.size());
    for (const auto& [id, group] : groups_) ids.push_back(id);
    std::sort(ids.begin(), ids.end());
    for (const std::string& id : ids) abort(id, result);
}

}  // namespace dsv4
