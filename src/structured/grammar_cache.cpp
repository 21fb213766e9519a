#include "structured/grammar_cache.h"

#include <chrono>

#include "structured/compiled_grammar.h"
#include "tokenizer/chat_tokens.h"

namespace dsv4::structured {

GrammarCache::GrammarCache(std::shared_ptr<const TokenVocabulary> vocabulary, size_t capacity,
                           std::shared_ptr<MaskObserver> observer)
    : vocabulary_(std::move(vocabulary)), capacity_(std::max<size_t>(capacity, 1)), observer_(std::move(observer)) {}

std::shared_ptr<const TokenMasker> GrammarCache::lookup(const std::string& key) {
    std::lock_guard lock(mutex_);
    auto it = entries_.find(key);
    if (it == entries_.end()) return nullptr;
    lru_.splice(lru_.begin(), lru_, it->second.second);
    return it->second.first;
}

void GrammarCache::insert(const std::string& key, std::shared_ptr<const TokenMasker> masker) {
    std::lock_guard lock(mutex_);
    if (entries_.contains(key)) return;
    while (entries_.size() >= capacity_ && !lru_.empty()) {
        entries_.erase(lru_.back());
        lru_.pop_back();
    }
    lru_.push_front(key);
    entries_.emplace(key, std::make_pair(std::move(masker), lru_.begin()));
}

std::shared_ptr<const TokenMasker> GrammarCache::compile(const GrammarSpec& spec) const {
    const Grammar grammar = build_grammar(spec);
    auto compiled = std::make_shared<const CompiledGrammar>(grammar);
    std::vector<int32_t> added;
    if (spec.kind == GrammarKind::kToolCalls) {
        // The DSML marker is one added token in DeepSeek's vocabulary: let the grammar produce it as that token.
        const int32_t dsml = vocabulary_->find_added_token(chat_tokens::kDsml);
        if (dsml >= 0) added.push_back(dsml);
    }
    return std::make_shared<const TokenMasker>(std::move(compiled), vocabulary_, std::move(added));
}

std::shared_ptr<const TokenMasker> GrammarCache::masker(const GrammarSpec& spec) {
    bool hit = false;
    return find_or_compile(spec, hit);
}

std::shared_ptr<const TokenMasker> GrammarCache::find_or_compile(const GrammarSpec& spec, bool& hit) {
    const std::string key = spec.key();
    if (auto found = lookup(key)) {
        hits_.fetch_add(1);
        hit = true;
        return found;
    }
    try {
        auto masker = compile(spec);
        compiled_.fetch_add(1);
        insert(key, masker);
        return masker;
    } catch (const GrammarError&) {
        errors_.fetch_add(1);
        throw;
    }
}

GrammarCache::Result GrammarCache::get(const GrammarSpec& spec, int32_t start_after_token) {
    const auto begin = std::chrono::steady_clock::now();
    Result result;
    std::shared_ptr<const TokenMasker> m = find_or_compile(spec, result.cache_hit);
    if (!result.cache_hit) {
        result.compile_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
    }
    result.constraint = std::make_shared<GrammarConstraint>(std::move(m), start_after_token, observer_);
    return result;
}

GrammarCacheStats GrammarCache::stats() const {
    GrammarCacheStats s;
    s.compiled = compiled_.load();
    s.hits = hits_.load();
    s.errors = errors_.load();
    std::lock_guard lock(mutex_);
    s.entries = static_cast<int64_t>(entries_.size());
    return s;
}

}  // namespace dsv4::structured
