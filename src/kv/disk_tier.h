// DiskKvStore: the prefix cache's disk tier, below the host pool (kv_tiers.h). One file per entry (a block's state,
// or a boundary snapshot's, in the byte layout every backend shares: backend/state_store.h), named by its kind and
// prefix key, with a header carrying the key, the layout fingerprint, the payload size and an XXH3-64 checksum of the
// payload. A read checks all of them, so a truncated, corrupted or foreign file is detected: it is removed and the
// caller recomputes the prefix. The tier is a cache: a full disk, a failed write or a bad file is never an error
// for a request, only a miss. Least recently used entries are removed to stay within the size cap. The index lives
// in memory: files of an earlier run are removed when the store opens.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <list>
#include <span>
#include <unordered_map>

#include "kv/block_hash.h"

namespace dsv4 {

enum class KvEntryKind : uint8_t { kBlock, kSnapshot };

struct DiskTierStats {
    int64_t writes = 0;
    int64_t reads = 0;
    int64_t bytes_written = 0;
    int64_t bytes_read = 0;
    int64_t corrupt = 0;         // reads that found a bad file (removed, recomputed)
    int64_t write_failures = 0;  // writes that could not complete (dropped)
    int64_t evicted = 0;         // entries removed for the size cap
};

class DiskKvStore {
  public:
    // Creates `dir` when needed; throws dsv4::Error when it cannot (a configuration error, reported at startup).
    DiskKvStore(std::filesystem::path dir, int64_t capacity_bytes, uint64_t fingerprint);

    bool contains(KvEntryKind kind, const BlockHash& key) const;
    // Stores an entry (replacing one of the same key), removing least recently used files to stay within the cap.
    void write(KvEntryKind kind, const BlockHash& key, std::span<const std::byte> payload);
    // Reads an entry of exactly out.size() bytes. false when it is missing or its file is bad (removed, counted).
    bool read(KvEntryKind kind, const BlockHash& key, std::span<std::byte> out);
    void erase(KvEntryKind kind, const BlockHash& key);

    int64_t used_bytes() const { return used_bytes_; }
    int64_t capacity_bytes() const { return capacity_bytes_; }
    const DiskTierStats& stats() const { return stats_; }
    std::filesystem::path path_of(KvEntryKind kind, const BlockHash& key) const;

    static constexpr size_t kHeaderBytes = 56;

  private:
    struct Key {
        KvEntryKind kind;
        BlockHash hash;
        bool operator==(const Key&) const = default;
    };
    struct KeyHasher {
        size_t operator()(const Key& k) const { return BlockHashHasher{}(k.hash) ^ static_cast<size_t>(k.kind); }
    };
    struct Entry {
        int64_t file_bytes = 0;
        std::list<Key>::iterator lru;  // position in lru_ (front = evicted first)
    };
    void drop(const Key& key, bool count_eviction);

    std::filesystem::path dir_;
    int64_t capacity_bytes_;
    uint64_t fingerprint_;
    int64_t used_bytes_ = 0;
    std::list<Key> lru_;
    std::unordered_map<Key, Entry, KeyHasher> entries_;
    DiskTierStats stats_;
};

}  // namespace dsv4
