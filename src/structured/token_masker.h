// TokenMasker: a compiled grammar bound to a vocabulary. For a matcher configuration it computes which tokens may
// come next: a depth-first walk of the vocabulary trie that steps the configuration byte by byte and skips every
// subtree whose prefix the grammar rejects, plus the added tokens the grammar names and the end tokens where the
// grammar may end. Results are cached per configuration (mask_cache.h), so a state seen before costs a copy.
// Shared by every completion (and request) that uses the same grammar; thread-safe.
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
#include "structured/token_trie.h"

namespace dsv4::structured {

inline constexpr size_t kDefaultMaskCacheBytes = size_t{32} << 20;

class TokenMasker {
  public:
    // allowed_added_tokens: ids of added tokens (e.g. the DSML marker) the grammar may produce, as their content.
    TokenMasker(std::shared_ptr<const CompiledGrammar> grammar, std::shared_ptr<const TokenVocabulary> vocabulary,
                std::vector<int32_t> allowed_added_tokens, size_t cache_bytes = kDefaultMaskCacheBytes);

    // Writes the mask of the configuration (every word of bits; bits.size() == words()).
    MaskSummary fill(const StackArena& arena, std::span<const Head> heads, std::span<uint64_t> bits,
                     bool* cache_hit = nullptr) const;
    // The same without the cache (the reference the cached path is tested against).
    MaskSummary compute(const StackArena& arena, std::span<const Head> heads, std::span<uint64_t> bits) const;

    // The bytes token `id` adds under this grammar; nullopt when the grammar can never produce it (end tokens too).
    std::optional<std::string_view> token_bytes(int32_t id) const;
    bool is_end_token(int32_t id) const;

    const CompiledGrammar& grammar() const { return *grammar_; }
    const TokenVocabulary& vocabulary() const { return *vocabulary_; }
    size_t words() const { return static_cast<size_t>((vocabulary_->mask_bits + 63) / 64); }
    const MaskCache& cache() const { return cache_; }

  private:
    void walk_trie(std::span<const Head> start, StackArena& arena, std::span<uint64_t> bits, bool& any) const;
    void check_added_tokens(std::span<const Head> start, StackArena& arena, std::span<uint64_t> bits, bool& any) const;

    std::shared_ptr<const CompiledGrammar> grammar_;
    std::shared_ptr<const TokenVocabulary> vocabulary_;
    std::vector<int32_t> allowed_added_tokens_;
    mutable MaskCache cache_;
};

}  // namespace dsv4::structured
