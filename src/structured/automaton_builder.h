// Grammar IR -> one DFA per rule, over byte classes. Each rule body becomes a Thompson NFA whose edges are byte-class
// sets, epsilons, or calls of other rules; the subset construction then turns it into a DFA whose states have one
// transition per byte class and a list of (called rule -> next state) call edges. Intersections and differences of
// reference-free sub-expressions are built as product DFAs and spliced into the NFA. Every size is bounded by
// GrammarLimits; going over one is a GrammarError, never a hang.
#pragma once

#include <array>
#include <cstdint>
#include <utility>
#include <vector>

#include "structured/grammar.h"

namespace dsv4::structured {

// Bytes that no grammar byte set distinguishes share a class, so tables are indexed by class, not by byte.
struct ByteClasses {
    std::array<uint8_t, 256> of_byte{};
    int count = 0;
};
ByteClasses compute_byte_classes(const Grammar& grammar);

struct RuleDfaState {
    std::vector<int32_t> next;                       // per byte class: the next state in the same DFA, or -1
    std::vector<std::pair<int32_t, int32_t>> calls;  // (called rule, state after the call)
    bool accepting = false;
};

struct RuleDfa {
    std::vector<RuleDfaState> states;  // state 0 is the start
};

// Builds every rule's DFA. Throws GrammarError when a limit is exceeded or an intersection / difference operand
// references a rule.
std::vector<RuleDfa> build_rule_dfas(const Grammar& grammar, const ByteClasses& classes);

}  // namespace dsv4::structured
