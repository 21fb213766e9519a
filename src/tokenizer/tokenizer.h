// Tokenizer: a byte-level BPE tokenizer loaded from a Hugging Face tokenizer.json (DeepSeek-V3 / V4 family).
//
// Boundary: text in, token ids out (and back). encode() equals HF tokenizers' encode(text,
// add_special_tokens=false): no BOS/EOS or post-processor template is ever added; the chat encoder adds BOS
// explicitly. Supported tokenizer.json features (anything else is rejected at load with a dsv4::Error):
//   normalizer     null or an empty Sequence
//   pre_tokenizer  Sequence of Split (Regex or String pattern, any behavior, invert) ending in ByteLevel
//                  (add_prefix_space, use_regex); Oniguruma runs the regexes, as in HF, except the three
//                  DeepSeek patterns, which have exact hand-written matchers (pretokenizer_deepseek.h)
//   model          BPE without dropout, continuing_subword_prefix or end_of_word_suffix (ignore_merges ok)
//   decoder        ByteLevel
//   added_tokens   special, normalized, lstrip, rstrip and single_word are all honoured
// post_processor is ignored. All methods are const and safe to call from several threads at once (each thread
// keeps its own BPE cache of about 1 MB). Known gaps vs HF: single_word uses Oniguruma's \w (Letter, Mark,
// Decimal_Number, Connector_Punctuation) where HF's Rust regex uses Alphabetic/M/Nd/Pc/Join_Control, and an rstrip
// token resumes matching after the whitespace it absorbed; DeepSeek's files use neither flag.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenizer/bpe.h"
#include "tokenizer/pretokenizer.h"
#include "tokenizer/tokenizer_added_tokens.h"

namespace dsv4::tokenizer {

struct TokenizerOptions {
    // Use the hand-written matchers for the DeepSeek Split patterns instead of Oniguruma (same output).
    bool fast_pretokenizer = true;
};

// Which added tokens encode() recognises in the text.
enum class AddedTokenMode {
    kAll,         // every added token (HF default)
    kNonSpecial,  // only tokens with special=false (HF encode_special_tokens=true)
    kNone,        // none: the whole text is ordinary text (for untrusted content)
};

class Tokenizer {
  public:
    // Reads and parses a tokenizer.json. Throws dsv4::Error naming the file and the problem.
    static Tokenizer load(const std::string& path, TokenizerOptions options = {});
    // Parses tokenizer.json text (for tests and embedded tokenizers).
    static Tokenizer from_json_text(std::string_view json_text, TokenizerOptions options = {});

    // Token ids of `text` (valid UTF-8, else dsv4::Error). parse_special=true matches every added token;
    // false matches none (kNone).
    std::vector<int32_t> encode(std::string_view text, bool parse_special = true) const;
    std::vector<int32_t> encode(std::string_view text, AddedTokenMode mode) const;

    // Text of `ids` as HF decodes it: unknown ids contribute nothing, skip_special drops added tokens flagged
    // special, and byte sequences that are not valid UTF-8 become U+FFFD (maximal-subpart rule).
    std::string decode(std::span<const int32_t> ids, bool skip_special) const;

    std::optional<int32_t> token_to_id(std::string_view token) const;
    // The token string of `id` (ByteLevel alphabet for vocabulary tokens, content for added tokens).
    // Throws dsv4::Error when the id has no token; see has_id.
    std::string id_to_token(int32_t id) const;
    bool has_id(int32_t id) const;
    bool is_special(int32_t id) const;  // an added token flagged special
    bool is_added(int32_t id) const;    // any added token
    // The raw bytes `id` contributes to decoded text (empty for unknown ids).
    std::string_view token_bytes(int32_t id) const;
    // One past the largest id (vocabulary or added token).
    int32_t vocab_size() const { return static_cast<int32_t>(token_bytes_.size()); }
    const std::vector<AddedToken>& added_tokens() const { return added_tokens_; }
    int fast_path_count() const { return pre_tokenizer_->fast_path_count(); }

  private:
    Tokenizer() = default;
    void encode_text_span(std::string_view text, std::vector<int32_t>& out) const;

    std::unique_ptr<BpeModel> model_;
    std::unique_ptr<PreTokenizer> pre_tokenizer_;
    std::vector<AddedToken> added_tokens_;
    std::unique_ptr<AddedTokenMatcher> added_matcher_;
    std::vector<std::string> token_bytes_;                // by id
    std::vector<int32_t> added_index_;                    // by id: index into added_tokens_, or -1
    std::unordered_map<std::string, int32_t> added_ids_;  // by content
};

}  // namespace dsv4::tokenizer
