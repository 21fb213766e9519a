#include "structured/grammar_constraint.h"

#include <algorithm>
#include <chrono>
#include <vector>

#include "structured/grammar_matcher.h"

namespace dsv4::structured {
namespace {

class GrammarConstraintState final : public TokenConstraintState {
  public:
    GrammarConstraintState(std::shared_ptr<const TokenMasker> masker, int32_t start_after_token,
                           std::shared_ptr<MaskObserver> observer)
        : matcher_(masker),
          masker_(std::move(masker)),
          start_after_token_(start_after_token),
          active_(start_after_token < 0),
          observer_(std::move(observer)) {}

    TokenMaskSummary fill_allowed(std::span<uint64_t> allowed) override {
        if (!active_) return free_text_mask(allowed);
        const auto begin = std::chrono::steady_clock::now();
        bool hit = false;
        const MaskSummary summary = matcher_.fill_mask(allowed, &hit);
        if (observer_) {
            observer_->mask_computed(std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count(),
                                     hit);
        }
        return {summary.any_token, summary.end_allowed};
    }

    bool accept(int32_t token) override {
        if (!active_) {
            if (masker_->is_end_token(token)) return false;
            if (token < 0 || token >= masker_->vocabulary().mask_bits) return false;
            active_ = token == start_after_token_;
            history_.push_back(active_ ? Step::kActivated : Step::kFree);
            return true;
        }
        if (!matcher_.accept_token(token)) return false;
        history_.push_back(Step::kGrammar);
        return true;
    }

    void rollback(int count) override {
        DSV4_CHECK(count >= 0 && static_cast<size_t>(count) <= history_.size(),
                   "constraint: cannot roll back {} of {} tokens", count, history_.size());
        for (int i = 0; i < count; ++i) {
            const Step step = history_.back();
            history_.pop_back();
            if (step == Step::kGrammar) matcher_.rollback(1);
            if (step == Step::kActivated) active_ = false;
        }
    }

  private:
    enum class Step : uint8_t { kFree, kActivated, kGrammar };

    // Before start_after_token: anything but the end tokens.
    TokenMaskSummary free_text_mask(std::span<uint64_t> allowed) const {
        const int64_t bits = masker_->vocabulary().mask_bits;
        std::fill(allowed.begin(), allowed.end(), 0);
        for (int64_t i = 0; i < bits / 64; ++i) allowed[static_cast<size_t>(i)] = ~uint64_t{0};
        if (bits % 64 != 0) allowed[static_cast<size_t>(bits / 64)] = (uint64_t{1} << (bits % 64)) - 1;
        for (int32_t eos : masker_->vocabulary().end_tokens) {
            allowed[static_cast<size_t>(eos) >> 6] &= ~(uint64_t{1} << (eos & 63));
        }
        return {true, false};
    }

    GrammarMatcher matcher_;
    std::shared_ptr<const TokenMasker> masker_;
    int32_t start_after_token_;
    bool active_;
    std::shared_ptr<MaskObserver> observer_;
    std::vector<Step> history_;
};

}  // namespace

GrammarConstraint::GrammarConstraint(std::shared_ptr<const TokenMasker> masker, int32_t start_after_token,
                                     std::shared_ptr<MaskObserver> observer)
    : masker_(std::move(masker)), start_after_token_(start_after_token), observer_(std::move(observer)) {}

std::unique_ptr<TokenConstraintState> GrammarConstraint::start() const {
    return std::make_unique<GrammarConstraintState>(masker_, start_after_token_, observer_);
}

}  // namespace dsv4::structured
