// The Tokenizer on DeepSeek's real tokenizer.json files: known ids (V3 from the JS reference; V4 from
// HF-generated vectors and model-spec 6.1), added-token modes, round trips, errors and concurrent use.
#include <gtest/gtest.h>

#include <atomic>
#include <fstream>
#include <thread>

#include "core/error.h"
#include "tokenizer_test_util.h"

namespace dsv4::tokenizer {
namespace {

using Ids = std::vector<int32_t>;

TEST(DeepSeekV3Tokenizer, KnownIds) {
    const Tokenizer* tok = testing::deepseek_v3();
    DSV4_REQUIRE_TOKENIZER(tok, DSV4_V3_TOKENIZER_JSON);
    EXPECT_EQ(tok->encode("hi"), (Ids{6366}));
    EXPECT_EQ(tok->encode("Hello, world! <｜User｜>hi 123456"),
              (Ids{19923, 14, 2058, 3, 223, 128803, 6366, 223, 6895, 18009}));
    EXPECT_EQ(tok->encode(""), Ids{});
    EXPECT_EQ(tok->vocab_size(), 128815);
    EXPECT_EQ(tok->token_to_id("<｜end▁of▁sentence｜>"), 1);
    EXPECT_EQ(tok->token_to_id("Ġworld"), 2058);
    EXPECT_EQ(tok->token_to_id("no such token"), std::nullopt);
    EXPECT_EQ(tok->id_to_token(2058), "Ġworld");
    EXPECT_EQ(tok->id_to_token(128803), "<｜User｜>");
    EXPECT_THROW(tok->id_to_token(-1), Error);
    EXPECT_TRUE(tok->is_special(0));
    EXPECT_FALSE(tok->is_special(128803));  // V3 marks the chat tokens special=false
    EXPECT_TRUE(tok->is_added(128803));
    EXPECT_FALSE(tok->is_added(2058));
}

TEST(DeepSeekV3Tokenizer, AddedTokenModes) {
    const Tokenizer* tok = testing::deepseek_v3();
    DSV4_REQUIRE_TOKENIZER(tok, DSV4_V3_TOKENIZER_JSON);
    const std::string text = "<｜begin▁of▁sentence｜>x<｜User｜>";
    const Ids all = tok->encode(text, AddedTokenMode::kAll);
    EXPECT_EQ(all.front(), 0);
    EXPECT_EQ(all.back(), 128803);
    const Ids non_special = tok->encode(text, AddedTokenMode::kNonSpecial);
    EXPECT_NE(non_special.front(), 0);          // BOS is special: left as text
    EXPECT_EQ(non_special.back(), 128803);      // <｜User｜> is not
    const Ids none = tok->encode(text, false);  // parse_special=false: nothing is an added token
    for (int32_t id : none) EXPECT_FALSE(tok->is_added(id)) << id;
    EXPECT_EQ(tok->decode(none, true), text);
}

TEST(DeepSeekV3Tokenizer, DecodeRoundTripsValidText) {
    const Tokenizer* tok = testing::deepseek_v3();
    DSV4_REQUIRE_TOKENIZER(tok, DSV4_V3_TOKENIZER_JSON);
    for (const char* text :
         {"plain text", "  leading and trailing  ", "中文 かな 한국어 العربية",
          "👨‍👩‍👧‍👦 🇺🇸 1️⃣", "e\u0301\u0302 \u00a0\u3000\t\r\n",
          "<｜User｜>q<｜Assistant｜>a<｜end▁of▁sentence｜>", "def f(x):\n    return x ** 2  # ok\n"}) {
        EXPECT_EQ(tok->decode(tok->encode(text), false), text);
    }
    EXPECT_EQ(tok->decode(tok->encode("<｜begin▁of▁sentence｜>a"), true), "a");
}

TEST(DeepSeekV3Tokenizer, RejectsInvalidUtf8) {
    const Tokenizer* tok = testing::deepseek_v3();
    DSV4_REQUIRE_TOKENIZER(tok, DSV4_V3_TOKENIZER_JSON);
    try {
        tok->encode("ok \xC3(");
        FAIL() << "accepted invalid UTF-8";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("byte offset 3"), std::string::npos) << e.what();
    }
}

TEST(DeepSeekV3Tokenizer, ConcurrentEncodesAgree) {
    const Tokenizer* tok = testing::deepseek_v3();
    DSV4_REQUIRE_TOKENIZER(tok, DSV4_V3_TOKENIZER_JSON);
    std::vector<std::string> texts;
    for (int i = 0; i < 200; ++i)
        texts.push_back("item " + std::to_string(i * 7919) + ": the quick brown fox 中文" + std::string(i % 7, ' ') +
                        "<｜User｜>" + std::to_string(i));
    std::vector<Ids> expected;
    for (const auto& t : texts) expected.push_back(tok->encode(t));
    std::vector<std::thread> threads;
    std::atomic<int> mismatches{0};
    for (int t = 0; t < 4; ++t) {
        threads.emplace_back([&, t] {
            for (int round = 0; round < 5; ++round)
                for (size_t i = (t * 13) % texts.size(), n = 0; n < texts.size(); ++n, i = (i + 1) % texts.size())
                    if (tok->encode(texts[i]) != expected[i]) ++mismatches;
        });
    }
    for (auto& th : threads) th.join();
    EXPECT_EQ(mismatches.load(), 0);
}

TEST(DeepSeekV4Tokenizer, SpecialTokenIdsFromModelSpec) {
    const Tokenizer* tok = testing::deepseek_v4();
    DSV4_REQUIRE_TOKENIZER(tok, DSV4_V4_TOKENIZER_JSON);
    EXPECT_EQ(tok->vocab_size(), 129280);
    EXPECT_EQ(tok->added_tokens().size(), 1283u);
    const std::pair<const char*, int32_t> known[] = {{"<｜begin▁of▁sentence｜>", 0},
                                                     {"<｜end▁of▁sentence｜>", 1},
                                                     {"<｜User｜>", 128803},
                                                     {"<｜Assistant｜>", 128804},
                                                     {"<think>", 128821},
                                                     {"</think>", 128822},
                                                     {"｜DSML｜", 128825},
                                                     {"<｜latest_reminder｜>", 128828},
                                                     {"<｜action｜>", 128829},
                                                     {"<｜query｜>", 128830},
                                                     {"<｜authority｜>", 128831},
                                                     {"<｜domain｜>", 128832},
                                                     {"<｜title｜>", 128836},
                                                     {"<｜extracted_url｜>", 128844},
                                                     {"<｜read_url｜>", 128845}};
    for (const auto& [text, id] : known) {
        EXPECT_EQ(tok->token_to_id(text), id) << text;
        EXPECT_EQ(tok->encode(text), Ids{id}) << text;
    }
    EXPECT_TRUE(tok->has_id(128799));  // the DSpark noise id is a (placeholder) token
    for (int32_t id = 128000; id < 129280; ++id) EXPECT_TRUE(tok->is_added(id)) << id;
}

TEST(DeepSeekV4Tokenizer, DsmlTagsAreTextAroundOneToken) {
    const Tokenizer* tok = testing::deepseek_v4();
    DSV4_REQUIRE_TOKENIZER(tok, DSV4_V4_TOKENIZER_JSON);
    Ids expected{30, 128825};
    const Ids invoke = tok->encode("invoke");
    expected.insert(expected.end(), invoke.begin(), invoke.end());
    EXPECT_EQ(tok->encode("<｜DSML｜invoke"), expected);
    EXPECT_EQ(invoke, (Ids{40148, 5406}));
}

TEST(DeepSeekV4Tokenizer, HfGeneratedVectors) {
    const Tokenizer* tok = testing::deepseek_v4();
    DSV4_REQUIRE_TOKENIZER(tok, DSV4_V4_TOKENIZER_JSON);
    // Ids produced by HF tokenizers with DeepSeek-V4-Flash's own tokenizer.json (public test vectors).
    EXPECT_EQ(tok->encode("The capital of France is"), (Ids{671, 6102, 294, 8760, 344}));
    EXPECT_EQ(tok->encode("<｜DSML｜invoke name=\"f\">"), (Ids{30, 128825, 40148, 5406, 2329, 1281, 72, 3320}));
    EXPECT_EQ(tok->encode("｜DSML｜tool_calls"), (Ids{128825, 72461, 4941, 12548}));
    EXPECT_EQ(tok->encode("<think>reasoning</think>answer"), (Ids{128821, 86512, 288, 128822, 19995}));
    EXPECT_EQ(tok->encode("<｜User｜>你好<｜Assistant｜><think>推理</think>答案<｜end▁of▁sentence｜>"),
              (Ids{128803, 30594, 128804, 128821, 36101, 128822, 7624, 1}));
    EXPECT_EQ(tok->encode("1234567890"), (Ids{6895, 18009, 25744, 18}));
    EXPECT_EQ(tok->encode("\r\n"), (Ids{204, 201}));
    EXPECT_EQ(tok->encode("\t\t x"), (Ids{998, 1527}));
}

TEST(TokenizerLoad, ReportsBadFiles) {
    auto message_of = [](auto&& action) {
        try {
            action();
        } catch (const Error& e) {
            return std::string(e.what());
        }
        return std::string("(no error)");
    };
    EXPECT_NE(message_of([] { Tokenizer::load("/nonexistent/tokenizer.json"); }).find("cannot open"),
              std::string::npos);
    EXPECT_NE(message_of([] { Tokenizer::from_json_text("{not json"); }).find("not valid JSON"), std::string::npos);
    nlohmann::json json = testing::tiny_tokenizer_json({{"a", "b"}});
    json["normalizer"] = {{"type", "Lowercase"}};
    EXPECT_NE(message_of([&] { Tokenizer::from_json_text(json.dump()); }).find("normalizer"), std::string::npos);
    json = testing::tiny_tokenizer_json({{"a", "b"}});
    json["decoder"] = {{"type", "WordPiece"}};
    EXPECT_NE(message_of([&] { Tokenizer::from_json_text(json.dump()); }).find("decoder"), std::string::npos);
    json = testing::tiny_tokenizer_json({{"a", "b"}});
    json["normalizer"] = {{"type", "Sequence"}, {"normalizers", nlohmann::json::array()}};
    const Tokenizer tiny = Tokenizer::from_json_text(json.dump());
    EXPECT_EQ(tiny.encode("abab c"), (Ids{256, 256, ' ', 'c'}));
    EXPECT_EQ(tiny.vocab_size(), 257);
}

}  // namespace
}  // namespace dsv4::tokenizer
