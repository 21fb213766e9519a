// Matcher configurations and how a byte moves them. A configuration is a small set of stacks (more than one only
// where the grammar is ambiguous). A stack is a Head: its top state plus the node of an interned StackArena that
// holds the frames below (equal stacks share one node, so comparing stacks is comparing two integers).
// step_head() applies one byte class to one stack: the top moves inside its rule, or calls push frames first
// (CompiledGrammar::push_outcomes), or finished rules pop first; every way that consumes the byte is kept.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "structured/compiled_grammar.h"

namespace dsv4::structured {

class StackArena {
  public:
    static constexpr uint32_t kNone = UINT32_MAX;  // the empty stack

    StackArena();
    // The stack `parent` with `state` pushed on it (created once, then found again).
    uint32_t intern(uint32_t parent, int32_t state);
    int32_t state(uint32_t node) const { return state_[node]; }
    uint32_t parent(uint32_t node) const { return parent_[node]; }
    uint32_t depth(uint32_t node) const { return node == kNone ? 0 : depth_[node]; }
    size_t size() const { return state_.size(); }
    void clear();

  private:
    void grow_table();

    std::vector<int32_t> state_;
    std::vector<uint32_t> parent_;
    std::vector<uint32_t> depth_;
    std::vector<uint32_t> table_;  // open addressing: node index + 1, 0 = empty
};

struct Head {
    uint32_t below = StackArena::kNone;
    int32_t top = -1;
    bool operator==(const Head&) const = default;
};

// Appends head to out unless it is already there.
inline void add_head(std::vector<Head>& out, Head head) {
    for (const Head& h : out) {
        if (h == head) return;
    }
    out.push_back(head);
}

// Most frames a stack may have; deeper pushes are dropped, which bounds the nesting of recursive grammars.
inline constexpr uint32_t kMaxStackDepth = 512;

// Steps one stack by byte class c. Results are added (deduplicated) to out.
void step_head(const CompiledGrammar& grammar, StackArena& arena, Head head, int c, std::vector<Head>& out);

// step_head's results remembered during one walk of the vocabulary trie: a walk steps the same stack by the same
// class many times (siblings and cousins share configurations), and a step that calls or leaves a rule costs far
// more than a lookup. Results name nodes of one arena: clear() whenever that arena is cleared.
class StepMemo {
  public:
    void clear();
    // Like step_head: adds what `head` steps to on class c to out (deduplicated).
    void step(const CompiledGrammar& grammar, StackArena& arena, Head head, int c, std::vector<Head>& out);

  private:
    struct Slot {
        Head head;
        int32_t c = 0;
        uint32_t generation = 0;  // the slot is in use when this is the memo's generation
        uint32_t begin = 0;       // results_[begin, begin + count)
        uint32_t count = 0;
    };
    size_t find(Head head, int c) const;  // the slot holding (head, c), or the free slot where it belongs
    void grow();

    std::vector<Slot> table_;  // open addressing, a power of two
    std::vector<Head> results_;
    std::vector<Head> scratch_;
    uint32_t generation_ = 1;
    size_t used_ = 0;
};

// Steps every stack of `in` by byte class c into out (cleared first). One stack moving inside one rule, the common
// case, costs one table lookup (CompiledGrammar::steps_by_lookup); other steps go through the memo.
inline void step_config(const CompiledGrammar& grammar, StackArena& arena, StepMemo& memo, std::span<const Head> in,
                        int c, std::vector<Head>& out) {
    out.clear();
    if (in.size() == 1 && grammar.steps_by_lookup(in[0].top, in[0].below == StackArena::kNone)) {
        const int32_t t = grammar.next(in[0].top, c);
        if (t >= 0) out.push_back({in[0].below, t});
        return;
    }
    for (const Head& head : in) memo.step(grammar, arena, head, c, out);
}

// Steps every stack of `in` by `byte` into out (cleared first).
void step_heads(const CompiledGrammar& grammar, StackArena& arena, std::span<const Head> in, uint8_t byte,
                std::vector<Head>& out);

// Whether the input may end here: some stack can finish every rule on it.
bool can_end(const CompiledGrammar& grammar, const StackArena& arena, std::span<const Head> heads);

// Every stack's states, bottom to top, each stack followed by -1: a key that identifies the configuration.
void serialize_heads(const StackArena& arena, std::span<const Head> heads, std::vector<int32_t>& out);

// Re-creates stacks of `from` in `to` (the mask walk uses its own arena).
void copy_heads(const StackArena& from, std::span<const Head> heads, StackArena& to, std::vector<Head>& out);

}  // namespace dsv4::structured
