// The per-state split of the vocabulary (state_token_sets.h) against the full trie walk it replaces: at every
// configuration met, TokenMasker::compute() (split + dependent subtrees) must give exactly the mask and summary of
// compute_by_full_walk(). Configurations come from the JSON-Schema-Test-Suite's valid instances (stepped a byte at a
// time, so also from inside UTF-8 characters) over vocabularies cut from those instances at random byte offsets
// (tokens that start or end inside a character, tokens that cross the end of a rule), from random walks through
// random grammars, and from nesting at the stack-depth limit, where the split must give way to the full walk.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "structured/gbnf.h"
#include "structured/json_schema.h"
#include "structured_test_util.h"

namespace dsv4::structured {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

// A matcher configuration driven directly (GrammarMatcher keeps its stacks private).
struct Configuration {
    explicit Configuration(const CompiledGrammar& g) : grammar(&g), heads{{StackArena::kNone, g.start_state()}} {}

    bool step(std::string_view bytes) {
        std::vector<Head> next;
        for (char ch : bytes) {
            step_heads(*grammar, arena, heads, static_cast<uint8_t>(ch), next);
            if (next.empty()) return false;
            heads.swap(next);
        }
        return true;
    }

    const CompiledGrammar* grammar;
    StackArena arena;
    std::vector<Head> heads;
};

// Compares the two paths at one configuration; returns the mask for the caller to walk on.
std::vector<uint64_t> expect_split_equals_full_walk(const TokenMasker& masker, const Configuration& config,
                                                    const std::string& where) {
    std::vector<uint64_t> split(masker.words(), ~uint64_t{0}), full(masker.words(), ~uint64_t{0});
    const MaskSummary a = masker.compute(config.arena, config.heads, split);
    const MaskSummary b = masker.compute_by_full_walk(config.arena, config.heads, full);
    EXPECT_EQ(split, full) << where;
    EXPECT_EQ(a.any_token, b.any_token) << where;
    EXPECT_EQ(a.end_allowed, b.end_allowed) << where;
    return full;
}

// Characters split across tokens: é (C3 A9), € (E2 82 AC), 💩 (F0 9F 92 A9), 中 (E4 B8 AD), with quotes and
// brackets around them, so tokens start and end inside characters and cross into what follows a string.
std::vector<std::string> utf8_pieces() {
    return {"\xC3",     "\xA9",         "\xC3\xA9",     "\xE2",     "\x82\xAC", "\xE2\x82", "\xAC\"",
            "\xF0\x9F", "\x92\xA9\"",   "\x9F\x92\xA9", "\xE4\xB8", "\xAD",     "\"\xE4",   "\xA9\"}",
            "\"\xC3",   "\xE4\xB8\xAD", "\xAC\",\"",    "\xA9]",    "é€",       "中\"]"};
}

// A vocabulary for some texts: every byte they use, random cuts of them (1-6 bytes at any offset), the UTF-8
// pieces and JSON punctuation runs. Token 0 is the end token.
std::shared_ptr<const TokenVocabulary> vocabulary_from(const std::vector<std::string>& texts, std::mt19937& rng) {
    std::vector<std::string> pieces{""};
    std::vector<bool> byte_seen(256, false);
    for (const std::string& text : texts) {
        for (char ch : text) byte_seen[static_cast<uint8_t>(ch)] = true;
    }
    for (int b = 1; b < 256; ++b) {
        if (byte_seen[static_cast<size_t>(b)]) pieces.emplace_back(1, static_cast<char>(b));
    }
    for (const std::string& text : texts) {
        if (text.empty()) continue;
        for (int i = 0; i < 12; ++i) {
            const size_t begin = rng() % text.size();
            const size_t length = 1 + rng() % 6;
            pieces.push_back(text.substr(begin, length));
        }
    }
    for (std::string piece : utf8_pieces()) pieces.push_back(std::move(piece));
    for (const char* run : {"\":", "\",", "\"}", "\"]", "},", "],", "{\"", "[\"", "[[", "]]", "}}", "\"\"", "0.", "-1",
                            "e+", "true", "null", ", \""}) {
        pieces.emplace_back(run);
    }
    std::sort(pieces.begin() + 1, pieces.end());
    pieces.erase(std::unique(pieces.begin() + 1, pieces.end()), pieces.end());
    const auto bits = static_cast<int64_t>(pieces.size()) + 2;
    return make_vocabulary(std::move(pieces), {0}, bits);
}

int check_instances(const CompiledGrammar& grammar, const TokenMasker& masker, const std::vector<std::string>& texts,
                    const std::string& where) {
    int configurations = 0;
    for (const std::string& text : texts) {
        Configuration config(grammar);
        for (size_t i = 0; i <= text.size(); ++i) {
            expect_split_equals_full_walk(masker, config, fmt::format("{} / {} at byte {}", where, text, i));
            ++configurations;
            if (i < text.size() && !config.step(text.substr(i, 1))) break;
        }
    }
    return configurations;
}

TEST(StateTokenSets, EqualsTheFullWalkOnTheJsonSchemaTestSuite) {
    const fs::path suite = DSV4_JSON_SCHEMA_TEST_SUITE;
    if (!fs::is_directory(suite)) {
        if (std::getenv("CI") != nullptr) FAIL() << suite << " is missing: scripts/install-deps.sh installs it";
        GTEST_SKIP() << suite << " is missing (apt-get install json-schema-test-suite)";
    }
    std::vector<fs::path> files;
    for (const auto& entry : fs::directory_iterator(suite)) {
        if (entry.path().extension() == ".json") files.push_back(entry.path());
    }
    for (const char* format : {"date", "time", "date-time", "ipv4", "email", "hostname"})
        files.push_back(suite / "optional" / "format" / (std::string(format) + ".json"));
    std::sort(files.begin(), files.end());
    JsonSchemaOptions options;
    options.strict = false;
    options.ref_siblings_ignored = true;
    options.max_whitespace = 1;
    std::mt19937 rng(7);
    int groups = 0, configurations = 0;
    for (const fs::path& file : files) {
        std::ifstream in(file);
        for (const Json& group : Json::parse(in)) {
            std::shared_ptr<const CompiledGrammar> grammar;
            try {
                grammar = testing::compile(compile_json_schema(group["schema"].dump(), options));
            } catch (const GrammarError&) {
                continue;  // refused or matches nothing: nothing to mask
            }
            std::vector<std::string> texts;
            for (const Json& test : group["tests"]) {
                const std::string text = test["data"].dump();
                if (test["valid"].get<bool>() && grammar_accepts(*grammar, text)) texts.push_back(text);
            }
            if (texts.empty()) continue;
            auto masker =
                std::make_shared<const TokenMasker>(grammar, vocabulary_from(texts, rng), std::vector<int32_t>{});
            configurations += check_instances(
                *grammar, *masker, texts,
                fmt::format("{}: {}", file.filename().string(), group["description"].get<std::string>()));
            ++groups;
        }
    }
    EXPECT_GT(groups, 60);
    std::printf("split vs full walk: %d schemas, %d configurations\n", groups, configurations);
}

// A random grammar over a few literals (multi-byte characters among them), byte ranges and rule references.
class RandomGrammar {
  public:
    explicit RandomGrammar(uint32_t seed) : rng_(seed) {}

