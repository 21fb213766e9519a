// A model-free harness for the scheduler: a fake runner that "generates" tokens as a deterministic function of a
// sequence's history, and a shadow of the backend state that checks every step's consistency. The shadow records,
// per slot, the tokens whose state it holds, per block the token at every position written into it, and per
// snapshot the prefix it was saved from; state ops change the shadow exactly as backend.h says they change the
// real state. Before each step it asserts that every scheduled sequence's slot holds exactly its computed prefix,
// that its block table covers that prefix with the right tokens, and that it only writes into blocks it holds
// alone (copy-on-write). So a bookkeeping error anywhere in the KV manager or the scheduler shows up as a failure
// here, without a model.
#pragma once

#include <gtest/gtest.h>

#include <map>
#include <numeric>
#include <string>
#include <vector>

#include "kv/kv_cache_manager.h"
#include "sched/scheduler.h"

namespace dsv4::sched_test {

class ShadowState {
  public:
    ShadowState(const KvCacheConfig& c)
        : config_(c),
          slots_(c.max_slots),
          blocks_(c.num_blocks, std::vector<int32_t>(c.block_tokens, -1)),
          snapshots_(c.num_snapshots) {}

    void apply(const std::vector<StateOp>& ops) {
        for (const StateOp& op : ops) {
            switch (op.kind) {
                case StateOp::Kind::kResetSlot:
                    slots_.at(op.a).clear();
                    break;
                case StateOp::Kind::kRestoreSnapshot:
                    ASSERT_EQ(static_cast<int64_t>(snapshots_.at(op.b).size()), op.boundary)
                        << "restoring a "
                           "snapshot saved at another boundary";
                    slots_.at(op.a) = snapshots_.at(op.b);
                    break;
                case StateOp::Kind::kSaveSnapshot: {
                    const auto& held = slots_.at(op.a);
                    ASSERT_GE(static_cast<int64_t>(held.size()), op.boundary);
                    ASSERT_LE(static_cast<int64_t>(held.size()), op.boundary + config_.rewind_capacity)
                        << "the ring no longer holds the boundary's rows";
                    snapshots_.at(op.b).assign(held.begin(), held.begin() + op.boundary);
                    break;
                }
                case StateOp::Kind::kCopySlot:
                    slots_.at(op.b) = slots_.at(op.a);
                    break;
                case StateOp::Kind::kCopyBlock:
                    blocks_.at(op.b) = blocks_.at(op.a);
                    break;
                case StateOp::Kind::kOffloadBlock:
                case StateOp::Kind::kLoadBlock:
                case StateOp::Kind::kOffloadSnapshot:
                case StateOp::Kind::kLoadSnapshot:
                case StateOp::Kind::kDemote:
                case StateOp::Kind::kLoadStaged:
                    FAIL() << "a tier op, but the scheduler harness attaches no KV tiers";
            }
        }
    }

    // Checks the scheduled sequences' state and then "computes" their chunks. A slot may hold positions past the
    // chunk's start (rejected drafts of a verify step): a rewind, allowed within the rewind capacity.
    void run_step(const SchedulerOutput& out, const KvCacheManager& kv) {
        for (const ScheduledSequence& e : out.seqs) {
            const Sequence& s = *e.seq;
            auto& held = slots_.at(s.kv.slot);
            ASSERT_GE(static_cast<int64_t>(held.size()), e.start) << "slot holds fewer positions than computed";
            ASSERT_LE(static_cast<int64_t>(held.size()) - e.start, config_.rewind_capacity)
                << "rewound deeper than the rewind capacity";
            held.resize(e.start);
            ASSERT_TRUE(std::equal(held.begin(), held.end(), s.tokens.begin())) << "slot holds other tokens";
            ASSERT_GE(static_cast<int64_t>(s.kv.blocks.size()), kv.blocks_for(e.start + e.num_tokens));
            for (int64_t p = 0; p < e.start; ++p) {
                ASSERT_EQ(block_at(s, p), s.tokens[p]) << "block content differs at position " << p;
            }
            for (int64_t p = e.start; p < e.start + e.num_tokens; ++p) {
                const int32_t block = s.kv.blocks[p / config_.block_tokens];
                ASSERT_EQ(kv.block_pool().ref_count(block), 1) << "writing into a shared block " << block;
            }
        }
        for (const ScheduledSequence& e : out.seqs) {
            const Sequence& s = *e.seq;
            auto& held = slots_.at(s.kv.slot);
            for (int64_t p = e.start; p < e.start + e.num_tokens; ++p) {
                // A verify entry feeds the last token, then its drafts.
                const int32_t token = p < s.num_tokens() ? s.tokens[p] : e.drafts.at(p - s.num_tokens());
                held.push_back(token);
                blocks_.at(s.kv.blocks[p / config_.block_tokens])[p % config_.block_tokens] = token;
            }
        }
    }

  private:
    int32_t block_at(const Sequence& s, int64_t p) const {
        return blocks_.at(s.kv.blocks.at(p / config_.block_tokens))[p % config_.block_tokens];
    }

