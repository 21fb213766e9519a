#include "tokenizer/tokenizer_added_tokens.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <set>
#include <unordered_set>

#include "core/error.h"
#include "tokenizer/bpe.h"
#include "tokenizer/unicode.h"
#include "tokenizer/unicode_categories.h"

namespace dsv4::tokenizer {
namespace {

bool flag(const nlohmann::json& entry, const char* key, bool fallback) {
    if (!entry.contains(key)) return fallback;
    if (!entry[key].is_boolean()) fail("tokenizer: added token field \"{}\" is not a boolean: {}", key, entry.dump());
    return entry[key].get<bool>();
}

// The code point that ends text[0, end) (valid UTF-8, end > 0).
char32_t code_point_before(std::string_view text, size_t end) {
    size_t begin = end - 1;
    while (begin > 0 && (static_cast<uint8_t>(text[begin]) & 0xC0) == 0x80) --begin;
    int length = 0;
    return decode_utf8_at(text, begin, length);
}

bool is_word(char32_t c) {
    return (char_classes(c) & kClassWord) != 0;
}
bool is_space(char32_t c) {
    return (char_classes(c) & kClassSpace) != 0;
}

// Start of the whitespace run that ends at `end` (HF: \s*$ on text[..end]).
size_t whitespace_run_start(std::string_view text, size_t end) {
    while (end > 0) {
        size_t begin = end - 1;
        while (begin > 0 && (static_cast<uint8_t>(text[begin]) & 0xC0) == 0x80) --begin;
        int length = 0;
        if (!is_space(decode_utf8_at(text, begin, length))) break;
        end = begin;
    }
    return end;
}

// End of the whitespace run that starts at `begin` (HF: ^\s* on text[begin..]).
size_t whitespace_run_end(std::string_view text, size_t begin) {
    while (begin < text.size()) {
        int length = 0;
        if (!is_space(decode_utf8_at(text, begin, length))) break;
        begin += static_cast<size_t>(length);
    }
    return begin;
}

}  // namespace

std::vector<AddedToken> parse_added_tokens(const nlohmann::json& added_tokens) {
    std::vector<AddedToken> tokens;
    if (added_tokens.is_null()) return tokens;
    if (!added_tokens.is_array()) fail("tokenizer: \"added_tokens\" is not an array");
    std::unordered_set<int32_t> ids;
    std::set<std::string> contents;
    for (const auto& entry : added_tokens) {
        if (!entry.is_object() || !entry.contains("id") || !entry["id"].is_number_integer() ||
            !entry.contains("content") || !entry["content"].is_string())
            fail("tokenizer: added token without an integer \"id\" and a string \"content\": {}", entry.dump());
        AddedToken token;
        const auto id = entry["id"].get<int64_t>();
        if (id < 0 || id >= kMaxTokenId) fail("tokenizer: added token id {} is out of range [0, {})", id, kMaxTokenId);
        token.id = static_cast<int32_t>(id);
        token.content = entry["content"].get<std::string>();
        if (token.content.empty()) fail("tokenizer: added token {} has empty content", token.id);
        if (find_invalid_utf8(token.content)) fail("tokenizer: added token {} is not valid UTF-8", token.id);
        token.special = flag(entry, "special", false);
        token.normalized = flag(entry, "normalized", !token.special);
        token.lstrip = flag(entry, "lstrip", false);
        token.rstrip = flag(entry, "rstrip", false);
        token.single_word = flag(entry, "single_word", false);
        if (!ids.insert(token.id).second) fail("tokenizer: added token id {} appears twice", token.id);
        if (!contents.insert(token.content).second) fail("tokenizer: added token '{}' appears twice", token.content);
        tokens.push_back(std::move(token));
    }
    return tokens;
}

void AddedTokenMatcher::Trie::insert(std::string_view content, int32_t token) {
    int32_t node = 0;
    for (char c : content) {
        const auto byte = static_cast<uint8_t>(c);
        auto& children = nodes[static_cast<size_t>(node)].children;
        auto it = std::lower_bound(children.begin(), children.end(), std::make_pair(byte, int32_t{-1}));
        if (it == children.end() || it->first != byte) {
            const auto child = static_cast<int32_t>(nodes.size());
            children.insert(it, {byte, child});
            nodes.emplace_back();
            node = child;
        } else {
            node = it->second;
        }
    }
    nodes[static_cast<size_t>(node)].token = token;
    can_start[static_cast<uint8_t>(content[0])] = true;
}

std::pair<size_t, int32_t> AddedTokenMatcher::Trie::longest_at(std::string_view text, size_t pos) const {
    std::pair<size_t, int32_t> best{0, -1};
    int32_t node = 0;
    for (size_t i = pos; i < text.size(); ++i) {
        const auto byte = static_cast<uint8_t>(text[i]);
        const auto& children = nodes[static_cast<size_t>(node)].children;
        auto it = std::lower_bound(children.begin(), children.end(), std::make_pair(byte, int32_t{-1}));
        if (it == children.end() || it->first != byte) break;
        node = it->second;
        if (nodes[static_cast<size_t>(node)].token >= 0) best = {i + 1 - pos, nodes[static_cast<size_t>(node)].token};
    }
    return best;
}

AddedTokenMatcher::AddedTokenMatcher(const std::vector<AddedToken>& tokens) : tokens_(tokens) {
    for (size_t i = 0; i < tokens_.size(); ++i) {
        Trie& trie = tokens_[i].normalized ? normalized_trie_ : raw_trie_;
        trie.insert(tokens_[i].content, static_cast<int32_t>(i));
    }
}

// One pass of HF's AddedVocabulary::find_matches over text[base, base + text.size()).
void AddedTokenMatcher::split_pass(const Trie& trie, std::string_view text, size_t base, bool match_special,
                                   std::vector<TextSpan>& out) const {
    size_t emitted = 0;  // end of what has been emitted so far (HF's start_offset)
    size_t pos = 0;
    while (pos < text.size()) {
        if (!trie.can_start[static_cast<uint8_t>(text[pos])]) {
            ++pos;
            continue;
        }
        const auto [length, index] = trie.longest_at(text, pos);
        if (index < 0) {
            ++pos;
            continue;
        }
        const AddedToken& token = tokens_[static_cast<size_t>(index)];
        size_t begin = pos;
        size_t end = pos + length;
        pos = end;  // matches never overlap, even when this one is dropped below
        if (token.special && !match_special) continue;
        if (token.single_word) {
            const bool word_before = begin > 0 && is_word(code_point_before(text, begin));
            int next_length = 0;
            const bool word_after = end < text.size() && is_word(decode_utf8_at(text, end, next_length));
            if (word_before || word_after) continue;
        }
        if (token.lstrip) begin = std::max(whitespace_run_start(text, begin), emitted);
        if (token.rstrip) end = whitespace_run_end(text, end);
        if (emitted < begin) out.push_back({base + emitted, base + begin, -1});
        out.push_back({base + begin, base + end, token.id});
        emitted = end;
        pos = end;
    }
    if (emitted < text.size()) out.push_back({base + emitted, base + text.size(), -1});
}

void AddedTokenMatcher::split(std::string_view text, bool match_special, std::vector<TextSpan>& out) const {
    std::vector<TextSpan> first_pass;
    split_pass(raw_trie_, text, 0, match_special, first_pass);
    for (const TextSpan& span : first_pass) {
        if (span.id >= 0) {
            out.push_back(span);
            continue;
        }
        split_pass(normalized_trie_, text.substr(span.begin, span.end - span.begin), span.begin, match_special, out);
    }
}

}  // namespace dsv4::tokenizer
