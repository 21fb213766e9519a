// TokenMasker: a compiled grammar bound to a vocabulary. For a matcher configuration it computes which tokens may
// come next: per stack, the tokens its top state decides alone (state_token_sets.h, split once per state), plus a
// depth-first walk of the trie subtrees that depend on the frames below, stepping the stack byte by byte and skipping
// every subtree whose prefix the grammar rejects; then the added tokens the grammar names and the end tokens where
// the grammar may end. Results are cached per configuration (mask_cache.h), so a configuration seen before costs a
// copy. Shared by every completion (and request) that uses the same grammar; thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "structured/compiled_grammar.h"
#include "structured/mask_cache.h"
#include "structured/stack_step.h"
#include "structured/state_token_sets.h"
#include "structured/token_trie.h"

namespace dsv4::structured {

inline constexpr size_t kDefaultMaskCacheBytes = size_t{32} << 20;
inline constexpr size_t kDefaultStateTokenBytes = size_t{16} << 20;

class TokenMasker {
  public:
    // allowed_added_tokens: ids of added tokens (e.g. the DSML marker) the grammar may produce, as their content.
    TokenMasker(std::shared_ptr<const CompiledGrammar> grammar, std::shared_ptr<const TokenVocabulary> vocabulary,
                std::vector<int32_t> allowed_added_tokens, size_t cache_bytes = kDefaultMaskCacheBytes,
                size_t state_token_bytes = kDefaultStateTokenBytes);

    // Writes the mask of the configuration (every word of bits; bits.size() == words()).
    MaskSummary fill(const StackArena& arena, std::span<const Head> heads, std::span<uint64_t> bits,
                     bool* cache_hit = nullptr) const;
    // The same without the mask cache (the reference the cached path is tested against).
    MaskSummary compute(const StackArena& arena, std::span<const Head> heads, std::span<uint64_t> bits) const;
    // The same by walking the whole trie from the configuration, without the per-state split (the reference the
    // split is tested against, and the way when a stack is too deep for it).
    MaskSummary compute_by_full_walk(const StackArena& arena, std::span<const Head> heads,
                                     std::span<uint64_t> bits) const;

    // The bytes token `id` adds under this grammar; nullopt when the grammar can never produce it (end tokens too).
    std::optional<std::string_view> token_bytes(int32_t id) const;
    bool is_end_token(int32_t id) const;

    const CompiledGrammar& grammar() const { return *grammar_; }
    const TokenVocabulary& vocabulary() const { return *vocabulary_; }
    size_t words() const { return static_cast<size_t>((vocabulary_->mask_bits + 63) / 64); }
    const MaskCache& cache() const { return cache_; }
    const StateTokenSets& state_token_sets() const { return state_sets_; }

  private:
    MaskSummary finish(std::span<const Head> start, StackArena& arena, std::span<uint64_t> bits, bool any) const;
    // Splits of every top state, or false when one is unavailable or a stack is too deep for its split.
    bool split_heads(std::span<const Head> start, const StackArena& arena,
                     std::vector<std::shared_ptr<const StateTokens>>& splits) const;
    void walk_range(int32_t begin, int32_t end, StackArena& arena, std::span<uint64_t> bits, bool& any) const;
    void walk_dependent(Head head, std::span<const DependentSubtree> roots, StackArena& arena, std::span<uint64_t> bits,
                        bool& any) const;
    void check_added_tokens(std::span<const Head> start, StackArena& arena, std::span<uint64_t> bits, bool& any) const;

    std::shared_ptr<const CompiledGrammar> grammar_;
    std::shared_ptr<const TokenVocabulary> vocabulary_;
    std::vector<int32_t> allowed_added_tokens_;
    mutable MaskCache cache_;
    mutable StateTokenSets state_sets_;
};

}  // namespace dsv4::structured
