// Pre-tokenization: Split behaviours and invert, ByteLevel's GPT-2 regex and prefix space, rejection of
// unsupported configurations, and the hand-written DeepSeek matchers against Oniguruma.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "tokenizer/pretokenizer.h"

namespace dsv4::tokenizer {
namespace {

using nlohmann::json;
using Pieces = std::vector<std::string>;

const json kByteLevelPlain = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}};

json split_step(json pattern, const char* behavior, bool invert = false) {
    return {{"type", "Split"}, {"pattern", pattern}, {"behavior", behavior}, {"invert", invert}};
}

Pieces pre_tokenize(const json& config, std::string_view text, bool fast = true) {
    const PreTokenizer pre = PreTokenizer::from_json(config, fast);
    std::vector<std::string_view> pieces;
    std::deque<std::string> storage;
    pre.split(text, pieces, storage);
    return Pieces(pieces.begin(), pieces.end());
}

Pieces with_split(const json& step, std::string_view text) {
    return pre_tokenize({{"type", "Sequence"}, {"pretokenizers", {step, kByteLevelPlain}}}, text);
}

TEST(PreTokenizer, SplitBehaviours) {
    const json dash = {{"String", "-"}};
    const std::string text = "The-final--countdown";
    EXPECT_EQ(with_split(split_step(dash, "Removed"), text), (Pieces{"The", "final", "countdown"}));
    EXPECT_EQ(with_split(split_step(dash, "Isolated"), text), (Pieces{"The", "-", "final", "-", "-", "countdown"}));
    EXPECT_EQ(with_split(split_step(dash, "MergedWithPrevious"), text), (Pieces{"The-", "final-", "-", "countdown"}));
    EXPECT_EQ(with_split(split_step(dash, "MergedWithNext"), text), (Pieces{"The", "-final", "-", "-countdown"}));
    EXPECT_EQ(with_split(split_step(dash, "Contiguous"), text), (Pieces{"The", "-", "final", "--", "countdown"}));
    // invert flips which segments count as matches: Removed then drops what the pattern did not match.
    EXPECT_EQ(with_split(split_step({{"Regex", "[a-z]+"}}, "Removed", true), "ab12cd3"), (Pieces{"ab", "cd"}));
    EXPECT_EQ(with_split(split_step({{"Regex", "[a-z]+"}}, "Removed", false), "ab12cd3"), (Pieces{"12", "3"}));
    // A literal with regex metacharacters is matched literally.
    EXPECT_EQ(with_split(split_step({{"String", ".*"}}, "Isolated"), "a.*b.c"), (Pieces{"a", ".*", "b.c"}));
}

TEST(PreTokenizer, ByteLevelRegexAndPrefixSpace) {
    const json gpt2 = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}};
    EXPECT_EQ(pre_tokenize(gpt2, "Hello my friend, how is your day going?"),
              (Pieces{"Hello", " my", " friend", ",", " how", " is", " your", " day", " going", "?"}));
    EXPECT_EQ(pre_tokenize(gpt2, "Hello there       dear"), (Pieces{"Hello", " there", "      ", " dear"}));
    EXPECT_EQ(pre_tokenize(gpt2, "I'm 12 years"), (Pieces{"I", "'m", " 12", " years"}));
    const json prefixed = {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"use_regex", true}};
    EXPECT_EQ(pre_tokenize(prefixed, "Hello world"), (Pieces{" Hello", " world"}));
    EXPECT_EQ(pre_tokenize(prefixed, " Hello"), (Pieces{" Hello"}));
    EXPECT_EQ(pre_tokenize(kByteLevelPlain, "no split at all"), (Pieces{"no split at all"}));
    EXPECT_EQ(pre_tokenize(kByteLevelPlain, ""), Pieces{});
}

TEST(PreTokenizer, RejectsUnsupportedConfigurations) {
    auto rejects = [](const json& config) {
        EXPECT_THROW(PreTokenizer::from_json(config), Error) << config.dump();
    };
    rejects(nullptr);
    rejects({{"type", "Whitespace"}});
    rejects({{"type", "Sequence"}, {"pretokenizers", {split_step({{"Regex", "a"}}, "Isolated")}}});  // no ByteLevel
    rejects({{"type", "Sequence"}, {"pretokenizers", {kByteLevelPlain, split_step({{"Regex", "a"}}, "Isolated")}}});
    rejects({{"type", "Sequence"}, {"pretokenizers", {split_step({{"Regex", "a"}}, "Sideways"), kByteLevelPlain}}});
    rejects({{"type", "Sequence"}, {"pretokenizers", {split_step({{"Regex", "(unclosed"}}, "Isolated"), kByteLevelPlain}}});
    rejects({{"type", "Sequence"}, {"pretokenizers", {split_step({{"Glob", "*"}}, "Isolated"), kByteLevelPlain}}});
}

}  // namespace
}  // namespace dsv4::tokenizer
