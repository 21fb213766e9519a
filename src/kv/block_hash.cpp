#include "kv/block_hash.h"

#define XXH_STATIC_LINKING_ONLY  // XXH3_state_t on the stack (no allocation per block)
#include <xxhash.h>

namespace dsv4 {

BlockHash hash_block(const BlockHash& parent, std::span<const int32_t> tokens) {
    // The parent key (16 bytes), then the token ids as stored in memory (int32), hashed in one pass.
    XXH3_state_t state;
    XXH3_INITSTATE(&state);
    XXH3_128bits_reset(&state);
    XXH3_128bits_update(&state, &parent.low, sizeof(parent.low));
    XXH3_128bits_update(&state, &parent.high, sizeof(parent.high));
    XXH3_128bits_update(&state, tokens.data(), tokens.size_bytes());
    const XXH128_hash_t h = XXH3_128bits_digest(&state);
    return {h.low64, h.high64};
}

}  // namespace dsv4
