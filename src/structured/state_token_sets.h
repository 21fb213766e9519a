// StateTokenSets: per automaton state, the vocabulary split by what the state decides on its own (the adaptive
// token mask idea of xgrammar, computed lazily). A stack whose top is `state` steps exactly like the lone state
// `state` over an opaque base, until every rule on it has completed and a further byte pops into the frames below.
// Walking the trie once from the lone state therefore splits the tokens three ways:
//   - accepted: some way consumes the whole token without popping below the base: allowed under any stack;
//   - rejected: every way dies before the token ends, and none could have popped: refused under any stack;
//   - dependent: the rest, whole trie subtrees whose every way inside the state died after a point where a pop was
//     possible. Only these need the real stack, so a cold mask walks them instead of the whole trie.
// Most of a string's or a number's vocabulary is decided by the state alone; the dependent part is the tokens that
// cross the end of the running rule (a closing quote and what follows it). The split of a state is computed on its
// first use and kept while a byte budget lasts; one instance serves every configuration with that top state.
// Thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <vector>

#include "structured/compiled_grammar.h"
#include "structured/token_trie.h"

namespace dsv4::structured {

// A trie subtree whose tokens need the real stack: its root node, the first node after it, and the root's depth and
// byte (so the mask walk tests the root without touching the trie's per-node arrays).
struct DependentSubtree {
    int32_t node = 0;
    int32_t end = 0;
    uint16_t depth = 0;
    uint8_t byte = 0;
};

struct StateTokens {
    std::vector<uint32_t> accepted_ids;             // the accepted tokens when few, else empty
    std::vector<uint64_t> accepted_bits;            // the accepted tokens as mask words when many, else empty
    std::vector<DependentSubtree> dependent_roots;  // in preorder
    // The relative stack depth a step from the walked configurations can reach (deepest stack kept plus the
    // grammar's longest push). Under a stack deeper than kMaxStackDepth minus this, the depth limit would drop
    // pushes the walk kept, and the split does not apply.
    uint32_t depth_needed = 0;
    bool any_accepted = false;

    // ORs the accepted tokens into a mask.
    void add_accepted(std::span<uint64_t> bits) const;
    size_t bytes() const;
};

// Walks the trie from the lone state `state` (no frames below it) and splits the vocabulary.
StateTokens split_vocabulary(const CompiledGrammar& grammar, const TokenTrie& trie, int32_t state, int64_t mask_bits);

class StateTokenSets {
  public:
    StateTokenSets(const CompiledGrammar& grammar, const TokenVocabulary& vocabulary, size_t budget_bytes);

    // The split of `state`, computed on first use; nullptr when it is not cached and the budget is spent (the caller
    // walks the whole trie instead).
    std::shared_ptr<const StateTokens> get(int32_t state);

    size_t bytes() const;
    size_t entries() const;

  private:
    const CompiledGrammar& grammar_;
    const TokenVocabulary& vocabulary_;
    size_t budget_;
    mutable std::mutex mutex_;
    size_t bytes_ = 0;
    size_t entries_ = 0;
    std::vector<std::shared_ptr<const StateTokens>> by_state_;
};

}  // namespace dsv4::structured
