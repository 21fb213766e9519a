// Prefix-cache keys: a hash chain over the token ids of full blocks. Block k's key covers every token of blocks
// 0..k (the parent key is hashed in), so equal keys mean equal prefixes, and the state a block holds (compressed
// rows of windows that end inside it, which depend on everything before) is determined by its key. XXH3-128:
// collisions are negligible at any cache size we can hold.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace dsv4 {

struct BlockHash {
    uint64_t low = 0;
    uint64_t high = 0;
    bool operator==(const BlockHash&) const = default;
};

struct BlockHashHasher {
    size_t operator()(const BlockHash& h) const {
        return static_cast<size_t>(h.low ^ (h.high * 0x9E3779B97F4A7C15ull));
    }
};

// The key of the first block has the zero hash as parent.
BlockHash hash_block(const BlockHash& parent, std::span<const int32_t> tokens);

}  // namespace dsv4
