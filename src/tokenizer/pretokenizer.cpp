#include "tokenizer/pretokenizer.h"

#include <algorithm>
#include <cctype>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "tokenizer/pretokenizer_deepseek.h"
#include "tokenizer/pretokenizer_regex.h"

namespace dsv4::tokenizer {
namespace {

// The GPT-2 pattern HF's ByteLevel pre-tokenizer uses when use_regex is true.
constexpr std::string_view kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

class RegexFinder final : public SegmentFinder {
  public:
    explicit RegexFinder(std::string_view pattern) : regex_(pattern) {}

    void find_segments(std::string_view piece, std::vector<Segment>& out) const override {
        size_t previous = 0;
        regex_.for_each_match(piece, [&](size_t begin, size_t end) {
            if (previous != begin) out.push_back({previous, begin, false});
            out.push_back({begin, end, true});
            previous = end;
        });
        if (previous != piece.size()) out.push_back({previous, piece.size(), false});
    }

  private:
    OnigRegex regex_;
};

// A literal Split pattern as an Oniguruma regex: ASCII punctuation escaped, everything else verbatim.
std::string escape_literal(std::string_view literal) {
    std::string out;
    for (char c : literal) {
        const auto u = static_cast<unsigned char>(c);
        const bool ascii_punct = u < 0x80 && !std::isalnum(u) && u != ' ' && u >= 0x21;
        if (ascii_punct) out.push_back('\\');
        out.push_back(c);
    }
    return out;
}

SplitBehavior parse_behavior(const std::string& name) {
    if (name == "Removed") return SplitBehavior::kRemoved;
    if (name == "Isolated") return SplitBehavior::kIsolated;
    if (name == "MergedWithPrevious") return SplitBehavior::kMergedWithPrevious;
    if (name == "MergedWithNext") return SplitBehavior::kMergedWithNext;
    if (name == "Contiguous") return SplitBehavior::kContiguous;
    fail(
        "tokenizer: Split behavior '{}' is not one of Removed, Isolated, MergedWithPrevious, MergedWithNext, "
        "Contiguous",
        name);
}

// Applies a delimiter behaviour to the segments, as HF's NormalizedString::split: returns the spans to keep.
void apply_behavior(SplitBehavior behavior, const std::vector<Segment>& segments, std::vector<Segment>& spans) {
    bool previous_match = false;
    switch (behavior) {
        case SplitBehavior::kIsolated:
            spans = segments;
            return;
        case SplitBehavior::kRemoved:
            for (const Segment& s : segments)
                if (!s.is_match) spans.push_back(s);
            return;
        case SplitBehavior::kContiguous:
            for (const Segment& s : segments) {
                if (!spans.empty() && s.is_match == previous_match) {
                    spans.back().end = s.end;
                } else {
                    spans.push_back(s);
                }
                previous_match = s.is_match;
            }
            return;
        case SplitBehavior::kMergedWithPrevious:
            for (const Segment& s : segments) {
                if (!spans.empty() && s.is_match && !previous_match) {
                    spans.back().end = s.end;
                } else {
                    spans.push_back(s);
                }
                previous_match = s.is_match;
            }
            return;
        case SplitBehavior::kMergedWithNext:
            for (auto it = segments.rbegin(); it != segments.rend(); ++it) {
                if (!spans.empty() && it->is_match && !previous_match) {
                    spans.back().begin = it->begin;
                } else {
                    spans.push_back(*it);
                }
                previous_match = it->is_match;
            }
            std::reverse(spans.begin(), spans.end());
            return;
    }
}

std::string step_type(const nlohmann::json& step) {
    if (!step.is_object() || !step.contains("type") || !step["type"].is_string())
        fail("tokenizer: pre_tokenizer entry without a string \"type\": {}", step.dump());
    return step["type"].get<std::string>();
}

}  // namespace

std::unique_ptr<SegmentFinder> make_regex_finder(std::string_view pattern) {
    return std::make_unique<RegexFinder>(pattern);
}

PreTokenizer::PreTokenizer(PreTokenizer&&) noexcept = default;
PreTokenizer& PreTokenizer::operator=(PreTokenizer&&) noexcept = default;
PreTokenizer::~PreTokenizer() = default;

PreTokenizer PreTokenizer::from_json(const nlohmann::json& config, bool allow_fast_paths) {
    PreTokenizer result;
    if (config.is_null()) fail("tokenizer: no pre_tokenizer; only byte-level BPE tokenizers are supported");
    if (step_type(config) == "Sequence") {
        if (!config.contains("pretokenizers") || !config["pretokenizers"].is_array())
            fail("tokenizer: pre_tokenizer Sequence without a \"pretokenizers\" array");
        for (const auto& step : config["pretokenizers"]) result.parse_step(step, allow_fast_paths);
    } else {
        result.parse_step(config, allow_fast_paths);
    }
    if (!result.has_byte_level_)
        fail("tokenizer: the pre_tokenizer has no ByteLevel step; only byte-level BPE tokenizers are supported");
    return result;
}

void PreTokenizer::parse_step(const nlohmann::json& step, bool allow_fast_paths) {
    const std::string type = step_type(step);
    if (has_byte_level_) fail("tokenizer: pre_tokenizer step '{}' after ByteLevel is not supported", type);
    if (type == "Split") {
        const auto& pattern = step.at("pattern");
        std::unique_ptr<SegmentFinder> finder;
        if (pattern.contains("Regex")) {
            const std::string regex = pattern["Regex"].get<std::string>();
            if (allow_fast_paths) finder = make_deepseek_fast_finder(regex);
            if (finder) ++fast_path_count_;
            if (!finder) finder = make_regex_finder(regex);
        } else if (pattern.contains("String")) {
            finder = make_regex_finder(escape_literal(pattern["String"].get<std::string>()));
        } else {
            fail("tokenizer: Split pattern must be {{\"Regex\": ...}} or {{\"String\": ...}}, got {}", pattern.dump());
        }
        steps_.push_back(
            {std::move(finder), parse_behavior(step.at("behavior").get<std::string>()), step.value("invert", false)});
    } else if (type == "ByteLevel") {
        has_byte_level_ = true;
        add_prefix_space_ = step.value("add_prefix_space", true);
        if (step.value("use_regex", true)) byte_level_regex_ = make_regex_finder(kGpt2Pattern);
    } else if (type == "Sequence") {
        for (const auto& inner : step.at("pretokenizers")) parse_step(inner, allow_fast_paths);
    } else {
        fail("tokenizer: pre_tokenizer type '{}' is not supported (supported: Sequence, Split, ByteLevel)", type);
    }
}

void PreTokenizer::apply_split(const SplitStep& step, std::string_view piece,
                               std::vector<std::string_view>& out) const {
    thread_local std::vector<Segment> segments;
    thread_local std::vector<Segment> spans;
    segments.clear();
    spans.clear();
    step.finder->find_segments(piece, segments);
    if (step.invert)
        for (Segment& s : segments) s.is_match = !s.is_match;
    apply_behavior(step.behavior, segments, spans);
    for (const Segment& s : spans)
        if (s.end > s.begin) out.push_back(piece.substr(s.begin, s.end - s.begin));
}

void PreTokenizer::split(std::string_view text, std::vector<std::string_view>& pieces,
                         std::deque<std::string>& storage) const {
    if (text.empty()) return;
    std::vector<std::string_view> current{text};
    std::vector<std::string_view> next;
    for (const SplitStep& step : steps_) {
        next.clear();
        for (std::string_view piece : current) apply_split(step, piece, next);
        current.swap(next);
    }
    for (std::string_view piece : current) {
        if (add_prefix_space_ && piece.front() != ' ') {
            storage.push_back(" ");
            storage.back().append(piece);
            piece = storage.back();
        }
        if (!byte_level_regex_) {
            pieces.push_back(piece);
            continue;
        }
        std::vector<Segment> segments;
        byte_level_regex_->find_segments(piece, segments);
        for (const Segment& s : segments) pieces.push_back(piece.substr(s.begin, s.end - s.begin));
    }
}

}  // namespace dsv4::tokenizer
