// The engine-facing side (include/dsv4/token_constraint.h) of a compiled grammar: GrammarConstraint makes one
// GrammarMatcher per completion. start_after_token (e.g. </think> in thinking mode) leaves the output free until
// that token was generated and only then applies the grammar; the end tokens are refused before it.
#pragma once

#include <memory>

#include "dsv4/token_constraint.h"
#include "structured/token_masker.h"

namespace dsv4::structured {

// Told about every mask computed (the server's metrics). Called on engine threads: must be thread-safe.
class MaskObserver {
  public:
    virtual ~MaskObserver() = default;
    virtual void mask_computed(double seconds, bool cache_hit) = 0;
};

class GrammarConstraint final : public TokenConstraint {
  public:
    GrammarConstraint(std::shared_ptr<const TokenMasker> masker, int32_t start_after_token = -1,
                      std::shared_ptr<MaskObserver> observer = nullptr);

    std::unique_ptr<TokenConstraintState> start() const override;
    int64_t vocab_size() const override { return masker_->vocabulary().mask_bits; }

  private:
    std::shared_ptr<const TokenMasker> masker_;
    int32_t start_after_token_;
    std::shared_ptr<MaskObserver> observer_;
};

}  // namespace dsv4::structured
