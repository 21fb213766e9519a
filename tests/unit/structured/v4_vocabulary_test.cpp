// Constrained generation over the real DeepSeek-V4 vocabulary (129,280 ids, byte-level BPE pieces, DSML as an added
// token): random walks through the masks always end in text that parses and validates (JSON against the schema's
// rules, forced DSML tool calls through the chat output parser), and one mask of the tool-call grammar equals the
// brute-force mask over the whole vocabulary.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <random>

#include "structured/grammar_cache.h"
#include "structured_test_util.h"
#include "tokenizer/chat_tokens.h"
#include "tokenizer/output_parser.h"
#include "tokenizer/tokenizer.h"

namespace dsv4::structured {
namespace {

const tokenizer::Tokenizer* v4_tokenizer() {
    static const std::unique_ptr<tokenizer::Tokenizer> tokenizer = [] {
        std::unique_ptr<tokenizer::Tokenizer> t;
        if (std::filesystem::exists(DSV4_V4_TOKENIZER_JSON))
            t = std::make_unique<tokenizer::Tokenizer>(tokenizer::Tokenizer::load(DSV4_V4_TOKENIZER_JSON));
        return t;
    }();
    return tokenizer.get();
}

#define REQUIRE_V4_TOKENIZER()                                                                        \
    do {                                                                                              \
        if (v4_tokenizer() == nullptr) {                                                              \
            if (std::getenv("CI") != nullptr) FAIL() << DSV4_V4_TOKENIZER_JSON << " is missing";      \
            GTEST_SKIP() << DSV4_V4_TOKENIZER_JSON << " is missing (build target dsv4_v4_tokenizer)"; \
        }                                                                                             \
    } while (0)

int32_t eos_id() {
    return *v4_tokenizer()->token_to_id(chat_tokens::kEos);
}

GrammarCache& cache() {
    static GrammarCache c(make_vocabulary(*v4_tokenizer(), {eos_id()}, v4_tokenizer()->vocab_size()));
    return c;
}

bool is_blank(int32_t token) {
    const std::string_view bytes = v4_tokenizer()->token_bytes(token);
    return bytes.find_first_not_of(" \t\n\r") == std::string_view::npos;
}

// Walks a random path through the masks: a random allowed token (whitespace-only ones rarely: the vocabulary has
// thousands, which would fill the bounded whitespace first), or the end once allowed (half the time).
// Returns the generated ids without the end token, or nullopt when max_steps ran out.
std::optional<std::vector<int32_t>> random_walk(const GrammarSpec& spec, uint32_t seed, int max_steps) {
    auto constraint = cache().get(spec).constraint;
    auto state = constraint->start();
    std::mt19937 rng(seed);
    std::vector<uint64_t> mask(static_cast<size_t>((constraint->vocab_size() + 63) / 64));
    std::vector<int32_t> out;
    for (int step = 0; step < max_steps; ++step) {
        const TokenMaskSummary summary = state->fill_allowed(mask);
        if (summary.end_allowed && (!summary.any_token || rng() % 2 == 0)) return out;
        const std::vector<int32_t> ids = testing::allowed_ids(mask, constraint->vocab_size());
        EXPECT_FALSE(ids.empty());
        if (ids.empty()) return std::nullopt;
        std::vector<int32_t> words;
        for (int32_t id : ids) {
            if (id != eos_id() && !is_blank(id)) words.push_back(id);
        }
        const bool word = !words.empty() && rng() % 10 != 0;
        int32_t token = word ? words[rng() % words.size()] : ids[rng() % ids.size()];
        if (token == eos_id()) token = ids[(rng() % (ids.size() - 1) + 1) % ids.size()];
        EXPECT_TRUE(state->accept(token));
        out.push_back(token);
    }
    return std::nullopt;
}

TEST(V4Vocabulary, JsonSchemaWalksEndInValidJson) {
    REQUIRE_V4_TOKENIZER();
    GrammarSpec spec;
    spec.kind = GrammarKind::kJsonSchema;
    spec.text = R"({"type":"object","properties":{"level":{"enum":["low","high"]},
        "score":{"type":"integer","minimum":0,"maximum":99},"ok":{"type":"boolean"},
        "tags":{"type":"array","items":{"type":"string","maxLength":3},"maxItems":2}},
        "required":["level","score","ok"],"additionalProperties":false})";
    int completed = 0;
    for (uint32_t seed = 1; seed <= 4; ++seed) {
        const auto tokens = random_walk(spec, seed, 48);
        if (!tokens) continue;
        ++completed;
        const std::string text = v4_tokenizer()->decode(*tokens, false);
        const nlohmann::json value = nlohmann::json::parse(text, nullptr, false);
        ASSERT_FALSE(value.is_discarded()) << text;
        EXPECT_TRUE(value["level"] == "low" || value["level"] == "high") << text;
        EXPECT_TRUE(value["score"].is_number_integer() && value["score"] >= 0 && value["score"] <= 99) << text;
        EXPECT_TRUE(value["ok"].is_boolean()) << text;
        if (value.contains("tags")) {
            EXPECT_LE(value["tags"].size(), 2u) << text;
            for (const auto& tag : value["tags"]) EXPECT_TRUE(tag.is_string()) << text;
        }
        EXPECT_LE(value.size(), 4u) << text;
    }
    EXPECT_GT(completed, 0);
}

