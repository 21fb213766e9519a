// Pre-tokenization of HF tokenizer.json: a Sequence of Split steps (regex or literal pattern, any of HF's five
// delimiter behaviours, optional invert) ending in a ByteLevel step (add_prefix_space, use_regex with the GPT-2
// pattern). Pieces are raw text bytes: the ByteLevel character mapping itself is folded into the BPE model,
// which works on byte ids directly, so nothing here rewrites text except the optional prefix space.
#pragma once

#include <deque>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace dsv4::tokenizer {

enum class SplitBehavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

// A span of a piece: matched by the split pattern or not.
struct Segment {
    size_t begin;
    size_t end;
    bool is_match;
};

// Something that finds pattern matches in a piece (Oniguruma, or a hand-written matcher for a known pattern).
class SegmentFinder {
  public:
    virtual ~SegmentFinder() = default;
    // Appends the segments of `piece` that cover it completely, in order (HF's Pattern::find_matches).
    virtual void find_segments(std::string_view piece, std::vector<Segment>& out) const = 0;
};

class PreTokenizer {
  public:
    // Parses the "pre_tokenizer" object. Throws dsv4::Error for anything unsupported: a type other than
    // Sequence/Split/ByteLevel, a missing ByteLevel step, or a step after ByteLevel.
    // `allow_fast_paths`: use the hand-written matchers for the DeepSeek patterns (identical output, tested).
    static PreTokenizer from_json(const nlohmann::json& config, bool allow_fast_paths = true);

    PreTokenizer(PreTokenizer&&) noexcept;
    PreTokenizer& operator=(PreTokenizer&&) noexcept;
    ~PreTokenizer();

    // Appends the pre-tokens of `text` (valid UTF-8) to `pieces`. Pieces view `text`, or `storage` for pieces
    // that got a prefix space. Empty pieces are never produced.
    void split(std::string_view text, std::vector<std::string_view>& pieces, std::deque<std::string>& storage) const;

    // Number of hand-written matchers in use (for tests and diagnostics).
    int fast_path_count() const { return fast_path_count_; }

  private:
    struct SplitStep {
        std::unique_ptr<SegmentFinder> finder;
        SplitBehavior behavior;
        bool invert;
    };

    PreTokenizer() = default;
    void parse_step(const nlohmann::json& step, bool allow_fast_paths);
    void apply_split(const SplitStep& step, std::string_view piece, std::vector<std::string_view>& out) const;

    std::vector<SplitStep> steps_;
    bool has_byte_level_ = false;
    bool add_prefix_space_ = false;
    std::unique_ptr<SegmentFinder> byte_level_regex_;  // GPT-2 pattern when use_regex is true
    int fast_path_count_ = 0;
};

// The segments finder for one Oniguruma pattern.
std::unique_ptr<SegmentFinder> make_regex_finder(std::string_view pattern);

}  // namespace dsv4::tokenizer
