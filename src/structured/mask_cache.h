// MaskCache: token masks already computed for a grammar, keyed by the matcher configuration (serialized stacks),
// least recently used evicted first under a byte budget. Masks are stored as the allowed ids or the rejected ids
// when that list is short (at most a quarter of the bitset), else as the bitset: most grammar states allow a few
// hundred tokens of 129K; string interiors reject a few thousand, which is cheaper kept as words. Thread-safe: the
// engine computes masks for many sequences at once.
#pragma once

#include <cstdint>
#include <list>
#include <mutex>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

namespace dsv4::structured {

struct MaskSummary {
    bool any_token = false;    // some token other than an end token is allowed
    bool end_allowed = false;  // the end tokens are allowed (the grammar may end here)
};

class MaskCache {
  public:
    explicit MaskCache(size_t budget_bytes) : budget_(budget_bytes) {}

    // Copies the cached mask into `bits` (every word written) and returns true, or returns false on a miss.
    bool lookup(std::span<const int32_t> key, std::span<uint64_t> bits, MaskSummary& summary);
    void insert(std::span<const int32_t> key, std::span<const uint64_t> bits, int64_t num_bits, MaskSummary summary);

    size_t bytes() const;
    size_t entries() const;

  private:
    enum class Form : uint8_t { kAllowed, kRejected, kBits };
    struct Entry {
        Form form = Form::kBits;
        std::vector<uint32_t> ids;    // kAllowed / kRejected
        std::vector<uint64_t> words;  // kBits
        MaskSummary summary;
        int64_t num_bits = 0;
        size_t bytes = 0;
        std::list<std::string>::iterator lru;
    };

    static std::string make_key(std::span<const int32_t> key);
    void evict_to(size_t budget);

    mutable std::mutex mutex_;
    size_t budget_;
    size_t bytes_ = 0;
    std::unordered_map<std::string, Entry> entries_;
    std::list<std::string> lru_;  // most recent first
};

}  // namespace dsv4::structured
