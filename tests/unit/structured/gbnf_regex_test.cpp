// GBNF and regex front ends: llama.cpp's syntax (rules, classes, escapes, repetitions, comments, newlines),
// errors with positions, regex semantics (full match vs. search, anchors, classes, escapes), refusals.
#include <gtest/gtest.h>

#include "structured/gbnf.h"
#include "structured/regex.h"
#include "structured_test_util.h"

namespace dsv4::structured {
namespace {

std::shared_ptr<const CompiledGrammar> gbnf(std::string_view text) {
    return testing::compile(parse_gbnf(text));
}

std::shared_ptr<const CompiledGrammar> regex(std::string_view pattern, bool search = false) {
    Grammar g;
    const int32_t root = g.add_rule("root");
    g.set_root(root);
    g.define(root, compile_regex(g, pattern, {RegexText::kRaw, search}));
    return testing::compile(g);
}

TEST(Gbnf, LlamaCppSyntax) {
    const auto g = gbnf(R"(# a comment
root ::= greeting (", " name){1,2} "!"   # trailing comment
greeting ::= "hi" | "h\u00e9llo" |
   "yo"
name ::= [A-Z] [a-z-]* | "\x41\"\n"
)");
    EXPECT_TRUE(testing::accepts(*g, "hi, Bob!"));
    EXPECT_TRUE(testing::accepts(*g, "h\xC3\xA9llo, Ann, Zed-x!"));
    EXPECT_TRUE(testing::accepts(*g, "yo, A\"\n!"));
    EXPECT_FALSE(testing::accepts(*g, "hi!"));
    EXPECT_FALSE(testing::accepts(*g, "hi, bob!"));
    const auto any = gbnf("root ::= [^a]{2} . ");
    EXPECT_TRUE(testing::accepts(*any,
                                 "\xE2\x82\xAC"
                                 "bz"));
    EXPECT_FALSE(testing::accepts(*any, "abz"));
}

TEST(Gbnf, ErrorsNameThePlace) {
    auto message = [](std::string_view text) {
        try {
            parse_gbnf(text);
        } catch (const GrammarError& e) {
            return std::string(e.what());
        }
        return std::string("accepted");
    };
    EXPECT_NE(message("root ::= \"a\"\nx ::= (\"b\"").find("line 2"), std::string::npos);
    EXPECT_NE(message("root ::= y").find("'y' is used but never defined"), std::string::npos);
    EXPECT_NE(message("x ::= \"a\"").find("no 'root'"), std::string::npos);
    EXPECT_NE(message("root ::= \"a\"\nroot ::= \"b\"").find("defined twice"), std::string::npos);
    EXPECT_NE(message("root ::= <think>").find("token references"), std::string::npos);
    EXPECT_NE(message("root ::= \"\\q\"").find("unknown escape"), std::string::npos);
    EXPECT_NE(message("root ::= \"a\"{3,1}").find("n < m"), std::string::npos);
}

TEST(Regex, FullMatchSearchAndAnchors) {
    const auto full = regex("[a-c]+\\d{2}(x|yz)?");
    EXPECT_TRUE(testing::accepts(*full, "ab12"));
    EXPECT_TRUE(testing::accepts(*full, "c00yz"));
    EXPECT_FALSE(testing::accepts(*full, "ab1"));
    EXPECT_FALSE(testing::accepts(*full, "xab12"));
    const auto search = regex("b\\.c", true);
    EXPECT_TRUE(testing::accepts(*search, "aab.cdd"));
    EXPECT_FALSE(testing::accepts(*search, "abxc"));
    const auto anchored = regex("^ab|cd$", true);
    EXPECT_TRUE(testing::accepts(*anchored, "abzzz"));
    EXPECT_TRUE(testing::accepts(*anchored, "zzzcd"));
    EXPECT_FALSE(testing::accepts(*anchored, "zabz"));
    const auto classes = regex("[^\\s\\d][\\w-]\\u00e9\\x41.");
    EXPECT_TRUE(testing::accepts(*classes,
                                 "x-\xC3\xA9"
                                 "A\xF0\x9F\x98\x80"));
    EXPECT_FALSE(testing::accepts(*classes,
                                  "1-\xC3\xA9"
                                  "Az"));
    EXPECT_FALSE(testing::accepts(*classes,
                                  "x-\xC3\xA9"
                                  "A\n"));  // . excludes line terminators
}

TEST(Regex, UnsupportedConstructsAreRefused) {
    for (const char* pattern : {"a(?=b)", "a(?<!b)", "(a)\\1", "\\bword", "\\p{L}", "(?i)a", "a)", "[b-a]", "a{2,1}"}) {
        Grammar g;
        EXPECT_THROW(compile_regex(g, pattern, {}), GrammarError) << pattern;
    }
}

}  // namespace
}  // namespace dsv4::structured
