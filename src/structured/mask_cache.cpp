#include "structured/mask_cache.h"

#include <algorithm>
#include <bit>
#include <cstring>

namespace dsv4::structured {
namespace {

constexpr size_t kEntryOverhead = 128;  // map node, list node, key: a rough per-entry cost for the budget

void set_bit(std::span<uint64_t> bits, uint32_t id) {
    bits[id >> 6] |= uint64_t{1} << (id & 63);
}

// Bits [0, num_bits) set, the rest of the words zero.
void fill_ones(std::span<uint64_t> bits, int64_t num_bits) {
    const auto full = static_cast<size_t>(num_bits / 64);
    std::fill(bits.begin(), bits.begin() + static_cast<std::ptrdiff_t>(full), ~uint64_t{0});
    std::fill(bits.begin() + static_cast<std::ptrdiff_t>(full), bits.end(), 0);
    if (num_bits % 64 != 0) bits[full] = (uint64_t{1} << (num_bits % 64)) - 1;
}

// Lists the ids of the set bits (or, with `cleared`, of the clear ones) below num_bits into out and returns false as
// soon as there would be more than `limit`. Word by word, skipping blocks of words with none, into a buffer sized
// once: a bit-by-bit scan of a 129K-id mask alone cost ~100 us, more than most trie walks.
bool list_ids(std::span<const uint64_t> bits, int64_t num_bits, bool cleared, size_t limit,
              std::vector<uint32_t>& out) {
    thread_local std::vector<uint32_t> buffer;
    if (buffer.size() < limit) buffer.resize(limit);
    uint32_t* ids = buffer.data();
    size_t count = 0;
    const uint64_t flip = cleared ? ~uint64_t{0} : 0;
    const auto words = std::min(bits.size(), static_cast<size_t>((num_bits + 63) / 64));
    constexpr size_t kBlock = 8;  // most masks are nearly all ones or all zeros
    for (size_t block = 0; block < words; block += kBlock) {
        const size_t end = std::min(words, block + kBlock);
        uint64_t any = 0;
        for (size_t w = block; w < end; ++w) any |= bits[w] ^ flip;
        if (any == 0) continue;
        for (size_t w = block; w < end; ++w) {
            uint64_t word = bits[w] ^ flip;
            if (w + 1 == words && num_bits % 64 != 0) word &= (uint64_t{1} << (num_bits % 64)) - 1;
            for (; word != 0; word &= word - 1) {
                if (count == limit) return false;
                ids[count++] = static_cast<uint32_t>(w * 64 + static_cast<size_t>(std::countr_zero(word)));
            }
        }
    }
    out.assign(ids, ids + count);
    return true;
}

}  // namespace

std::string MaskCache::make_key(std::span<const int32_t> key) {
    std::string out(key.size() * sizeof(int32_t), '\0');
    if (!key.empty()) std::memcpy(out.data(), key.data(), out.size());
    return out;
}

bool MaskCache::lookup(std::span<const int32_t> key, std::span<uint64_t> bits, MaskSummary& summary) {
    const std::string k = make_key(key);
    std::lock_guard lock(mutex_);
    auto it = entries_.find(k);
    if (it == entries_.end()) return false;
    Entry& entry = it->second;
    lru_.splice(lru_.begin(), lru_, entry.lru);
    summary = entry.summary;
    switch (entry.form) {
        case Form::kBits:
            std::copy(entry.words.begin(), entry.words.end(), bits.begin());
            break;
        case Form::kAllowed:
            std::fill(bits.begin(), bits.end(), 0);
            for (uint32_t id : entry.ids) set_bit(bits, id);
            break;
        case Form::kRejected:
            fill_ones(bits, entry.num_bits);
            for (uint32_t id : entry.ids) bits[id >> 6] &= ~(uint64_t{1} << (id & 63));
            break;
    }
    return true;
}

void MaskCache::insert(std::span<const int32_t> key, std::span<const uint64_t> bits, int64_t num_bits,
                       MaskSummary summary) {
    Entry entry;
    entry.summary = summary;
    entry.num_bits = num_bits;
    const size_t bitset_bytes = bits.size() * sizeof(uint64_t);
    // Ids are kept while they take at most a quarter of the bitset: a longer list saves little room and costs more to
    // write and to read back than copying the words.
    const size_t limit = bitset_bytes / (4 * sizeof(uint32_t));
    // A listing stops at `limit` ids: on a mask of mostly allowed ids the first one gives up within a few words.
    if (list_ids(bits, num_bits, false, limit, entry.ids)) {
        entry.form = Form::kAllowed;
    } else if (list_ids(bits, num_bits, true, limit, entry.ids)) {
        entry.form = Form::kRejected;
    } else {
        entry.form = Form::kBits;
        entry.words.assign(bits.begin(), bits.end());
    }
    entry.bytes = kEntryOverhead + key.size() * sizeof(int32_t) + entry.ids.size() * sizeof(uint32_t) +
                  (entry.form == Form::kBits ? bitset_bytes : 0);
    if (entry.bytes > budget_) return;
    const std::string k = make_key(key);
    std::lock_guard lock(mutex_);
    if (entries_.contains(k)) return;  // another thread computed it meanwhile
    evict_to(budget_ - entry.bytes);
    lru_.push_front(k);
    entry.lru = lru_.begin();
    bytes_ += entry.bytes;
    entries_.emplace(k, std::move(entry));
}

void MaskCache::evict_to(size_t budget) {
    while (bytes_ > budget && !lru_.empty()) {
        auto it = entries_.find(lru_.back());
        bytes_ -= it->second.bytes;
        entries_.erase(it);
        lru_.pop_back();
    }
}

size_t MaskCache::bytes() const {
    std::lock_guard lock(mutex_);
    return bytes_;
}

size_t MaskCache::entries() const {
    std::lock_guard lock(mutex_);
    return entries_.size();
}

}  // namespace dsv4::structured
