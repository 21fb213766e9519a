// Stop strings: holdback, boundaries, overlapping stop strings, chunking independence; finish rules.
#include "sample/stop_checker.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "core/error.h"

namespace dsv4 {
namespace {

struct Outcome {
    std::string text;  // everything emitted, flush included when no stop happened
    bool stopped = false;
    std::string matched;
};

Outcome feed(StopStringMatcher matcher, const std::vector<std::string>& pieces) {
    Outcome out;
    for (const std::string& piece : pieces) {
        auto result = matcher.push(piece);
        out.text += result.emit;
        if (result.stopped) {
            out.stopped = true;
            out.matched = result.matched;
        }
    }
    if (!out.stopped) out.text += matcher.flush();
    return out;
}

std::vector<std::string> bytes_of(const std::string& text) {
    std::vector<std::string> pieces;
    for (char c : text) pieces.emplace_back(1, c);
    return pieces;
}

TEST(StopStringMatcher, HoldsBackAPossibleStartAndCutsTheStopString) {
    StopStringMatcher matcher({"STOP"}, false);
    auto first = matcher.push("Hello ST");
    EXPECT_EQ(first.emit, "Hello ");
    EXPECT_FALSE(first.stopped);
    auto second = matcher.push("OP and more");
    EXPECT_EQ(second.emit, "");
    EXPECT_TRUE(second.stopped);
    EXPECT_EQ(second.matched, "STOP");
    EXPECT_TRUE(matcher.stopped());
    auto after = matcher.push("ignored");
    EXPECT_EQ(after.emit, "");
    EXPECT_TRUE(after.stopped);
    EXPECT_EQ(matcher.flush(), "");
}

TEST(StopStringMatcher, ReleasesHeldTextOnceItCannotBeAStop) {
    StopStringMatcher matcher({"STOP"}, false);
    EXPECT_EQ(matcher.push("ST").emit, "");
    EXPECT_EQ(matcher.push("O").emit, "");
    EXPECT_EQ(matcher.push("W").emit, "STOW");
    EXPECT_EQ(matcher.push("S").emit, "");
    EXPECT_EQ(matcher.flush(), "S");
}

TEST(StopStringMatcher, IncludeStopStringEmitsEagerlyAndStopsAfterTheMatch) {
    StopStringMatcher matcher({"STOP"}, true);
    EXPECT_EQ(matcher.push("Hello ST").emit, "Hello ST");
    auto result = matcher.push("OP and more");
    EXPECT_EQ(result.emit, "OP");
    EXPECT_TRUE(result.stopped);
}

TEST(StopStringMatcher, EarliestCompletionWinsAndLongestOnTies) {
    EXPECT_EQ(feed(StopStringMatcher({"abc", "ab"}, false), {"xabc"}).text, "x");
    EXPECT_EQ(feed(StopStringMatcher({"abc", "ab"}, false), {"xabc"}).matched, "ab");
    Outcome tie = feed(StopStringMatcher({"ab", "aab"}, false), {"xaab"});
    EXPECT_EQ(tie.text, "x");
    EXPECT_EQ(tie.matched, "aab");
    Outcome inner = feed(StopStringMatcher({"abcd", "bc"}, false), {"abcd"});
    EXPECT_EQ(inner.text, "a");
    EXPECT_EQ(inner.matched, "bc");
    Outcome included = feed(StopStringMatcher({"abcd", "bc"}, true), {"abcd"});
    EXPECT_EQ(included.text, "abc");
}

TEST(StopStringMatcher, SelfOverlappingStopString) {
    for (auto pieces : {std::vector<std::string>{"xaaab!"}, bytes_of("xaaab!"), {"xa", "a", "ab!"}}) {
        Outcome out = feed(StopStringMatcher({"aab"}, false), pieces);
        EXPECT_TRUE(out.stopped);
        EXPECT_EQ(out.text, "xa");
    }
    Outcome late = feed(StopStringMatcher({"abab"}, false), bytes_of("abaabab!"));
    EXPECT_TRUE(late.stopped);
    EXPECT_EQ(late.text, "aba");
    Outcome miss = feed(StopStringMatcher({"abab"}, false), bytes_of("abaaba"));
    EXPECT_FALSE(miss.stopped);
    EXPECT_EQ(miss.text, "abaaba");
}

TEST(StopStringMatcher, MultiByteUtf8StopStringAcrossPieces) {
    std::string text = "答案是42。其余";
    Outcome out = feed(StopStringMatcher({"。"}, false), bytes_of(text));
    EXPECT_TRUE(out.stopped);
    EXPECT_EQ(out.text, "答案是42");
}

TEST(StopStringMatcher, DetectionOffInsideMinTokensStillHoldsBack) {
    StopStringMatcher complete({"STOP"}, false);
    EXPECT_EQ(complete.push("a STOP", false).emit, "a STOP");  // ends while inactive: ignored
    EXPECT_FALSE(complete.stopped());
    StopStringMatcher spanning({"STOP"}, false);
    EXPECT_EQ(spanning.push("a ST", false).emit, "a ");
    auto result = spanning.push("OP", true);
    EXPECT_TRUE(result.stopped);
    EXPECT_EQ(result.emit, "");
}

TEST(StopStringMatcher, NoStopStringsPassesTextThrough) {
    StopStringMatcher matcher(SamplingParams{});
    EXPECT_EQ(matcher.push("anything").emit, "anything");
    EXPECT_EQ(matcher.flush(), "");
}

TEST(StopStringMatcher, RejectsEmptyStopString) {
    EXPECT_THROW(StopStringMatcher({"a", ""}, false), Error);
}

// Naive reference: the stop is the smallest end position of an occurrence, longest string on ties. Occurrences
// ending at or before detect_from bytes (text pushed with detection off) do not count.
Outcome reference_outcome(const std::string& text, const std::vector<std::string>& stops, bool include,
                          size_t detect_from = 0) {
    for (size_t end = std::max<size_t>(detect_from + 1, 1); end <= text.size(); ++end) {
        std::string best;
        for (const std::string& s : stops) {
            bool ends_here = s.size() <= end && text.compare(end - s.size(), s.size(), s) == 0;
            if (ends_here && s.size() > best.size()) best = s;
        }
        if (!best.empty()) return {text.substr(0, include ? end : end - best.size()), true, best};
    }
    return {text, false, ""};
}

// Longest suffix of text that is a proper prefix of some stop string: what must be held back, and no more.
size_t reference_held(const std::string& text, const std::vector<std::string>& stops) {
    size_t held = 0;
    for (const std::string& s : stops) {
        for (size_t k = std::min(s.size() - 1, text.size()); k > held; --k) {
            if (text.compare(text.size() - k, k, s, 0, k) == 0) {
                held = k;
                break;
            }
        }
    }
    return held;
}

TEST(StopStringMatcher, RandomTextsAndChunkingsMatchTheReference) {
    std::mt19937_64 rng(7);
    auto random_string = [&](size_t min_len, size_t max_len) {
        std::string s(min_len + rng() % (max_len - min_len + 1), 'a');
        for (char& c : s) c = static_cast<char>('a' + rng() % 3);
        return s;
    };
    for (int trial = 0; trial < 5000; ++trial) {
        std::vector<std::string> stops;
        for (size_t i = 0, count = 1 + rng() % 3; i < count; ++i) stops.push_back(random_string(1, 4));
        bool include = rng() % 2 == 0;
        std::string text = random_string(0, 30);
        // Like min_tokens: the first pieces are pushed with detection off, the rest with it on.
        std::vector<size_t> lengths;
        for (size_t total = 0; total < text.size(); total += lengths.back()) {
            lengths.push_back(std::min(text.size() - total, static_cast<size_t>(rng() % 5)));  // empty pieces too
        }
        size_t inactive_pieces = rng() % 3 == 0 ? rng() % (lengths.size() + 1) : 0;
        size_t detect_from = 0;
        for (size_t i = 0; i < inactive_pieces; ++i) detect_from += lengths[i];
        Outcome expected = reference_outcome(text, stops, include, detect_from);
        StopStringMatcher matcher(stops, include);
        std::string emitted;
        std::string seen;
        bool stopped = false;
        size_t pos = 0;
        for (size_t piece = 0; piece < lengths.size() && !stopped; ++piece) {
            size_t len = lengths[piece];
            seen += text.substr(pos, len);
            auto result = matcher.push(std::string_view(text).substr(pos, len), piece >= inactive_pieces);
            pos += len;
            emitted += result.emit;
            ASSERT_EQ(expected.text.compare(0, emitted.size(), emitted), 0) << "emitted text beyond the stop";
            stopped = result.stopped;
            if (stopped) {
                EXPECT_EQ(result.matched, expected.matched);
            } else if (include) {
                ASSERT_EQ(emitted, seen);
            } else {
                ASSERT_EQ(emitted.size(), seen.size() - reference_held(seen, stops))
                    << "held back too much or too little";
            }
        }
        if (!stopped) emitted += matcher.flush();
        ASSERT_EQ(stopped, expected.stopped) << text;
        ASSERT_EQ(emitted, expected.text) << text;
    }
}

TEST(CheckFinish, EosStopsUnlessIgnored) {
    SamplingParams params;
    params.max_tokens = 10;
    std::vector<int64_t> eos = {1};
    EXPECT_EQ(check_finish(params, eos, {.last_token = 1, .num_output_tokens = 3}), FinishCause::kEos);
    EXPECT_EQ(check_finish(params, eos, {.last_token = 2, .num_output_tokens = 3}), FinishCause::kNone);
    params.ignore_eos = true;
    EXPECT_EQ(check_finish(params, eos, {.last_token = 1, .num_output_tokens = 3}), FinishCause::kNone);
}

TEST(CheckFinish, StopTokensAndMinTokens) {
    SamplingParams params;
    params.max_tokens = 10;
    params.min_tokens = 3;
    params.stop_token_ids = {7};
    std::vector<int64_t> eos = {1};
    EXPECT_EQ(check_finish(params, eos, {.last_token = 7, .num_output_tokens = 3}), FinishCause::kNone);
    EXPECT_EQ(check_finish(params, eos, {.last_token = 1, .num_output_tokens = 3}), FinishCause::kNone);
    EXPECT_EQ(check_finish(params, eos, {.last_token = 7, .num_output_tokens = 4}), FinishCause::kStopToken);
    EXPECT_EQ(check_finish(params, eos, {.last_token = 1, .num_output_tokens = 4}), FinishCause::kEos);
}

TEST(CheckFinish, LengthFromMaxTokensOrContext) {
    SamplingParams params;
    params.max_tokens = 5;
    std::vector<int64_t> eos = {1};
    EXPECT_EQ(check_finish(params, eos, {.last_token = 2, .num_output_tokens = 4}), FinishCause::kNone);
    EXPECT_EQ(check_finish(params, eos, {.last_token = 2, .num_output_tokens = 5}), FinishCause::kLength);
    EXPECT_EQ(check_finish(params, eos, {.last_token = 1, .num_output_tokens = 5}), FinishCause::kEos);
    FinishInput full{.last_token = 2, .num_output_tokens = 2, .num_total_tokens = 100, .max_model_len = 100};
    EXPECT_EQ(check_finish(params, eos, full), FinishCause::kLength);
    full.max_model_len = 101;
    EXPECT_EQ(check_finish(params, eos, full), FinishCause::kNone);
}

TEST(CheckFinish, OpenAiNamesAndStopStringWindow) {
    EXPECT_EQ(openai_finish_reason(FinishCause::kEos), "stop");
    EXPECT_EQ(openai_finish_reason(FinishCause::kStopToken), "stop");
    EXPECT_EQ(openai_finish_reason(FinishCause::kStopString), "stop");
    EXPECT_EQ(openai_finish_reason(FinishCause::kLength), "length");
    EXPECT_EQ(openai_finish_reason(FinishCause::kNone), "");
    SamplingParams params;
    params.min_tokens = 2;
    EXPECT_FALSE(stop_strings_active(params, 2));
    EXPECT_TRUE(stop_strings_active(params, 3));
}

}  // namespace
}  // namespace dsv4