    KvCacheConfig config_;
    std::vector<std::vector<int32_t>> slots_;
    std::vector<std::vector<int32_t>> blocks_;
    std::vector<std::vector<int32_t>> snapshots_;
};

// A greedy request whose prompt is prompt_len consecutive ids from `first` (wrapped into [2, vocab)).
inline GenerateRequest request(const std::string& id, int prompt_len, int max_tokens, int n = 1, int32_t first = 100,
                               int64_t vocab = 1000) {
    GenerateRequest r;
    r.request_id = id;
    r.prompt_tokens.resize(prompt_len);
    std::iota(r.prompt_tokens.begin(), r.prompt_tokens.end(), first);
    for (auto& t : r.prompt_tokens) t = 2 + t % static_cast<int32_t>(vocab - 2);
    r.params.max_tokens = max_tokens;
    r.params.ignore_eos = true;
    r.params.temperature = 0.0;
    r.params.n = n;
    return r;
}

// A deterministic "model": the next token depends on the whole history (so a recompute after preemption must
// reproduce it), EOS (id 1) now and then.
inline int32_t fake_next_token(std::span<const int32_t> tokens, int completion_index, int64_t vocab) {
    uint64_t h = 1469598103934665603ull;
    for (int32_t t : tokens) h = (h ^ static_cast<uint64_t>(t)) * 1099511628211ull;
    h ^= static_cast<uint64_t>(completion_index) * 0x9E3779B97F4A7C15ull;
    return static_cast<int32_t>(2 + (h >> 17) % static_cast<uint64_t>(vocab - 2));
}
inline int32_t fake_next_token(const Sequence& s, int64_t vocab) {
    return fake_next_token(s.tokens, s.completion_index, vocab);
}

inline RunnerOutput fake_run(const SchedulerOutput& out, int64_t vocab) {
    RunnerOutput r;
    r.samples.resize(out.seqs.size());
    for (size_t j = 0; j < out.seqs.size(); ++j) {
        const ScheduledSequence& e = out.seqs[j];
        if (!e.sample) continue;
        r.samples[j].tokens.push_back({fake_next_token(*e.seq, vocab), std::nullopt, {}});
        for (Sequence* child : e.fork_children)
            r.samples[j].tokens.push_back({fake_next_token(*child, vocab), std::nullopt, {}});
    }
    return r;
}

struct Finished {
    std::vector<int32_t> tokens;
    FinishReason reason = FinishReason::kNone;
    std::optional<int32_t> stop_token;
    bool finished = false;
};

// Collects events per (request, completion).
struct EventLog {
    std::map<std::pair<std::string, int>, Finished> completions;
    std::vector<std::string> finished_requests;

    Finished& get(const std::string& id, int completion) { return completions[{id, completion}]; }

    void add(const UpdateResult& r) {
        for (const CompletionUpdate& u : r.outputs) {
            Finished& f = completions[{u.request_id, u.output.completion_index}];
            EXPECT_FALSE(f.finished) << u.request_id << " got an event after finishing";
            for (const GeneratedToken& t : u.output.tokens) f.tokens.push_back(t.token);
            if (u.output.finished) {
                f.finished = true;
                f.reason = u.output.finish_reason;
                f.stop_token = u.output.stop_token;
            }
        }
        finished_requests.insert(finished_requests.end(), r.finished_requests.begin(), r.finished_requests.end());
    }
};

// Speculative decoding with the fake model: a verify entry accepts its drafts while they equal the fake model's
// next token, then emits the model's token; every sampling entry proposes k drafts for the next step when the step
// allows it: the model's own continuation, with a wrong draft wherever `wrong(history length, i)` says.
template <typename Wrong>
RunnerOutput fake_spec_run(const SchedulerOutput& out, int64_t vocab, int k, Wrong wrong) {
    RunnerOutput r = fake_run(out, vocab);
    for (size_t j = 0; j < out.seqs.size(); ++j) {
        const ScheduledSequence& e = out.seqs[j];
        if (!e.sample) continue;
        SequenceSample& sample = r.samples[j];
        std::vector<int32_t> history = e.seq->tokens;
        if (!e.drafts.empty()) {
            sample.tokens.clear();
            for (int32_t d : e.drafts) {
                if (d != fake_next_token(history, e.seq->completion_index, vocab)) break;
                history.push_back(d);
                sample.tokens.push_back({d, std::nullopt, {}});
                ++sample.accepted;
            }
        }
        const int32_t final_token = fake_next_token(history, e.seq->completion_index, vocab);
        if (!e.drafts.empty()) sample.tokens.push_back({final_token, std::nullopt, {}});
        history.push_back(final_token);
        if (!out.propose_drafts) continue;
        for (int i = 0; i < k; ++i) {
            int32_t d = fake_next_token(history, e.seq->completion_index, vocab);
            if (wrong(history.size(), i)) d = 2 + (d + 1 - 2) % static_cast<int32_t>(vocab - 2);
            sample.next_draft.tokens.push_back(d);
            history.push_back(d);
        }
    }
    return r;
}

// One engine step without a model: schedule, check + compute in the shadow, fake sampling, update.
inline SchedulerOutput step(Scheduler& s, ShadowState& shadow, EventLog& log) {
    SchedulerOutput out = s.schedule();
    shadow.apply(out.state_ops);
    shadow.run_step(out, s.kv());
    UpdateResult r = s.update(out, fake_run(out, s.config().vocab_size));
    shadow.apply(r.state_ops);
    log.add(r);
    return out;
}

}  // namespace dsv4::sched_test
