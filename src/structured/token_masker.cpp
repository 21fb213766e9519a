#include "structured/token_masker.h"

#include <algorithm>

#include "core/error.h"

namespace dsv4::structured {
namespace {

// Per-thread scratch of the trie walk: it allocates nothing once warm.
struct WalkScratch {
    StackArena arena;
    std::vector<std::vector<Head>> levels;
    std::vector<Head> start;
    std::vector<Head> a, b;
    std::vector<int32_t> key;
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
                         size_t cache_bytes)
    : grammar_(std::move(grammar)),
      vocabulary_(std::move(vocabulary)),
      allowed_added_tokens_(std::move(allowed_added_tokens)),
      cache_(cache_bytes) {
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
    std::fill(bits.begin(), bits.end(), 0);
    WalkScratch& s = scratch();
    s.arena.clear();
    copy_heads(arena, heads, s.arena, s.start);
    MaskSummary summary;
    walk_trie(s.start, s.arena, bits, summary.any_token);
    check_added_tokens(s.start, s.arena, bits, summary.any_token);
    summary.end_allowed = can_end(*grammar_, s.arena, s.start);
    if (summary.end_allowed) {
        for (int32_t eos : vocabulary_->end_tokens) set_bit(bits, eos);
    }
    return summary;
}

// Preorder walk: levels[d] holds the configuration after the first d bytes of the current node's path. A node whose
// configuration is empty is rejected together with its whole subtree.
void TokenMasker::walk_trie(std::span<const Head> start, StackArena& arena, std::span<uint64_t> bits, bool& any) const {
    const TokenTrie& trie = *vocabulary_->trie;
    const CompiledGrammar& g = *grammar_;
    std::vector<std::vector<Head>>& levels = scratch().levels;
    if (levels.size() < static_cast<size_t>(trie.max_depth()) + 1)
        levels.resize(static_cast<size_t>(trie.max_depth()) + 1);
    levels[0].assign(start.begin(), start.end());
    const int32_t num_nodes = trie.num_nodes();
    int32_t n = 0;
    while (n < num_nodes) {
        const auto d = static_cast<size_t>(trie.depth(n));
        const std::vector<Head>& in = levels[d - 1];
        std::vector<Head>& out = levels[d];
        out.clear();
        const int c = g.byte_class(trie.byte(n));
        if (in.size() == 1 && g.is_simple(in[0].top)) {  // the common case: one stack moving inside one rule
            const int32_t t = g.next(in[0].top, c);
            if (t >= 0) out.push_back({in[0].below, t});
        } else {
            for (const Head& head : in) step_head(g, arena, head, c, out);
        }
        if (out.empty()) {
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
