#include "structured/state_token_sets.h"

#include <algorithm>

#include "structured/byte_set.h"
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
    StepMemo memo;     // of `arena`
    std::vector<Level> levels;
    std::vector<std::vector<Head>> many;
    std::vector<std::pair<int32_t, int32_t>> runs;  // accepted trie nodes as [begin, end) runs
};

SplitScratch& split_scratch() {
    thread_local SplitScratch s;
    return s;
}

// Keeps the tokens of the accepted runs of nodes as ids or as mask words, whichever is smaller.
void keep_accepted(const TokenTrie& trie, std::span<const std::pair<int32_t, int32_t>> runs, int64_t mask_bits,
                   StateTokens& out) {
    size_t count = 0;
    for (const auto& [begin, end] : runs) count += trie.tokens_in(begin, end).size();
    out.any_accepted = count > 0;
    const auto words = static_cast<size_t>((mask_bits + 63) / 64);
    if (count * sizeof(uint32_t) < words * sizeof(uint64_t)) {
        out.accepted_ids.reserve(count);
        for (const auto& [begin, end] : runs) {
            for (int32_t token : trie.tokens_in(begin, end)) out.accepted_ids.push_back(static_cast<uint32_t>(token));
        }
        return;
    }
    out.accepted_bits.assign(words, 0);
    for (const auto& [begin, end] : runs) {
        for (int32_t token : trie.tokens_in(begin, end))
            out.accepted_bits[static_cast<size_t>(token) >> 6] |= uint64_t{1} << (token & 63);
    }
}

// The split walk: a preorder walk as in TokenMasker, from the lone state. A subtree whose prefix no way inside the
// state consumes is dependent when a pop was possible before one of the prefix's bytes (Level::may_pop: some stack
// could finish every rule on it, and the real step would also pop into the frames below the base), otherwise
// rejected. The accepted nodes are recorded as runs between rejected subtrees: their tokens are contiguous.
class SplitWalk {
  public:
    SplitWalk(const CompiledGrammar& grammar, const TokenTrie& trie, SplitScratch& scratch)
        : grammar_(grammar), trie_(trie), s_(scratch) {}

    StateTokens run(int32_t state, int64_t mask_bits) {
        s_.arena.clear();
        s_.memo.clear();
        s_.runs.clear();
        const auto levels_needed = static_cast<size_t>(trie_.max_depth()) + 1;
        if (s_.levels.size() < levels_needed) s_.levels.resize(levels_needed);
        if (s_.many.size() < levels_needed) s_.many.resize(levels_needed);
        levels_ = s_.levels.data();
        const Head start{StackArena::kNone, state};
        levels_[0] = {start, 1, can_end(grammar_, s_.arena, std::span(&start, 1)) ? 1u : 0u};
        const std::span<const int32_t> first = trie_.first_nodes();
        const std::span<const uint8_t> first_bytes = trie_.first_bytes();
        ByteSet dead_first;  // classes the state rejects as a first byte (256 first bytes, far fewer classes)
        for (size_t i = 0; i < first.size(); ++i) {
            const int32_t end = i + 1 < first.size() ? first[i + 1] : trie_.num_nodes();
            const int c = grammar_.byte_class(first_bytes[i]);
            if (!dead_first.contains(static_cast<uint8_t>(c)) && step(1, c)) {
                walk(first[i] + 1, end);
            } else {
                dead_first.insert(static_cast<uint8_t>(c));
                reject(first[i], end, 1, first_bytes[i]);
            }
        }
        if (run_begin_ < trie_.num_nodes()) s_.runs.emplace_back(run_begin_, trie_.num_nodes());
        keep_accepted(trie_, s_.runs, mask_bits, out_);
        out_.depth_needed = deepest_ + grammar_.max_push_count();
        return std::move(out_);
    }

  private:
    // The nodes [begin, end) below an accepted node of depth 1.
    void walk(int32_t begin, int32_t end) {
        int32_t n = begin;
        while (n < end) {
            const auto d = static_cast<size_t>(trie_.depth(n));
            const uint8_t byte = trie_.byte(n);
            if (step(d, grammar_.byte_class(byte))) {
                ++n;
            } else {
                const int32_t skip = trie_.skip(n);
                reject(n, skip, d, byte);
                n = skip;
            }
        }
    }

    // Steps levels[d - 1] by byte class c into levels[d]; false when no stack survives.
    bool step(size_t d, int c) {
        const Level& in = levels_[d - 1];
        if (in.count != 1 || !grammar_.steps_by_lookup(in.one.top, in.one.below == StackArena::kNone))
            return step_general(d, c);
        const int32_t t = grammar_.next(in.one.top, c);  // one stack moving inside one rule: one lookup
        if (t < 0) return false;
        Level& next = levels_[d];
        next.one = {in.one.below, t};
        next.count = 1;
        next.may_pop = in.may_pop;
        if (next.may_pop == 0 && grammar_.completes(t))
            next.may_pop = can_end(grammar_, s_.arena, std::span(&next.one, 1)) ? 1 : 0;
        return true;
    }

    // The other steps (calls, pops, several stacks), out of line so the common one stays small.
    [[gnu::noinline]] bool step_general(size_t d, int c) {
        const Level& in = levels_[d - 1];
        std::vector<Head>& heads = s_.many[d];
        step_config(grammar_, s_.arena, s_.memo, in.count == 1 ? std::span(&in.one, 1) : std::span(s_.many[d - 1]), c,
                    heads);
        if (heads.empty()) return false;
        for (const Head& head : heads) deepest_ = std::max(deepest_, s_.arena.depth(head.below));
        Level& next = levels_[d];
        next.one = heads[0];
        next.count = static_cast<uint32_t>(heads.size());
        next.may_pop = in.may_pop != 0 || can_end(grammar_, s_.arena, heads) ? 1 : 0;
        return true;
    }

    // The subtree [node, end) of depth d whose prefix the state rejects: it ends the current run of accepted nodes.
    void reject(int32_t node, int32_t end, size_t d, uint8_t byte) {
        if (levels_[d - 1].may_pop != 0) out_.dependent_roots.push_back({node, end, static_cast<uint16_t>(d), byte});
        if (run_begin_ < node) s_.runs.emplace_back(run_begin_, node);
        run_begin_ = end;
    }

    const CompiledGrammar& grammar_;
    const TokenTrie& trie_;
    SplitScratch& s_;
    Level* levels_ = nullptr;
    StateTokens out_;
    uint32_t deepest_ = 0;
    int32_t run_begin_ = 0;
};

}  // namespace

StateTokens split_vocabulary(const CompiledGrammar& grammar, const TokenTrie& trie, int32_t state, int64_t mask_bits) {
    return SplitWalk(grammar, trie, split_scratch()).run(state, mask_bits);
}

void StateTokens::add_accepted(std::span<uint64_t> bits) const {
    if (!accepted_bits.empty()) {
        for (size_t w = 0; w < bits.size(); ++w) bits[w] |= accepted_bits[w];
        return;
    }
    for (uint32_t id : accepted_ids) bits[id >> 6] |= uint64_t{1} << (id & 63);
}

size_t StateTokens::bytes() const {
    return kEntryOverhead + accepted_ids.size() * sizeof(uint32_t) + accepted_bits.size() * sizeof(uint64_t) +
           dependent_roots.size() * sizeof(DependentSubtree);
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
