// CompiledGrammar: a grammar as a recursive transition network, ready for matching. Every rule is a DFA over byte
// classes (automaton_builder.h); the DFAs' states are numbered globally. A matcher configuration is a stack of states
// (the top one in the running rule, the ones below are where their callers continue), and a byte either moves the
// top state, or pushes calls first (precomputed "push outcomes" per state and byte class), or pops finished rules
// first. Precomputed here, once per grammar:
//   - dead states and unproductive rules removed (every remaining state can still reach the end of its rule);
//   - completes(s): the rule can end at s, possibly after calling rules that match the empty string;
//   - closure(s): the states reachable from s through calls of rules that match the empty string;
//   - push outcomes: for a state with calls and a byte class, every (frames pushed, new top) that consumes the byte.
// Left recursion (a rule that can call itself before consuming a byte) is rejected: it would push forever.
// Immutable after construction, so one instance serves many requests on many threads.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "structured/automaton_builder.h"
#include "structured/grammar.h"

namespace dsv4::structured {

class CompiledGrammar {
  public:
    // Throws GrammarError for left recursion, a root that matches nothing, or a size limit.
    explicit CompiledGrammar(const Grammar& grammar);

    struct Outcome {
        uint32_t push_begin = 0;  // frames to push below the new top (index into pushes())
        uint32_t push_count = 0;
        int32_t top = -1;  // the new top state after the byte
    };

    int num_classes() const { return classes_.count; }
    uint8_t byte_class(uint8_t byte) const { return classes_.of_byte[byte]; }
    int32_t num_states() const { return static_cast<int32_t>(completes_.size()); }
    int32_t start_state() const { return rule_start_[static_cast<size_t>(root_)]; }

    // The next state in the same rule on byte class c, or -1.
    int32_t next(int32_t state, int c) const {
        return next_[static_cast<size_t>(state) * static_cast<size_t>(classes_.count) + static_cast<size_t>(c)];
    }
    bool completes(int32_t state) const { return completes_[static_cast<size_t>(state)] != 0; }
    // States reachable through nullable calls, `state` first.
    std::span<const int32_t> closure(int32_t state) const {
        return {closure_.data() + closure_offsets_[static_cast<size_t>(state)],
                closure_offsets_[static_cast<size_t>(state) + 1] - closure_offsets_[static_cast<size_t>(state)]};
    }
    bool has_calls(int32_t state) const { return call_slot_[static_cast<size_t>(state)] >= 0; }
    // Outcomes of consuming byte class c by first calling rules from `state` (empty when it has no calls).
    std::span<const Outcome> push_outcomes(int32_t state, int c) const;
    std::span<const uint32_t> pushes(const Outcome& outcome) const {
        return {pushes_.data() + outcome.push_begin, outcome.push_count};
    }
    // Whether a step from `state` needs more than one table lookup (calls, nullable closure or a possible pop).
    bool is_simple(int32_t state) const { return simple_[static_cast<size_t>(state)] == kSimple; }
    // Whether a step of a stack whose top is `state` is one table lookup: a simple state, or a state without calls or
    // nullable closure at the bottom of its stack (a finished rule has nothing to pop into).
    bool steps_by_lookup(int32_t state, bool bottom) const {
        const uint8_t kind = simple_[static_cast<size_t>(state)];
        return kind == kSimple || (kind == kLocal && bottom);
    }
    // The most frames one push outcome adds (0 without calls).
    uint32_t max_push_count() const { return max_push_count_; }

    std::string rule_name_of(int32_t state) const;
    size_t memory_bytes() const;

  private:
    void flatten(const std::vector<RuleDfa>& dfas);
    void trim(const std::vector<RuleDfa>& dfas);
    void compute_completion();
    void compute_closures();
    void check_left_recursion() const;
    void compute_push_outcomes();
    void append_outcomes(int32_t state, int c, std::vector<uint32_t>& prefix, int depth);

    ByteClasses classes_;
    int32_t root_ = 0;
    std::vector<std::string> rule_names_;
    std::vector<int32_t> rule_start_;  // global state of each rule's start
    std::vector<int32_t> rule_of_;     // per state
    std::vector<int32_t> next_;        // per state and class
    std::vector<uint8_t> accepting_;
    std::vector<uint8_t> completes_;
    std::vector<uint8_t> tail_;            // accepting with no way forward: a call returning here needs no frame
    static constexpr uint8_t kLocal = 1;   // no calls, no nullable closure: only a pop makes a step more than a lookup
    static constexpr uint8_t kSimple = 2;  // local and never completes
    std::vector<uint8_t> simple_;          // per state: 0, kLocal or kSimple
    std::vector<uint32_t> call_offsets_;   // per state into calls_
    std::vector<std::pair<int32_t, int32_t>> calls_;  // (rule, return state), global states
    std::vector<uint32_t> closure_offsets_;
    std::vector<int32_t> closure_;
    std::vector<int32_t> call_slot_;         // per state: its row in outcome_offsets_, or -1
    std::vector<uint32_t> outcome_offsets_;  // per (slot, class), plus one
    std::vector<Outcome> outcomes_;
    std::vector<uint32_t> pushes_;
    uint32_t max_push_count_ = 0;
    std::vector<Outcome> scratch_outcomes_;
};

}  // namespace dsv4::structured