    Grammar build() {
        Grammar g;
        const int rules = 2 + static_cast<int>(rng_() % 4);
        for (int r = 0; r < rules; ++r) g.add_rule(fmt::format("r{}", r));
        g.set_root(0);
        for (int r = 0; r < rules; ++r) g.define(r, expression(g, rules, 3));
        return g;
    }

  private:
    int32_t expression(Grammar& g, int rules, int depth) {
        const uint32_t pick = depth == 0 ? rng_() % 3 : rng_() % 8;
        switch (pick) {
            case 0: {
                static const char* kLiterals[] = {"a", "b",        "ab",           "[",  "]",
                                                  ",", "\xC3\xA9", "\xE2\x82\xAC", "\"", "x\xC3\xA9"};
                return g.literal(kLiterals[rng_() % std::size(kLiterals)]);
            }
            case 1:
                return g.bytes(rng_() % 2 == 0 ? ByteSet::range('a', 'c') : ByteSet::range(0x80, 0xBF));
            case 2:
                return g.ref(static_cast<int32_t>(rng_() % static_cast<uint32_t>(rules)));
            case 3:
            case 4: {
                std::vector<int32_t> parts;
                for (int i = 0, n = 2 + static_cast<int>(rng_() % 2); i < n; ++i)
                    parts.push_back(expression(g, rules, depth - 1));
                return g.seq(std::move(parts));
            }
            case 5: {
                std::vector<int32_t> parts;
                for (int i = 0, n = 2 + static_cast<int>(rng_() % 2); i < n; ++i)
                    parts.push_back(expression(g, rules, depth - 1));
                return g.alt(std::move(parts));
            }
            case 6:
                return g.repeat(expression(g, rules, depth - 1), static_cast<int32_t>(rng_() % 2),
                                rng_() % 2 == 0 ? -1 : 3);
            default:
                return g.optional(expression(g, rules, depth - 1));
        }
    }

