// Scheduler: continuous batching with one token budget per step (vLLM v1's model: no prefill or decode phase).
// Each step, running sequences are served first in FCFS order (a decode costs one token, a prefill chunk up to
// long_prefill_token_threshold), then waiting ones are admitted in FCFS order while the budget, max_num_seqs, free
// slots and free blocks allow; strict FCFS: a request that does not fit blocks the ones behind it, so nothing
// starves. When a running sequence needs a block and none is free, the most recently admitted running sequence is
// preempted by recompute (its slot and blocks are freed; its prefix blocks stay cached) and goes back to the front
// of the queue; no new request is admitted in a step that preempted.
//
// Speculative decoding: a running sequence that holds drafts (Sequence::draft) feeds its last token plus up to k of
// them in one verify step; they count in the token budget (vLLM's num_tokens_with_spec) and are trimmed to the budget,
// the context limit and max_tokens. After the step, the accepted drafts and the correction token are appended, the
// sequence's computed length moves to the accepted end (rejected positions are simply fed again later: the state is
// addressed by position), and when the rejected tail is deeper than the state's rewind capacity the sequence is
// re-prefilled (its state freed, its prefix blocks kept cached). Speculation is off in steps with more than
// spec_disable_batch_size running sequences.
//
// The scheduler never touches tensors or the backend: it asks the KvCacheManager for state and returns StateOps.
// Engine-thread only.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "kv/kv_cache_manager.h"
#include "sched/request.h"
#include "sched/scheduler_output.h"

namespace dsv4 {

struct SchedulerConfig {
    int max_num_seqs = 64;
    int max_num_batched_tokens = 2048;
    int long_prefill_token_threshold = 1024;  // <= 0: no cap
    int64_t max_model_len = 0;                // context limit (finish reason kLength); 0 = none
    int64_t vocab_size = 0;
    std::vector<int64_t> eos_token_ids;
    uint64_t seed = 0;                // nonzero: requests without a seed get one derived from it (reproducible runs)
    int num_speculative_tokens = 0;   // 0: no speculative decoding
    int spec_disable_batch_size = 0;  // > 0: no drafts in steps with more running sequences
};

struct SchedulerStats {
    int64_t prompt_tokens_total = 0;      // prompt tokens of admitted requests
    int64_t generation_tokens_total = 0;  // tokens sampled
    int64_t preemptions_total = 0;
    int64_t requests_finished_total = 0;
    int64_t spec_drafts_total = 0;        // verify steps of one sequence
    int64_t spec_draft_tokens_total = 0;  // drafts fed
    int64_t spec_accepted_tokens_total = 0;
    std::vector<int64_t> spec_accepted_per_pos;  // [i]: verify steps that accepted draft i
    int64_t spec_reprefills_total = 0;           // rejections deeper than the rewind capacity
};

class Scheduler {
  public:
    Scheduler(SchedulerConfig config, KvCacheManager& kv);
    Scheduler(const Scheduler&) = delete;
    Scheduler& operator=(const Scheduler&) = delete;

    // Queues a request (already validated: parameters, token ids, lengths). Throws on a duplicate live id.
    void add(const GenerateRequest& request);

    SchedulerOutput schedule();
    // Applies a step's results: computed positions, sampled tokens, finishes, forks.
    UpdateResult update(const SchedulerOutput& output, const RunnerOutput& runner);

    // Between steps (the engine thread drains its inbox before schedule()). Unknown ids are ignored.
    void abort(const std::string& request_id, UpdateResult& result);
    void finish(const std::string& request_id, int completion_index, UpdateResult& result);  // kStop (stop string)
    void fail(const std::string& request_id, const std::string& error, UpdateResult& result);
    void abort_all(UpdateResult& result);

    bool has_work() const { return !running_.empty() || !waiting_.empty(); }
    bool contains(const std::string& request_id) const { return groups_.contains(request_id); }
    int num_running() const { return static_cast<int>(running_.size()); }
    int num_waiting() const { return static_cast<int>(waiting_.size()); }
    int64_t num_waiting_tokens() const;
    const SchedulerStats& stats() const { return stats_; }
    const SchedulerConfig& config() const { return config_; }
    KvCacheManager& kv() { return kv_; }

  private:
    int64_t chunk_tokens(const Sequence& seq, int64_t start, int64_t budget) const;
    bool schedule_running(SchedulerOutput& out, int64_t& budget);
    void admit_waiting(SchedulerOutput& out, int64_t& budget);
    void add_entry(SchedulerOutput& out, Sequence* seq, int64_t start, int64_t end);
    // Drafts a running sequence feeds this step (0 when it has none, speculation is off, or nothing fits).
    int64_t drafts_to_feed(const Sequence& seq, int64_t budget) const;
    void add_verify_entry(SchedulerOutput& out, Sequence* seq, int64_t drafts);
    // A verify step's results: accepted tokens appended, the computed end moved, too-deep rewinds re-prefilled.
    void update_verified(const ScheduledSequence& entry, const SequenceSample& sample, UpdateResult& result);
    void record_acceptance(int drafts, int accepted);
    // Frees a running sequence's state and queues it first to recompute (preemption, too-deep rewinds).
    void requeue(Sequence* seq);
    void preempt(Sequence* victim, SchedulerOutput& out);
    void release_fork_reservations(RequestGroup& group);
    void fork_group(Sequence* parent, const ScheduledSequence& entry, const SequenceSample& sample,
                    UpdateResult& result);
    // Appends a sampled token, emits it, and finishes the sequence when a stop rule says so.
    void append_token(Sequence* seq, const GeneratedToken& token, UpdateResult& result);
    void finish_sequence(Sequence* seq, FinishReason reason, std::optional<int32_t> stop_token,
                         const std::string& error, UpdateResult& result);
    void emit(Sequence* seq, std::vector<GeneratedToken> tokens, UpdateResult& result);
    void erase_finished_groups();

    SchedulerConfig config_;
    KvCacheManager& kv_;
    std::unordered_map<std::string, std::unique_ptr<RequestGroup>> groups_;
    std::deque<Sequence*> waiting_;
    std::vector<Sequence*> running_;
    std::vector<std::string> finished_groups_;  // erased after the current update (entries may still point in)
    int reserved_slots_ = 0;                    // slots held by kForkPending completions
    uint64_t arrivals_ = 0;
    SchedulerStats stats_;
    bool spec_active_ = false;  // this step feeds drafts
};

}  // namespace dsv4
