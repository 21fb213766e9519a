#include "structured/state_token_sets.h"

#include <algorithm>
#include <bit>

#include "structured/stack_step.h"

namespace dsv4::structured {
namespace {

constexpr size_t kEntryOverhead = 96;  // the entry, its vectors and the shared_ptr block: a rough cost for the budget

// One depth of the split walk: the configuration after the path's first d bytes. Most walks move one stack inside
// one rule, so a configuration of one stack is kept inline and `many` is used only for more.
struct Level {
    Head one;
    uint32_t count = 0;    // stacks in the configuration; above one they are in SplitScratch::many[d]
    uint32_t may_pop = 0;  // a pop below the base was possible before one of the path's first d + 1 bytes
};

// Per-thread scratch of the split walk (separate from the mask walk's, which is in use when a split is computed).
struct SplitScratch {
    StackArena arena;  // relative stacks: kNone is the opaque base, not the bottom of the stack
    std::vector<Level> levels;
    std::vector<std::vector<Head>> many;
    std::vector<uint64_t> bits;
};

SplitScratch& split_scratch() {
    thread_local SplitScratch s;
    return s;
}

// Keeps the accepted tokens as ids or as mask words, whichever is smaller.
void keep_accepted(std::vector<uint64_t>& bits, size_t count, StateTokens& out) {
    out.any_accepted = count > 0;
    if (count * sizeof(uint32_t) >= bits.size() * sizeof(uint64_t)) {
        out.accepted_bits = bits;
        return;
    }
    out.accepted_ids.reserve(count);
    for (size_t w = 0; w < bits.size(); ++w) {
        for (uint64_t word = bits[w]; word != 0; word &= word - 1)
            out.accepted_ids.push_back(static_cast<uint32_t>(w * 64 + static_cast<size_t>(std::countr_zero(word))));
    }
}

}  // namespace

void StateTokens::add_accepted(std::span<uint64_t> bits) const {
    if (!accepted_bits.empty()) {
        for (size_t w = 0; w < bits.size(); ++w) bits[w] |= accepted_bits[w];
        return;
    }
    for (uint32_t id : accepted_ids) bits[id >> 6] |= uint64_t{1} << (id & 63);
}

size_t StateTokens::bytes() const {
    return kEntryOverhead + accepted_ids.size() * sizeof(uint32_t) + accepted_bits.size() * sizeof(uint64_t) +
           dependent_roots.size() * sizeof(int32_t);
}

// Preorder walk as in TokenMasker, from the lone state. A subtree whose prefix no way inside the state consumes is
// dependent when a pop was possible before one of the prefix's bytes (Level::may_pop: some stack could finish every
// rule on it, and the real step would also pop into the frames below the base), otherwise rejected.
StateTokens split_vocabulary(const CompiledGrammar& grammar, const TokenTrie& trie, int32_t state, int64_t mask_bits) {
    SplitScratch& s = split_scratch();
    s.arena.clear();
    s.bits.assign(static_cast<size_t>((mask_bits + 63) / 64), 0);
    const auto levels_needed = static_cast<size_t>(trie.max_depth()) + 1;
    if (s.levels.size() < levels_needed) s.levels.resize(levels_needed);
    if (s.many.size() < levels_needed) s.many.resize(levels_needed);
    const Head start{StackArena::kNone, state};
    s.levels[0] = {start, 1, can_end(grammar, s.arena, std::span(&start, 1)) ? 1u : 0u};
    StateTokens out;
    uint32_t deepest = 0;
    size_t accepted = 0;
    uint64_t* bits = s.bits.data();
    const int32_t num_nodes = trie.num_nodes();
    int32_t n = 0;
    while (n < num_nodes) {
        const auto d = static_cast<size_t>(trie.depth(n));
        const Level& in = s.levels[d - 1];
        Level& next = s.levels[d];
        const int c = grammar.byte_class(trie.byte(n));
        if (in.count == 1 && grammar.is_simple(in.one.top)) {  // one stack moving inside one rule: one lookup
            const int32_t t = grammar.next(in.one.top, c);
            if (t < 0) {
                if (in.may_pop != 0) out.dependent_roots.push_back(n);
                n = trie.skip(n);
                continue;
            }
            next.one = {in.one.below, t};
            next.count = 1;
            next.may_pop = in.may_pop | (grammar.completes(t) && can_end(grammar, s.arena, std::span(&next.one, 1)));
        } else {
            std::vector<Head>& heads = s.many[d];
            step_config(grammar, s.arena, in.count == 1 ? std::span(&in.one, 1) : std::span(s.many[d - 1]), c, heads);
            if (heads.empty()) {
                if (in.may_pop != 0) out.dependent_roots.push_back(n);
                n = trie.skip(n);
                continue;
            }
            for (const Head& head : heads) deepest = std::max(deepest, s.arena.depth(head.below));
            next.one = heads[0];
            next.count = static_cast<uint32_t>(heads.size());
            next.may_pop = in.may_pop | (can_end(grammar, s.arena, heads) ? 1u : 0u);
        }
        for (int32_t token : trie.tokens_at(n)) {
            bits[static_cast<size_t>(token) >> 6] |= uint64_t{1} << (token & 63);
            ++accepted;
        }
        ++n;
    }
    keep_accepted(s.bits, accepted, out);
    out.depth_needed = deepest + grammar.max_push_count();
    return out;
}

StateTokenSets::StateTokenSets(const CompiledGrammar& grammar, const TokenVocabulary& vocabulary, size_t budget_bytes)
    : grammar_(grammar),
      vocabulary_(vocabulary),
      budget_(budget_bytes),
      by_state_(static_cast<size_t>(grammar.num_states())) {}

std::shared_ptr<const StateTokens> StateTokenSets::get(int32_t state) {
    {
        std::lock_guard lock(mutex_);
        if (by_state_[static_cast<size_t>(state)]) return by_state_[static_cast<size_t>(state)];
        if (bytes_ >= budget_) return nullptr;
    }
    auto split = std::make_shared<const StateTokens>(
        split_vocabulary(grammar_, *vocabulary_.trie, state, vocabulary_.mask_bits));
    std::lock_guard lock(mutex_);
    std::shared_ptr<const StateTokens>& slot = by_state_[static_cast<size_t>(state)];
    if (!slot) {  // another thread may have split it meanwhile: keep the first
        slot = split;
        bytes_ += split->bytes();
        ++entries_;
    }
    return slot;
}

size_t StateTokenSets::bytes() const {
    std::lock_guard lock(mutex_);
    return bytes_;
}

size_t StateTokenSets::entries() const {
    std::lock_guard lock(mutex_);
    return entries_;
}

}  // namespace dsv4::structured
