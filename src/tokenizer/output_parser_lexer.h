// Pieces of the DSV4 output parser that look at bytes: the marker matcher (DSML tags, think tags, special tokens) and
// the leak guard. Both decide from a bounded look-ahead and say "need more" instead of guessing, which is what makes
// the streaming parser give the same result however the text is split into chunks.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace dsv4::output_parser_detail {

enum class DsmlTagName : std::uint8_t { kToolCalls, kInvoke, kParameter, kUnknown };

struct DsmlTag {
    bool closing = false;
    DsmlTagName name = DsmlTagName::kUnknown;
    std::string name_attribute;  // name="…"
    bool string_value = true;    // string="true|false"; a missing or unknown value counts as true
};

enum class MarkerKind : std::uint8_t {
    kThinkOpen,      // <think>
    kThinkClose,     // </think>
    kDsmlTag,        // <｜DSML｜name attrs…> or </｜DSML｜name>
    kSpecialToken,   // <｜…｜> (end of sentence, User, Assistant, task tokens, …)
    kBareDsml,       // ｜DSML｜ without its '<'
    kMalformedDsml,  // "<｜DSML｜" / "</｜DSML｜" not followed by a well-formed tag: only this prefix is consumed
    kTruncatedDsml,  // an unfinished DSML tag at the very end of the output: consumed to the end
};

struct Marker {
    MarkerKind kind = MarkerKind::kSpecialToken;
    std::size_t length = 0;    // bytes consumed, including `newlines`
    std::size_t newlines = 0;  // '\n' bytes (at most 2) before a tool-call opening tag, consumed with it
    DsmlTag tag;               // kDsmlTag
};

enum class MatchStatus : std::uint8_t { kText, kNeedMore, kMarker };

struct MatchResult {
    MatchStatus status = MatchStatus::kText;
    Marker marker;
};

inline constexpr std::size_t kMaxDsmlTagBytes = 1024;
inline constexpr std::size_t kMaxSpecialTokenNameBytes = 64;

// Bytes at which a marker can start: '<', '\n' (newlines before a tool-call block) and 0xEF (first byte of '｜').
inline bool is_marker_trigger(char c) {
    return c == '<' || c == '\n' || c == '\xEF';
}

// Classifies the bytes at the start of `text` (text[0] is a trigger byte): plain text (consume one byte), a marker,
// or not decidable yet. With at_end=true (no more output will come) the answer is never kNeedMore.
// A '\n' (or "\n\n") is a marker only when directly followed by <｜DSML｜tool_calls> or <｜DSML｜invoke …>.
MatchResult match_marker(std::string_view text, bool at_end);

// Last line of defence for text that reaches the client: rewrites what would read as markup after the parser removed
// a marker between two pieces of text (e.g. "<" + <｜end▁of▁sentence｜> + "｜x" would give "<｜x"). Rewrites never
// shorten the text, so they cannot create new matches: "<｜" -> "<|", "｜DSML｜" -> "|DSML｜", and (for reasoning and
// content) "<think>" / "</think>" -> "＜think>" / "＜/think>". Holds back a tail that could still become one of them.
class LeakGuard {
  public:
    explicit LeakGuard(bool guard_think_tags) : guard_think_tags_(guard_think_tags) {}

    void push(std::string_view text, std::string& out);
    void flush(std::string& out);  // releases the held tail (end of the stream)

  private:
    void process(std::string& out, bool at_end);

    bool guard_think_tags_;
    std::string held_;
};

// A name or key from a tag attribute with the leak guard applied.
std::string sanitize_attribute(std::string_view text);

}  // namespace dsv4::output_parser_detail
