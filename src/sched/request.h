// Request state on the engine thread. A RequestGroup is one submitted request; it has n Sequences (completions)
// that share the prompt. The prompt is computed once, by completion 0; the other completions wait in kForkPending
// (holding a reserved slot) until the step that finishes the prompt, sample their first token from the same logits
// and fork the state (KvCacheManager::fork). After that every sequence is scheduled on its own.
//
// There is no prefill or decode phase: a sequence has tokens (prompt, then output) and num_computed; each step
// computes some of the tokens not yet computed, and when it reaches the last one the next token is sampled.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "dsv4/engine.h"
#include "kv/kv_cache_manager.h"
#include "sample/sampler_state.h"
#include "sample/spec_verify.h"

namespace dsv4 {

struct RequestGroup;

enum class SequenceStatus : uint8_t {
    kWaiting,      // queued: never admitted, or preempted (its state was freed; it recomputes)
    kRunning,      // holds a slot and blocks
    kForkPending,  // n > 1: waits for completion 0 to finish the prompt
    kFinished,
};

struct Sequence {
    Sequence(RequestGroup* owner, int index, SamplerState sampler_state)
        : group(owner), completion_index(index), sampler(std::move(sampler_state)) {}

    RequestGroup* group;
    int completion_index;
    std::vector<int32_t> tokens;  // prompt, then generated tokens
    int64_t num_computed = 0;     // tokens whose state is in the slot / blocks
    SequenceStatus status = SequenceStatus::kWaiting;
    SamplerState sampler;
    SequenceKv kv;
    int32_t reserved_slot = -1;  // kForkPending: the slot taken for this completion when the group was admitted
    int64_t cached_prompt_tokens = 0;
    bool reported = false;  // the first event (prompt counts) has been sent
    // Speculative decoding: the drafts proposed after the last step, for the next one only (they follow the last
    // token); empty when there are none.
    DraftProposal draft;

    int64_t num_tokens() const { return static_cast<int64_t>(tokens.size()); }
    int64_t num_prompt_tokens() const;
    int64_t num_output_tokens() const { return num_tokens() - num_prompt_tokens(); }
    bool finished() const { return status == SequenceStatus::kFinished; }
};

struct RequestGroup {
    std::string request_id;
    SamplingParams params;
    std::vector<int32_t> prompt;
    uint64_t arrival = 0;                         // FCFS order
    std::vector<std::unique_ptr<Sequence>> seqs;  // n completions
    bool forked = false;                          // the prompt is done and every completion has its own state
    int unfinished = 0;
    std::optional<std::chrono::steady_clock::time_point> first_scheduled;  // left the queue (reported on events)

    int64_t num_prompt_tokens() const { return static_cast<int64_t>(prompt.size()); }
};

inline int64_t Sequence::num_prompt_tokens() const {
    return group->num_prompt_tokens();
}

}  // namespace dsv4
