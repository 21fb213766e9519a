#include "structured/token_masker.h"

#include <algorithm>

#include "core/error.h"
#include "structured/byte_set.h"

namespace dsv4::structured {
namespace {

// Per-thread scratch of the trie walk: it allocates nothing once warm.
struct WalkScratch {
    StackArena arena;
    StepMemo memo;                          // of `arena`
    std::vector<std::vector<Head>> levels;  // levels[d]: the configuration after the first d bytes of the path
    std::vector<int32_t> path;              // path[d]: the trie node whose prefix levels[d] holds (d >= 1)
    std::vector<int32_t> ancestors;
    std::vector<Head> start;
    std::vector<Head> a, b;
    std::vector<int32_t> key;
    std::vector<std::shared_ptr<const StateTokens>> splits;
};

WalkScratch& scratch() {
    thread_local WalkScratch s;
    return s;
}

void set_bit(std::span<uint64_t> bits, int32_t id) {
    bits[static_cast<size_t>(id) >> 6] |= uint64_t{1} << (id & 63);
}

}  // namespace

TokenMasker::TokenMasker(std::shared_ptr<const CompiledGrammar> grammar,
                         std::shared_ptr<const TokenVocabulary> vocabulary, std::vector<int32_t> allowed_added_tokens,
                         size_t cache_bytes, size_t state_token_bytes)
    : grammar_(std::move(grammar)),
      vocabulary_(std::move(vocabulary)),
      allowed_added_tokens_(std::move(allowed_added_tokens)),
      cache_(cache_bytes),
      state_sets_(*grammar_, *vocabulary_, state_token_bytes) {
    for (int32_t id : allowed_added_tokens_) {
        DSV4_CHECK(id >= 0 && static_cast<size_t>(id) < vocabulary_->added_token_text.size() &&
                       !vocabulary_->added_token_text[static_cast<size_t>(id)].empty(),
                   "TokenMasker: token {} is not an added token of the vocabulary", id);
    }
}

std::optional<std::string_view> TokenMasker::token_bytes(int32_t id) const {
    if (id < 0 || static_cast<size_t>(id) >= vocabulary_->bytes.size()) return std::nullopt;
    const std::string& bytes = vocabulary_->bytes[static_cast<size_t>(id)];
    if (!bytes.empty()) return std::string_view(bytes);
    if (std::find(allowed_added_tokens_.begin(), allowed_added_tokens_.end(), id) != allowed_added_tokens_.end())
        return std::string_view(vocabulary_->added_token_text[static_cast<size_t>(id)]);
    return std::nullopt;
}

bool TokenMasker::is_end_token(int32_t id) const {
    return std::find(vocabulary_->end_tokens.begin(), vocabulary_->end_tokens.end(), id) !=
           vocabulary_->end_tokens.end();
}

MaskSummary TokenMasker::fill(const StackArena& arena, std::span<const Head> heads, std::span<uint64_t> bits,
                              bool* cache_hit) const {
    WalkScratch& s = scratch();
    serialize_heads(arena, heads, s.key);
    MaskSummary summary;
    if (cache_.lookup(s.key, bits, summary)) {
        if (cache_hit != nullptr) *cache_hit = true;
        return summary;
    }
    if (cache_hit != nullptr) *cache_hit = false;
    const std::vector<int32_t> key = s.key;  // compute() reuses the scratch
    summary = compute(arena, heads, bits);
    cache_.insert(key, bits, vocabulary_->mask_bits, summary);
    return summary;
}

MaskSummary TokenMasker::compute(const StackArena& arena, std::span<const Head> heads, std::span<uint64_t> bits) const {
    DSV4_CHECK(bits.size() == words(), "TokenMasker: mask has {} words, the vocabulary needs {}", bits.size(), words());
    WalkScratch& s = scratch();
    if (!split_heads(heads, arena, s.splits)) return compute_by_full_walk(arena, heads, bits);
    std::fill(bits.begin(), bits.end(), 0);
    s.arena.clear();
    s.memo.clear();
    copy_heads(arena, heads, s.arena, s.start);
    bool any = false;
    for (size_t i = 0; i < s.start.size(); ++i) {
        const StateTokens& split = *s.splits[i];
        split.add_accepted(bits);
        any = any || split.any_accepted;
        // Without frames below there is nothing to pop into: the dependent subtrees are rejected.
        if (s.start[i].below != StackArena::kNone)
            walk_dependent(s.start[i], split.dependent_roots, s.arena, bits, any);
    }
    return finish(s.start, s.arena, bits, any);
}

MaskSummary TokenMasker::compute_by_full_walk(const StackArena& arena, std::span<const Head> heads,
                                              std::span<uint64_t> bits) const {
    DSV4_CHECK(bits.size() == words(), "TokenMasker: mask has {} words, the vocabulary needs {}", bits.size(), words());
    std::fill(bits.begin(), bits.end(), 0);
    WalkScratch& s = scratch();
    s.arena.clear();
    s.memo.clear();
    copy_heads(arena, heads, s.arena, s.start);
    const TokenTrie& trie = *vocabulary_->trie;
    if (s.levels.size() < static_cast<size_t>(trie.max_depth()) + 1)
        s.levels.resize(static_cast<size_t>(trie.max_depth()) + 1);
    s.levels[0].assign(s.start.begin(), s.start.end());
    bool any = false;
    walk_range(0, trie.num_nodes(), s.arena, bits, any);
    return finish(s.start, s.arena, bits, any);
}

MaskSummary TokenMasker::finish(std::span<const Head> start, StackArena& arena, std::span<uint64_t> bits,
                                bool any) const {
    MaskSummary summary;
    summary.any_token = any;
    check_added_tokens(start, arena, bits, summary.any_token);
    summary.end_allowed = can_end(*grammar_, arena, start);
    if (summary.end_allowed) {
        for (int32_t eos : vocabulary_->end_tokens) set_bit(bits, eos);
    }
    return summary;
}

bool TokenMasker::split_heads(std::span<const Head> start, const StackArena& arena,
                              std::vector<std::shared_ptr<const StateTokens>>& splits) const {
    splits.clear();
    for (const Head& head : start) {
        std::shared_ptr<const StateTokens> split = state_sets_.get(head.top);
        if (!split || arena.depth(head.below) + split->depth_needed > kMaxStackDepth) return false;
        splits.push_back(std::move(split));
    }
    return true;
}

// Preorder walk of the trie nodes [begin, end), a run of whole subtrees whose roots have depth d: levels[d - 1] holds
// the configuration after their common prefix. A node whose configuration is empty is rejected together with its
// whole subtree.
void TokenMasker::walk_range(int32_t begin, int32_t end, StackArena& arena, std::span<uint64_t> bits, bool& any) const {
    const TokenTrie& trie = *vocabulary_->trie;
    const CompiledGrammar& g = *grammar_;
    WalkScratch& s = scratch();
    std::vector<std::vector<Head>>& levels = s.levels;
    int32_t n = begin;
    while (n < end) {
        const auto d = static_cast<size_t>(trie.depth(n));
        step_config(g, arena, s.memo, levels[d - 1], g.byte_class(trie.byte(n)), levels[d]);
        if (levels[d].empty()) {
            n = trie.skip(n);
            continue;
        }
        for (int32_t token : trie.tokens_at(n)) {
            set_bit(bits, token);
            any = true;
        }
        ++n;
    }
}

// Walks the dependent subtrees of one stack. They come in preorder, so consecutive roots share a prefix: the
// configurations along it (levels, path) are kept and only the bytes after it are stepped.
void TokenMasker::walk_dependent(Head head, std::span<const DependentSubtree> roots, StackArena& arena,
                                 std::span<uint64_t> bits, bool& any) const {
    const TokenTrie& trie = *vocabulary_->trie;
    const CompiledGrammar& g = *grammar_;
    WalkScratch& s = scratch();
    const auto levels_needed = static_cast<size_t>(trie.max_depth()) + 1;
    if (s.levels.size() < levels_needed) s.levels.resize(levels_needed);
    s.path.resize(levels_needed);
    s.levels[0].assign(1, head);
    size_t valid = 0;  // levels[0..valid] hold the configurations along path[1..valid]
    // Roots are often siblings (every byte after a closing quote, every first byte of a state that can end) and
    // many share a byte class: the classes the stack rejects right after the current parent are skipped.
    int32_t dead_parent = INT32_MIN;
    ByteSet dead_classes;
    for (const DependentSubtree& root : roots) {
        const size_t d = root.depth;
        const int32_t parent = trie.parent(root.node);
        const auto c = static_cast<uint8_t>(g.byte_class(root.byte));
        if (parent == dead_parent && dead_classes.contains(c)) continue;
        s.ancestors.resize(d);  // ancestors[k]: the node at depth k on the way to the root (k = 1..d-1)
        for (int32_t node = parent, k = static_cast<int32_t>(d) - 1; k >= 1; --k) {
            s.ancestors[static_cast<size_t>(k)] = node;
            node = trie.parent(node);
        }
        size_t k = 0;
        while (k < valid && k + 1 < d && s.path[k + 1] == s.ancestors[k + 1]) ++k;
        for (; k + 1 < d && !s.levels[k].empty(); ++k) {
            step_config(g, arena, s.memo, s.levels[k], g.byte_class(trie.byte(s.ancestors[k + 1])), s.levels[k + 1]);
            s.path[k + 1] = s.ancestors[k + 1];
        }
        valid = k;
        if (s.levels[k].empty()) continue;  // the stack rejects the prefix: the whole subtree is rejected
        step_config(g, arena, s.memo, s.levels[d - 1], c, s.levels[d]);
        if (s.levels[d].empty()) {
            if (parent != dead_parent) {
                dead_parent = parent;
                dead_classes = ByteSet{};
            }
            dead_classes.insert(c);
            continue;
        }
        for (int32_t token : trie.tokens_at(root.node)) {
            set_bit(bits, token);
            any = true;
        }
        walk_range(root.node + 1, root.end, arena, bits, any);
    }
}

void TokenMasker::check_added_tokens(std::span<const Head> start, StackArena& arena, std::span<uint64_t> bits,
                                     bool& any) const {
    WalkScratch& s = scratch();
    for (int32_t id : allowed_added_tokens_) {
        s.a.assign(start.begin(), start.end());
        for (char ch : vocabulary_->added_token_text[static_cast<size_t>(id)]) {
            step_heads(*grammar_, arena, s.a, static_cast<uint8_t>(ch), s.b);
            std::swap(s.a, s.b);
            if (s.a.empty()) break;
        }
        if (!s.a.empty()) {
            set_bit(bits, id);
            any = true;
        }
    }
}

}  // namespace dsv4::structured
