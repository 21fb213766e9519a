// GrammarMatcher: one completion's position in a grammar. It accepts tokens (or raw bytes), reports whether the
// output may end, computes the mask of the next token through its TokenMasker, and rolls back accepted tokens
// (speculative decoding rejects drafts). Not thread-safe; one per completion.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "structured/stack_step.h"
#include "structured/token_masker.h"

namespace dsv4::structured {

class GrammarMatcher {
  public:
    explicit GrammarMatcher(std::shared_ptr<const TokenMasker> masker);

    // The mask of the next token (bits.size() == masker().words()). Nothing is allowed after an end token.
    MaskSummary fill_mask(std::span<uint64_t> bits, bool* cache_hit = nullptr) const;
    // Advances by a token; false (and no change) when the grammar does not allow it here.
    bool accept_token(int32_t token);
    // Advances by raw bytes (all or nothing): for tests and for checking text against the grammar.
    bool accept_bytes(std::string_view bytes);
    // Undoes the last `count` accept_token / accept_bytes calls (at most num_accepted()).
    void rollback(int count);

    bool can_end() const;
    bool terminated() const { return terminated_; }  // an end token was accepted
    int num_accepted() const { return static_cast<int>(history_.size()); }
    size_t num_stacks() const { return heads_.size(); }
    const TokenMasker& masker() const { return *masker_; }

  private:
    bool advance(std::string_view bytes);

    struct Saved {
        std::vector<Head> heads;
        bool terminated = false;
    };

    std::shared_ptr<const TokenMasker> masker_;
    StackArena arena_;
    std::vector<Head> heads_;
    std::vector<Saved> history_;
    bool terminated_ = false;
};

// Whether the whole text is a sentence of the grammar (no vocabulary involved).
bool grammar_accepts(const CompiledGrammar& grammar, std::string_view text);

}  // namespace dsv4::structured