TEST(V4Vocabulary, ForcedToolCallsParseAndValidate) {
    REQUIRE_V4_TOKENIZER();
    GrammarSpec spec;
    spec.kind = GrammarKind::kToolCalls;
    spec.tools = {
        {"get_weather", R"({"type":"object","properties":{"city":{"type":"string","maxLength":8},
                      "days":{"type":"integer","minimum":1,"maximum":7}},"required":["city"]})"},
        {"get_time", R"({"type":"object","properties":{"zone":{"enum":["UTC","CET"]}},"required":["zone"]})"}};
    int completed = 0;
    for (uint32_t seed = 1; seed <= 6; ++seed) {
        const auto tokens = random_walk(spec, seed, 160);
        if (!tokens) continue;
        ++completed;
        const std::string text = v4_tokenizer()->decode(*tokens, false);
        const ParsedOutput parsed = parse_output(text);
        ASSERT_FALSE(parsed.tool_calls.empty()) << text;
        EXPECT_TRUE(parsed.content.empty()) << text;
        for (const ParsedToolCall& call : parsed.tool_calls) {
            EXPECT_TRUE(call.complete && !call.arguments_repaired) << text;
            const nlohmann::json args = nlohmann::json::parse(call.arguments, nullptr, false);
            ASSERT_TRUE(args.is_object()) << call.arguments;
            if (call.name == "get_weather") {
                EXPECT_TRUE(args["city"].is_string()) << text;
                if (args.contains("days")) {
                    EXPECT_TRUE(args["days"] >= 1 && args["days"] <= 7) << text;
                }
            } else {
                EXPECT_EQ(call.name, "get_time");
                EXPECT_TRUE(args["zone"] == "UTC" || args["zone"] == "CET") << text;
            }
        }
    }
    EXPECT_GT(completed, 0);
}

TEST(V4Vocabulary, ToolCallMaskEqualsBruteForceAtTheMarkup) {
    REQUIRE_V4_TOKENIZER();
    GrammarSpec spec;
    spec.kind = GrammarKind::kToolCalls;
    spec.tools = {{"f", ""}};
    const auto masker = cache().masker(spec);
    GrammarMatcher matcher(masker);
    ASSERT_TRUE(matcher.accept_bytes("\n\n<"));  // next: the DSML marker, as the added token or as bytes
    std::vector<uint64_t> bits(masker->words());
    matcher.fill_mask(bits);
    std::vector<uint64_t> brute(masker->words(), 0);
    for (int32_t t = 0; t < masker->vocabulary().mask_bits; ++t) {
        if (matcher.accept_token(t)) {
            brute[static_cast<size_t>(t) >> 6] |= uint64_t{1} << (t & 63);
            matcher.rollback(1);
        }
    }
    EXPECT_EQ(bits, brute);
    const int32_t dsml = *v4_tokenizer()->token_to_id(chat_tokens::kDsml);
    EXPECT_TRUE((bits[static_cast<size_t>(dsml) >> 6] >> (dsml & 63)) & 1);
}

// The per-state split (state_token_sets.h) against the whole-trie walk on the real vocabulary, along tokenized
// outputs of a nested schema and of JSON mode: strings with CJK, accents and an emoji (the V4 vocabulary has pieces
// that end inside those characters), numbers, nesting at several depths (one top state under different stacks).
TEST(V4Vocabulary, SplitMasksEqualTheFullWalk) {
    REQUIRE_V4_TOKENIZER();
    GrammarSpec nested;
    nested.kind = GrammarKind::kJsonSchema;
    nested.text = R"({"type":"object","required":["name","tags","items"],"additionalProperties":false,
        "properties":{"name":{"type":"string","maxLength":24},"tags":{"type":"array","items":{"type":"string"}},
        "items":{"type":"array","items":{"type":"object",
          "properties":{"sku":{"type":"string","pattern":"^[A-Z]{2}-[0-9]{3}$"},
          "price":{"type":"number","minimum":0},"note":{"type":"string"}},"required":["sku","price"]}}}})";
    GrammarSpec json_mode;
    json_mode.kind = GrammarKind::kJsonObject;
    const std::vector<std::pair<GrammarSpec, std::string>> cases = {
        {nested,
         "{\"name\": \"\xE5\xBC\xA0\xE4\xB8\x89 Caf\xC3\xA9\", \"tags\": [\"\xE6\x96\xB0\xE5\x93\x81\", \"ok "
         "\xF0\x9F\x98\x80\"], \"items\": [{\"sku\": \"AB-123\", \"price\": 19.5, \"note\": "
         "\"\xE4\xB8\xAD\xE6\x96\x87\"}, "
         "{\"sku\": \"CD-456\", \"price\": 3}]}"},
        {json_mode,
         "{\"a\": {\"b\": [1, {\"c\": \"\xE6\x97\xA5\xE6\x9C\xAC\xE8\xAA\x9E\"}], \"d\": \"d\xC3\xA9j\xC3\xA0\"}, "
         "\"e\": "
         "[[\"x\"], {\"f\": null}], \"g\": -0.5e3}"}};
    for (const auto& [spec, output] : cases) {
        const auto masker = cache().masker(spec);
        GrammarMatcher matcher(masker);
        StackArena arena;
        std::vector<Head> heads{{StackArena::kNone, masker->grammar().start_state()}}, next;
        std::vector<uint64_t> split(masker->words()), full(masker->words());
        const std::vector<int32_t> tokens = v4_tokenizer()->encode(output, true);
        for (size_t i = 0; i < tokens.size(); ++i) {
            masker->compute(arena, heads, split);
            masker->compute_by_full_walk(arena, heads, full);
            ASSERT_EQ(split, full) << output << " before token " << i;
            ASSERT_TRUE((split[static_cast<size_t>(tokens[i]) >> 6] >> (tokens[i] & 63)) & 1) << output << " " << i;
            for (char ch : v4_tokenizer()->token_bytes(tokens[i])) {
                step_heads(masker->grammar(), arena, heads, static_cast<uint8_t>(ch), next);
                heads.swap(next);
            }
        }
    }
}

}  // namespace
}  // namespace dsv4::structured
