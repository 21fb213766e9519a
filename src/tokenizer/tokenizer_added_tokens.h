// Added tokens of a tokenizer.json ("added_tokens"): matched literally in the text before pre-tokenization, as HF
// tokenizers' AddedVocabulary does: first the tokens with normalized=false on the raw text, then those with
// normalized=true on the remaining pieces (the normalizer is the identity here, see tokenizer.h). Each pass takes
// leftmost-longest, non-overlapping matches. lstrip/rstrip make a token absorb the whitespace around it;
// single_word drops matches that touch a word character; with match_special=false, tokens flagged special are
// left as text (HF's encode_special_tokens).
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace dsv4::tokenizer {

struct AddedToken {
    int32_t id = -1;
    std::string content;
    bool special = false;
    bool normalized = false;
    bool lstrip = false;
    bool rstrip = false;
    bool single_word = false;
};

// A span of the input: an added token (id >= 0) or text to pre-tokenize (id == -1).
struct TextSpan {
    size_t begin;
    size_t end;
    int32_t id;
};

// Parses the "added_tokens" array; throws dsv4::Error for a malformed entry, an empty content, or two entries
// sharing an id or a content.
std::vector<AddedToken> parse_added_tokens(const nlohmann::json& added_tokens);

class AddedTokenMatcher {
  public:
    AddedTokenMatcher() = default;
    explicit AddedTokenMatcher(const std::vector<AddedToken>& tokens);

    // Splits `text` (valid UTF-8) into spans covering it in order; text spans are never empty.
    void split(std::string_view text, bool match_special, std::vector<TextSpan>& out) const;

  private:
    // A byte trie over the token contents of one pass.
    struct Trie {
        struct Node {
            std::vector<std::pair<uint8_t, int32_t>> children;  // sorted by byte
            int32_t token = -1;                                 // index into tokens_
        };
        std::vector<Node> nodes{Node{}};
        bool can_start[256] = {};
        void insert(std::string_view content, int32_t token);
        // Length of the longest token starting at text[pos] and that token's index, or {0, -1}.
        std::pair<size_t, int32_t> longest_at(std::string_view text, size_t pos) const;
    };

    void split_pass(const Trie& trie, std::string_view text, size_t base, bool match_special,
                    std::vector<TextSpan>& out) const;

    std::vector<AddedToken> tokens_;
    Trie raw_trie_;         // normalized == false
    Trie normalized_trie_;  // normalized == true
};

}  // namespace dsv4::tokenizer