    std::mt19937 rng_;
};

// Random grammars can be very ambiguous; walks stop before the matcher would refuse (1024 parses).
constexpr size_t kMaxParses = 64;

TEST(StateTokenSets, EqualsTheFullWalkAndBruteForceOnRandomGrammars) {
    int compiled = 0, configurations = 0;
    for (uint32_t seed = 1; seed <= 200; ++seed) {
        std::shared_ptr<const CompiledGrammar> grammar;
        try {
            grammar = testing::compile(RandomGrammar(seed).build());
        } catch (const GrammarError&) {
            continue;  // left-recursive or empty: refused at compile time
        }
        ++compiled;
        std::mt19937 rng(seed);
        const std::string alphabet = "ab[],\"x\xC3\xA9\xE2\x82\xAC";
        auto vocabulary = testing::random_vocabulary(rng, alphabet, 160, 5);
        auto masker = std::make_shared<const TokenMasker>(grammar, vocabulary, std::vector<int32_t>{});
        for (int walk = 0; walk < 3; ++walk) {
            GrammarMatcher matcher(masker);
            Configuration config(*grammar);
            for (int step = 0; step < 30 && config.heads.size() <= kMaxParses; ++step) {
                const std::string where = fmt::format("seed {} walk {} step {}", seed, walk, step);
                const std::vector<uint64_t> mask = expect_split_equals_full_walk(*masker, config, where);
                ++configurations;
                std::vector<uint64_t> cached(masker->words()), brute;
                matcher.fill_mask(cached);
                try {
                    brute = testing::brute_force_mask(matcher);
                } catch (const Error&) {
                    break;  // some token makes too many parses for the matcher: not what this test is about
                }
                ASSERT_EQ(cached, brute) << where;
                std::vector<int32_t> allowed = testing::allowed_ids(mask, vocabulary->mask_bits);
                allowed.erase(std::remove(allowed.begin(), allowed.end(), 0), allowed.end());  // not the end token
                if (allowed.empty()) break;
                const int32_t token = allowed[rng() % allowed.size()];
                ASSERT_TRUE(matcher.accept_token(token)) << where;
                ASSERT_TRUE(config.step(*masker->token_bytes(token))) << where;
            }
        }
    }
    EXPECT_GT(compiled, 80);
    std::printf("split vs full walk: %d random grammars, %d configurations\n", compiled, configurations);
}

TEST(StateTokenSets, GivesWayToTheFullWalkAtTheStackDepthLimit) {
    // Each "[" pushes a frame; kMaxStackDepth frames are the most a stack may hold, so "[" stops being allowed there.
    const auto grammar = testing::compile(parse_gbnf(R"(root ::= "[" root? "]" | "a")"));
    auto vocabulary = make_vocabulary({"", "[", "]", "[[", "]]", "[[[[", "a", "a]", "[a", "[[a]"}, {0}, 10);
    auto masker = std::make_shared<const TokenMasker>(grammar, vocabulary, std::vector<int32_t>{});
    Configuration config(*grammar);
    bool limit_reached = false;
    for (uint32_t depth = 0; depth < kMaxStackDepth + 4; ++depth) {
        const std::vector<uint64_t> mask =
            expect_split_equals_full_walk(*masker, config, fmt::format("nesting depth {}", depth));
        if (!((mask[0] >> 1) & 1)) {  // "[" is no longer allowed
            limit_reached = true;
            break;
        }
        ASSERT_TRUE(config.step("["));
    }
    EXPECT_TRUE(limit_reached);
}

TEST(StateTokenSets, WithoutABudgetEveryMaskIsAFullWalk) {
    const auto grammar = testing::compile(parse_gbnf(R"(root ::= "{" (item ("," item)*)? "}"
item ::= "\"" [a-z\u00e9]* "\"" | root)"));
    std::mt19937 rng(3);
    auto vocabulary = vocabulary_from({"{\"ab\",{\"\xC3\xA9\"},\"\"}"}, rng);
    auto no_budget =
        std::make_shared<const TokenMasker>(grammar, vocabulary, std::vector<int32_t>{}, kDefaultMaskCacheBytes, 0);
    auto with_budget = std::make_shared<const TokenMasker>(grammar, vocabulary, std::vector<int32_t>{});
    Configuration config(*grammar);
    for (char ch : std::string("{\"ab\",{\"\xC3\xA9\"},\"\"}")) {
        std::vector<uint64_t> a(no_budget->words()), b(with_budget->words());
        no_budget->compute(config.arena, config.heads, a);
        with_budget->compute(config.arena, config.heads, b);
        EXPECT_EQ(a, b);
        ASSERT_TRUE(config.step(std::string(1, ch)));
    }
    EXPECT_EQ(no_budget->state_token_sets().entries(), 0u);
    EXPECT_GT(with_budget->state_token_sets().entries(), 0u);
}

}  // namespace
}  // namespace dsv4::structured
