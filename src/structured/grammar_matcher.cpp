#include "structured/grammar_matcher.h"

#include <algorithm>

#include "core/error.h"

namespace dsv4::structured {
namespace {

constexpr size_t kMaxStacks = 1024;  // configurations of an ambiguous grammar; more is an error, not a slowdown

bool step_text(const CompiledGrammar& grammar, StackArena& arena, std::vector<Head>& heads, std::string_view bytes) {
    std::vector<Head> next;
    for (char ch : bytes) {
        step_heads(grammar, arena, heads, static_cast<uint8_t>(ch), next);
        if (next.empty()) return false;
        if (next.size() > kMaxStacks) fail("structured output: the grammar is too ambiguous ({} parses)", next.size());
        heads.swap(next);
    }
    return true;
}

}  // namespace

GrammarMatcher::GrammarMatcher(std::shared_ptr<const TokenMasker> masker) : masker_(std::move(masker)) {
    heads_.push_back({StackArena::kNone, masker_->grammar().start_state()});
}

MaskSummary GrammarMatcher::fill_mask(std::span<uint64_t> bits, bool* cache_hit) const {
    if (terminated_) {
        std::fill(bits.begin(), bits.end(), 0);
        if (cache_hit != nullptr) *cache_hit = true;
        return {};
    }
    return masker_->fill(arena_, heads_, bits, cache_hit);
}

bool GrammarMatcher::accept_token(int32_t token) {
    if (terminated_) return false;
    if (masker_->is_end_token(token)) {
        if (!can_end()) return false;
        history_.push_back({heads_, terminated_});
        terminated_ = true;
        return true;
    }
    const std::optional<std::string_view> bytes = masker_->token_bytes(token);
    if (!bytes) return false;
    return advance(*bytes);
}

bool GrammarMatcher::accept_bytes(std::string_view bytes) {
    if (terminated_) return false;
    return advance(bytes);
}

bool GrammarMatcher::advance(std::string_view bytes) {
    std::vector<Head> heads = heads_;
    if (!step_text(masker_->grammar(), arena_, heads, bytes)) return false;
    history_.push_back({std::move(heads_), terminated_});
    heads_ = std::move(heads);
    return true;
}

void GrammarMatcher::rollback(int count) {
    DSV4_CHECK(count >= 0 && count <= num_accepted(), "GrammarMatcher: cannot roll back {} of {} tokens", count,
               num_accepted());
    for (int i = 0; i < count; ++i) {
        heads_ = std::move(history_.back().heads);
        terminated_ = history_.back().terminated;
        history_.pop_back();
    }
}

bool GrammarMatcher::can_end() const {
    return !terminated_ && structured::can_end(masker_->grammar(), arena_, heads_);
}

bool grammar_accepts(const CompiledGrammar& grammar, std::string_view text) {
    StackArena arena;
    std::vector<Head> heads{{StackArena::kNone, grammar.start_state()}};
    if (!step_text(grammar, arena, heads, text)) return false;
    return can_end(grammar, arena, heads);
}

}  // namespace dsv4::structured
