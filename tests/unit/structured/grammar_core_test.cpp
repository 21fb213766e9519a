// The grammar engine below the front ends: automata built from the IR accept exactly their language, size limits
// and left recursion are refused, and token masks from the trie walk (cached and uncached) equal the brute-force
// mask on random vocabularies along random generations, with rollback restoring earlier masks.
#include <gtest/gtest.h>

#include "structured/gbnf.h"
#include "structured/json_schema.h"
#include "structured_test_util.h"

namespace dsv4::structured {
namespace {

using testing::accepts;
using testing::compile;

Grammar one_rule(const std::function<int32_t(Grammar&)>& body) {
    Grammar g;
    const int32_t root = g.add_rule("root");
    g.set_root(root);
    g.define(root, body(g));
    return g;
}

TEST(GrammarCore, RepetitionAlternationAndLiterals) {
    const auto g = compile(one_rule([](Grammar& b) {
        return b.seq({b.literal("ab"), b.repeat(b.alt({b.literal("x"), b.literal("yz")}), 1, 3), b.literal("!")});
    }));
    EXPECT_TRUE(accepts(*g, "abx!"));
    EXPECT_TRUE(accepts(*g, "abyzxyz!"));
    EXPECT_FALSE(accepts(*g, "ab!"));
    EXPECT_FALSE(accepts(*g, "abxxxx!"));
    EXPECT_FALSE(accepts(*g, "abx"));
    EXPECT_FALSE(accepts(*g, "abx!!"));
}

TEST(GrammarCore, RecursiveRulesNullableRulesAndTailCalls) {
    // balanced ::= ("(" balanced ")")* ; opt ::= "a"? ; root ::= opt balanced opt "."
    Grammar g;
    const int32_t root = g.add_rule("root");
    const int32_t balanced = g.add_rule("balanced");
    const int32_t opt = g.add_rule("opt");
    g.set_root(root);
    g.define(balanced, g.star(g.seq({g.literal("("), g.ref(balanced), g.literal(")")})));
    g.define(opt, g.optional(g.literal("a")));
    g.define(root, g.seq({g.ref(opt), g.ref(balanced), g.ref(opt), g.literal(".")}));
    const auto c = compile(g);
    for (const char* ok : {".", "a.", "()a.", "a(())().", "((()))a.", "aa."}) EXPECT_TRUE(accepts(*c, ok)) << ok;
    for (const char* bad : {"", "(.", "())", "aaa.", "(a)."}) EXPECT_FALSE(accepts(*c, bad)) << bad;
}

TEST(GrammarCore, IntersectionAndDifference) {
    const auto g = compile(one_rule([](Grammar& b) {
        const int32_t word = b.plus(b.bytes(ByteSet::range('a', 'c')));
        const int32_t three = b.repeat(b.bytes(ByteSet::all()), 3, 3);
        return b.seq(
            {b.intersect(word, three), b.literal("|"), b.difference(word, b.alt({b.literal("ab"), b.literal("c")}))});
    }));
    EXPECT_TRUE(accepts(*g, "abc|a"));
    EXPECT_TRUE(accepts(*g, "ccc|abc"));
    EXPECT_FALSE(accepts(*g, "ab|a"));
    EXPECT_FALSE(accepts(*g, "abc|ab"));
    EXPECT_FALSE(accepts(*g, "abc|c"));
}

TEST(GrammarCore, RefusesLeftRecursionAndEmptyLanguages) {
    EXPECT_THROW(compile(parse_gbnf("root ::= root \"a\" | \"b\"")), GrammarError);
    EXPECT_THROW(compile(parse_gbnf("root ::= x \"a\"\nx ::= y? root\ny ::= \"b\"")), GrammarError);
    EXPECT_THROW(compile(parse_gbnf("root ::= \"a\" root")), GrammarError);  // never completes
    EXPECT_THROW(compile(one_rule([](Grammar& g) { return g.bytes(ByteSet{}); })), GrammarError);
}

TEST(GrammarCore, ExponentialDeterminizationIsRefusedNotRun) {
    GrammarLimits limits;
    limits.max_dfa_states = 5000;
    Grammar small(limits);
    const int32_t root = small.add_rule("root");
    small.set_root(root);
    const int32_t ab = small.bytes(ByteSet::range('a', 'b'));
    small.define(root, small.seq({small.star(ab), small.literal("a"), small.repeat(ab, 20, 20)}));
    EXPECT_THROW(compile(small), GrammarError);
}

// The trie walk against the brute-force mask along random generations, for several grammars and vocabularies.
void check_masks_along_random_walks(const Grammar& grammar, const std::string& alphabet, uint32_t seed) {
    std::mt19937 rng(seed);
    const auto compiled = compile(grammar);
    for (int round = 0; round < 3; ++round) {
        const auto vocabulary = testing::random_vocabulary(rng, alphabet, 300, 5);
        auto masker = std::make_shared<const TokenMasker>(compiled, vocabulary, std::vector<int32_t>{});
        GrammarMatcher matcher(masker);
        std::vector<std::vector<uint64_t>> history;
        for (int step = 0; step < 40; ++step) {
            std::vector<uint64_t> cached(masker->words()), direct(masker->words());
            const MaskSummary summary = matcher.fill_mask(cached);
            const std::vector<uint64_t> brute = testing::brute_force_mask(matcher);
            ASSERT_EQ(cached, brute) << "seed " << seed << " round " << round << " step " << step;
            const auto allowed = testing::allowed_ids(brute, vocabulary->mask_bits);
            ASSERT_FALSE(allowed.empty()) << "dead end at step " << step;
            EXPECT_EQ(summary.end_allowed, matcher.can_end());
            history.push_back(cached);
            std::uniform_int_distribution<size_t> pick(0, allowed.size() - 1);
            const int32_t token = allowed[pick(rng)];
            ASSERT_TRUE(matcher.accept_token(token));
            if (matcher.terminated()) break;
        }
        // Rolling back gives the earlier masks again.
        const int back = std::min<int>(5, matcher.num_accepted());
        matcher.rollback(back);
        std::vector<uint64_t> again(masker->words());
        matcher.fill_mask(again);
        EXPECT_EQ(again, history[static_cast<size_t>(matcher.num_accepted())]);
    }
}

TEST(GrammarCore, TrieMasksEqualBruteForceOnJsonSchema) {
    JsonSchemaOptions options;
    options.max_whitespace = 2;
    const Grammar g = compile_json_schema(
        R"({"type":"object","properties":{"a":{"type":"integer","minimum":-5,"maximum":120},
            "b":{"type":"array","items":{"enum":["x","yy",null]},"maxItems":3},
            "c":{"type":"string","maxLength":4}},"required":["a"]})",
        options);
    check_masks_along_random_walks(g, "{}[]\":,ab c xy-0123456789.nul", 11);
}

