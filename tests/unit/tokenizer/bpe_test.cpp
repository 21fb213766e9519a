// The BPE merge loop against a straightforward reference (apply the lowest-rank, leftmost pair until none is
// left), plus tokenizer.json model validation.
#include "tokenizer/bpe.h"

#include <gtest/gtest.h>

#include <climits>
#include <map>
#include <random>

#include "core/error.h"
#include "tokenizer_test_util.h"

namespace dsv4::tokenizer {
namespace {

using testing::tiny_tokenizer_json;

// Reference BPE: O(n^2) rescans, obviously correct.
std::vector<int32_t> reference_bpe(const BpeModel& model, const nlohmann::json& json, std::string_view bytes) {
    std::map<std::pair<int32_t, int32_t>, std::pair<int32_t, int32_t>> merges;  // pair -> (rank, id)
    const auto& list = json["model"]["merges"];
    for (size_t rank = 0; rank < list.size(); ++rank) {
        const std::string m = list[rank].get<std::string>();
        const size_t space = m.find(' ');
        const int32_t left = *model.token_to_id(m.substr(0, space));
        const int32_t right = *model.token_to_id(m.substr(space + 1));
        merges[{left, right}] = {static_cast<int32_t>(rank),
                                 *model.token_to_id(m.substr(0, space) + m.substr(space + 1))};
    }
    std::vector<int32_t> symbols;
    for (char c : bytes) symbols.push_back(*model.token_to_id(byte_level_encode(std::string(1, c))));
    while (true) {
        int32_t best_rank = INT32_MAX;
        size_t best_pos = 0;
        for (size_t i = 0; i + 1 < symbols.size(); ++i) {
            const auto it = merges.find({symbols[i], symbols[i + 1]});
            if (it != merges.end() && it->second.first < best_rank) {
                best_rank = it->second.first;
                best_pos = i;
            }
        }
        if (best_rank == INT32_MAX) return symbols;
        symbols[best_pos] = merges[{symbols[best_pos], symbols[best_pos + 1]}].second;
        symbols.erase(symbols.begin() + static_cast<std::ptrdiff_t>(best_pos) + 1);
    }
}

TEST(Bpe, MatchesReferenceOnRandomWords) {
    // Overlapping merges (a a, aa a, a aa...) make the order matter.
    const nlohmann::json json = tiny_tokenizer_json({{"a", "a"},
                                                     {"b", "c"},
                                                     {"aa", "a"},
                                                     {"a", "bc"},
                                                     {"aa", "aa"},
                                                     {"c", "a"},
                                                     {"abc", "aa"},
                                                     {"b", "b"},
                                                     {"bb", "b"},
                                                     {"ca", "bb"},
                                                     {"aaaa", "a"},
                                                     {"a", "b"},
                                                     {"ab", "ab"}});
    const BpeModel model = BpeModel::from_json(json["model"]);
    EXPECT_EQ(model.merge_count(), 13u);
    std::mt19937 rng(11);
    for (int round = 0; round < 3000; ++round) {
        std::string word;
        for (int i = std::uniform_int_distribution<int>(1, 24)(rng); i > 0; --i)
            word.push_back("abcx"[std::uniform_int_distribution<int>(0, 3)(rng)]);
        std::vector<int32_t> ids;
        model.encode_piece(word, ids);
        ASSERT_EQ(ids, reference_bpe(model, json, word)) << word;
        ids.clear();
        model.encode_piece(word, ids);  // second time through the cache
        ASSERT_EQ(ids, reference_bpe(model, json, word)) << word;
    }
}

TEST(Bpe, LongPieceIsLinearithmicNotQuadratic) {
    const nlohmann::json json = tiny_tokenizer_json({{"a", "a"}, {"aa", "aa"}, {"aaaa", "aaaa"}});
    const BpeModel model = BpeModel::from_json(json["model"]);
    std::vector<int32_t> ids;
    model.encode_piece(std::string(200000, 'a'), ids);
    EXPECT_EQ(ids.size(), 200000u / 8);
    EXPECT_EQ(ids.front(), *model.token_to_id("aaaaaaaa"));
}

TEST(Bpe, AcceptsPairMergesAndRejectsBadModels) {
    nlohmann::json json = tiny_tokenizer_json({{"a", "b"}});
    json["model"]["merges"] = nlohmann::json::array({nlohmann::json::array({"a", "b"})});
    const BpeModel model = BpeModel::from_json(json["model"]);
    std::vector<int32_t> ids;
    model.encode_piece("abab", ids);
    EXPECT_EQ(ids, (std::vector<int32_t>{256, 256}));

    auto rejects = [](nlohmann::json model_json, const char* what) {
        try {
            BpeModel::from_json(model_json);
            ADD_FAILURE() << "accepted a model with " << what;
        } catch (const Error& e) {
            SUCCEED() << e.what();
        }
    };
    nlohmann::json bad = json["model"];
    bad["merges"] = {"a b c"};
    rejects(bad, "a three-part merge");
    bad["merges"] = {"a z"};
    rejects(bad, "a merge of a token outside the vocabulary");
    bad = json["model"];
    bad["dropout"] = 0.1;
    rejects(bad, "dropout");
    bad = json["model"];
    bad["continuing_subword_prefix"] = "##";
    rejects(bad, "a subword prefix");
    bad = json["model"];
    bad["vocab"].erase(byte_level_encode(" "));
    rejects(bad, "a missing byte token");
    bad = json["model"];
    bad["vocab"]["huge"] = 2000000000;
    rejects(bad, "an id that would size the tables absurdly");
    bad = json["model"];
    bad["type"] = "WordPiece";
    rejects(bad, "another model type");
}

}  // namespace
}  // namespace dsv4::tokenizer
