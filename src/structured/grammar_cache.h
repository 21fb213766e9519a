// GrammarCache: compiled grammars by spec (GrammarSpec::key()), least recently used evicted first. A hit skips the
// compile and keeps the grammar's mask cache warm, so a repeated schema costs neither the compile nor the first
// masks again. Thread-safe (HTTP workers compile concurrently); two threads may compile the same spec at once,
// and one result is kept.
#pragma once

#include <atomic>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "structured/grammar_constraint.h"
#include "structured/grammar_spec.h"
#include "structured/token_masker.h"

namespace dsv4::structured {

struct GrammarCacheStats {
    int64_t compiled = 0;  // grammars compiled (misses that compiled successfully)
    int64_t hits = 0;      // requests served from the cache
    int64_t errors = 0;    // specs refused (GrammarError)
    int64_t entries = 0;
};

class GrammarCache {
  public:
    GrammarCache(std::shared_ptr<const TokenVocabulary> vocabulary, size_t capacity = 64,
                 std::shared_ptr<MaskObserver> observer = nullptr);

    struct Result {
        std::shared_ptr<const TokenConstraint> constraint;
        bool cache_hit = false;
        double compile_seconds = 0.0;  // 0 on a hit
    };
    // Throws GrammarError when the spec cannot be compiled.
    Result get(const GrammarSpec& spec, int32_t start_after_token = -1);
    // The compiled grammar itself (tests, benchmarks).
    std::shared_ptr<const TokenMasker> masker(const GrammarSpec& spec);

    GrammarCacheStats stats() const;
    const TokenVocabulary& vocabulary() const { return *vocabulary_; }

  private:
    std::shared_ptr<const TokenMasker> find_or_compile(const GrammarSpec& spec, bool& hit);
    std::shared_ptr<const TokenMasker> lookup(const std::string& key);
    std::shared_ptr<const TokenMasker> compile(const GrammarSpec& spec) const;
    void insert(const std::string& key, std::shared_ptr<const TokenMasker> masker);

    std::shared_ptr<const TokenVocabulary> vocabulary_;
    size_t capacity_;
    std::shared_ptr<MaskObserver> observer_;
    mutable std::mutex mutex_;
    std::list<std::string> lru_;  // most recent first
    std::unordered_map<std::string, std::pair<std::shared_ptr<const TokenMasker>, std::list<std::string>::iterator>>
        entries_;
    std::atomic<int64_t> compiled_{0};
    std::atomic<int64_t> hits_{0};
    std::atomic<int64_t> errors_{0};
};

}  // namespace dsv4::structured
