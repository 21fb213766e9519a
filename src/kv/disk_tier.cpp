#include "kv/disk_tier.h"

#include <xxhash.h>

#include <array>
#include <cstring>
#include <fstream>
#include <system_error>

#include "core/error.h"

namespace dsv4 {
namespace {

constexpr std::array<char, 8> kMagic = {'D', 'S', 'V', '4', 'K', 'V', 'T', '1'};
constexpr uint32_t kVersion = 1;
constexpr const char* kExtension = ".dsv4kv";

// The file header: magic, version, kind, key (low, high), layout fingerprint, payload bytes, payload checksum;
// little-endian fields at fixed offsets (kHeaderBytes = 56).
struct Header {
    uint32_t kind = 0;
    BlockHash key;
    uint64_t fingerprint = 0;
    uint64_t payload_bytes = 0;
    uint64_t checksum = 0;
};

template <typename T>
void put(std::byte* at, T value) {
    std::memcpy(at, &value, sizeof(T));
}
template <typename T>
T get(const std::byte* at) {
    T value;
    std::memcpy(&value, at, sizeof(T));
    return value;
}

std::array<std::byte, DiskKvStore::kHeaderBytes> encode(const Header& h) {
    std::array<std::byte, DiskKvStore::kHeaderBytes> out{};
    std::memcpy(out.data(), kMagic.data(), kMagic.size());
    put(out.data() + 8, kVersion);
    put(out.data() + 12, h.kind);
    put(out.data() + 16, h.key.low);
    put(out.data() + 24, h.key.high);
    put(out.data() + 32, h.fingerprint);
    put(out.data() + 40, h.payload_bytes);
    put(out.data() + 48, h.checksum);
    return out;
}

bool decode(const std::array<std::byte, DiskKvStore::kHeaderBytes>& in, Header& h) {
    if (std::memcmp(in.data(), kMagic.data(), kMagic.size()) != 0) return false;
    if (get<uint32_t>(in.data() + 8) != kVersion) return false;
    h.kind = get<uint32_t>(in.data() + 12);
    h.key.low = get<uint64_t>(in.data() + 16);
    h.key.high = get<uint64_t>(in.data() + 24);
    h.fingerprint = get<uint64_t>(in.data() + 32);
    h.payload_bytes = get<uint64_t>(in.data() + 40);
    h.checksum = get<uint64_t>(in.data() + 48);
    return true;
}

uint64_t checksum(std::span<const std::byte> payload) {
    return XXH3_64bits(payload.data(), payload.size());
}

}  // namespace

DiskKvStore::DiskKvStore(std::filesystem::path dir, int64_t capacity_bytes, uint64_t fingerprint)
    : dir_(std::move(dir)), capacity_bytes_(capacity_bytes), fingerprint_(fingerprint) {
    DSV4_CHECK(capacity_bytes > 0, "--disk-kv-cache-gib must be positive");
    std::error_code ec;
    std::filesystem::create_directories(dir_, ec);
    DSV4_CHECK(!ec && std::filesystem::is_directory(dir_), "--disk-kv-cache '{}' is not a directory we can create: {}",
               dir_.string(), ec.message());
    // Files of an earlier run: their index is gone, so they could only count against the cap.
    for (const auto& entry : std::filesystem::directory_iterator(dir_, ec)) {
        const std::string name = entry.path().filename().string();
        if (name.ends_with(kExtension) || name.ends_with(std::string(kExtension) + ".tmp")) {
            std::filesystem::remove(entry.path(), ec);
        }
    }
}

std::filesystem::path DiskKvStore::path_of(KvEntryKind kind, const BlockHash& key) const {
    return dir_ / fmt::format("{}-{:016x}{:016x}{}", kind == KvEntryKind::kBlock ? "block" : "snapshot", key.high,
                              key.low, kExtension);
}

bool DiskKvStore::contains(KvEntryKind kind, const BlockHash& key) const {
    return entries_.contains(Key{kind, key});
}

void DiskKvStore::drop(const Key& key, bool count_eviction) {
    auto it = entries_.find(key);
    if (it == entries_.end()) return;
    std::error_code ec;
    std::filesystem::remove(path_of(key.kind, key.hash), ec);
    used_bytes_ -= it->second.file_bytes;
    lru_.erase(it->second.lru);
    entries_.erase(it);
    if (count_eviction) ++stats_.evicted;
}

void DiskKvStore::erase(KvEntryKind kind, const BlockHash& key) {
    drop(Key{kind, key}, false);
}

void DiskKvStore::write(KvEntryKind kind, const BlockHash& key, std::span<const std::byte> payload) {
    const Key k{kind, key};
    drop(k, false);
    const auto file_bytes = static_cast<int64_t>(kHeaderBytes + payload.size());
    if (file_bytes > capacity_bytes_) return;
    while (used_bytes_ + file_bytes > capacity_bytes_ && !lru_.empty()) drop(lru_.front(), true);
    const std::filesystem::path path = path_of(kind, key);
    const std::filesystem::path tmp = path.string() + ".tmp";
    const Header h{static_cast<uint32_t>(kind), key, fingerprint_, payload.size(), checksum(payload)};
    const auto header = encode(h);
    {
        std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
        out.write(reinterpret_cast<const char*>(header.data()), static_cast<std::streamsize>(header.size()));
        out.write(reinterpret_cast<const char*>(payload.data()), static_cast<std::streamsize>(payload.size()));
        out.flush();
        if (!out) {
            std::error_code ec;
            std::filesystem::remove(tmp, ec);
            ++stats_.write_failures;
            return;
        }
    }
    std::error_code ec;
    std::filesystem::rename(tmp, path, ec);  // a reader never sees a half-written file under the entry's name
    if (ec) {
        std::filesystem::remove(tmp, ec);
        ++stats_.write_failures;
        return;
    }
    lru_.push_back(k);
    entries_.emplace(k, Entry{file_bytes, std::prev(lru_.end())});
    used_bytes_ += file_bytes;
    ++stats_.writes;
    stats_.bytes_written += file_bytes;
}

bool DiskKvStore::read(KvEntryKind kind, const BlockHash& key, std::span<std::byte> out) {
    const Key k{kind, key};
    auto it = entries_.find(k);
    if (it == entries_.end()) return false;
    const std::filesystem::path path = path_of(kind, key);
    std::error_code ec;
    const auto size = std::filesystem::file_size(path, ec);
    std::array<std::byte, kHeaderBytes> raw{};
    Header h;
    bool good = !ec && size == kHeaderBytes + out.size();
    if (good) {
        std::ifstream in(path, std::ios::binary);
        in.read(reinterpret_cast<char*>(raw.data()), static_cast<std::streamsize>(raw.size()));
        in.read(reinterpret_cast<char*>(out.data()), static_cast<std::streamsize>(out.size()));
        good = static_cast<bool>(in) && decode(raw, h) && h.kind == static_cast<uint32_t>(kind) && h.key == key &&
               h.fingerprint == fingerprint_ && h.payload_bytes == out.size() && h.checksum == checksum(out);
    }
    if (!good) {
        drop(k, false);
        ++stats_.corrupt;
        return false;
    }
    lru_.splice(lru_.end(), lru_, it->second.lru);  // most recently used
    ++stats_.reads;
    stats_.bytes_read += static_cast<int64_t>(size);
    return true;
}

}  // namespace dsv4
