// The BPE model of a byte-level tokenizer.json: vocabulary, merges by rank, and the merge loop.
// Pieces arrive as raw bytes; since the ByteLevel alphabet maps each byte to one vocabulary character, the
// initial symbols are the ids of the 256 single-byte tokens and every merge works on ids.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace dsv4::tokenizer {

// Token ids must be below this (16M): tables are indexed by id, so a corrupt id must not size them.
inline constexpr int64_t kMaxTokenId = int64_t{1} << 24;

// Open-addressing map from an id pair to (rank, merged id); read-only after construction.
class MergeTable {
  public:
    struct Merge {
        int32_t rank;
        int32_t merged_id;
    };
    explicit MergeTable(size_t expected_entries = 0);
    // A pair listed twice keeps its last entry, as HF's merge map does.
    void insert(int32_t left, int32_t right, Merge merge);
    const Merge* find(int32_t left, int32_t right) const;
    size_t size() const { return size_; }

  private:
    struct Slot {
        uint64_t key;
        Merge merge;
    };
    static constexpr uint64_t kEmpty = ~uint64_t{0};
    size_t slot_of(uint64_t key) const;
    std::vector<Slot> slots_;
    size_t mask_ = 0;
    size_t size_ = 0;
};

class BpeCache;

class BpeModel {
  public:
    // Parses the "model" object (type BPE). Throws dsv4::Error for unsupported options (dropout,
    // continuing_subword_prefix, end_of_word_suffix), malformed merges, merge parts missing from the vocabulary,
    // or a vocabulary lacking one of the 256 byte tokens.
    static BpeModel from_json(const nlohmann::json& model);

    BpeModel(BpeModel&&) noexcept;
    BpeModel& operator=(BpeModel&&) noexcept;
    ~BpeModel();

    // Appends the ids of one pre-token (raw bytes, non-empty). Thread-safe.
    void encode_piece(std::string_view bytes, std::vector<int32_t>& out) const;

    std::optional<int32_t> token_to_id(std::string_view token) const;
    // The vocabulary string of `id` (ByteLevel alphabet), or nullptr when the id has no vocabulary entry.
    const std::string* id_to_token(int32_t id) const;
    // One past the largest vocabulary id.
    int32_t id_limit() const { return static_cast<int32_t>(tokens_.size()); }
    size_t vocab_entries() const { return vocab_.size(); }
    size_t merge_count() const { return merges_.size(); }

  private:
    BpeModel();
    void merge_bytes(std::string_view bytes, std::vector<int32_t>& out) const;

    std::unordered_map<std::string, int32_t> vocab_;
    std::vector<std::string> tokens_;      // by id; empty string for ids without an entry
    std::vector<bool> has_token_;          // by id
    std::array<int32_t, 256> byte_ids_{};  // id of the single-byte token for each byte
    MergeTable merges_;
    bool ignore_merges_ = false;
    std::unique_ptr<BpeCache> cache_;
};

}  // namespace dsv4::tokenizer