TEST(GrammarCore, TrieMasksEqualBruteForceOnRecursiveGbnf) {
    const Grammar g = parse_gbnf(R"(root ::= list
list ::= "[" (item ("," item)*)? "]"
item ::= list | [a-c]+ | "n" "u"? )");
    check_masks_along_random_walks(g, "[],abcnu", 23);
}

TEST(GrammarCore, TokensEndingInsideUtf8Characters) {
    // "é" is C3 A9 and "€" E2 82 AC: tokens split them anywhere and masks still follow the bytes.
    const Grammar g = parse_gbnf("root ::= [é€]+ \"!\"");
    const auto compiled = compile(g);
    auto vocabulary = make_vocabulary({"", "\xC3", "\xA9", "\xE2\x82", "\xAC!", "\xC3\xA9\xE2", "!", "e"}, {0}, 8);
    auto masker = std::make_shared<const TokenMasker>(compiled, vocabulary, std::vector<int32_t>{});
    GrammarMatcher m(masker);
    std::vector<uint64_t> bits(masker->words());
    m.fill_mask(bits);
    EXPECT_EQ(testing::allowed_ids(bits, 8), (std::vector<int32_t>{1, 3, 5}));
    ASSERT_TRUE(m.accept_token(5));  // é + first byte of €
    m.fill_mask(bits);
    EXPECT_EQ(testing::allowed_ids(bits, 8), (std::vector<int32_t>{}));  // needs 82 AC: no token starts with 82
    m.rollback(1);
    ASSERT_TRUE(m.accept_token(3));  // E2 82
    m.fill_mask(bits);
    EXPECT_EQ(testing::allowed_ids(bits, 8), (std::vector<int32_t>{4}));
    ASSERT_TRUE(m.accept_token(4));
    EXPECT_TRUE(m.can_end());
    m.fill_mask(bits);
    EXPECT_EQ(testing::allowed_ids(bits, 8), (std::vector<int32_t>{0}));  // only the end token
}

}  // namespace
}  // namespace dsv4::structured
