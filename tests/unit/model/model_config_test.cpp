#include "config/model_config.h"

#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "model/tensor_spec.h"

namespace dsv4 {
namespace {

nlohmann::json read_json(const std::string& relative) {
    std::ifstream in(std::string(DSV4_SOURCE_DIR) + "/" + relative);
    return nlohmann::json::parse(in);
}

TEST(ModelConfig, FlashScheduleAndRope) {
    ModelConfig c = parse_model_config(read_json("tests/data/deepseek_v4_flash_config.json"));
    ASSERT_EQ(c.num_layers, 43);
    int sliding = 0, csa = 0, hca = 0, hash = 0;
    for (const auto& layer : c.layers) {
        sliding += layer.attention == AttentionType::kSliding;
        csa += layer.attention == AttentionType::kCsa;
        hca += layer.attention == AttentionType::kHca;
        hash += layer.routing == RoutingType::kHash;
    }
    EXPECT_EQ(sliding, 2);
    EXPECT_EQ(csa, 21);
    EXPECT_EQ(hca, 20);
    EXPECT_EQ(hash, 3);
    EXPECT_EQ(c.layers[2].attention, AttentionType::kCsa);
    EXPECT_EQ(c.layers[3].attention, AttentionType::kHca);
    EXPECT_EQ(c.layers[42].attention, AttentionType::kCsa);
    EXPECT_DOUBLE_EQ(c.layers[0].rope.theta, 10000.0);
    EXPECT_FALSE(c.layers[0].rope.yarn.has_value());
    EXPECT_DOUBLE_EQ(c.layers[2].rope.theta, 160000.0);
    ASSERT_TRUE(c.layers[2].rope.yarn.has_value());
    EXPECT_DOUBLE_EQ(c.layers[2].rope.yarn->factor, 16.0);
    EXPECT_EQ(c.layers[2].rope.yarn->original_max_position_embeddings, 65536);
    EXPECT_EQ(c.rope_head_dim, 64);
    EXPECT_EQ(c.expert_dtype, ExpertDtype::kFp4);
    EXPECT_FALSE(c.dspark.has_value());
}

TEST(ModelConfig, Revision0731HasDspark) {
    ModelConfig c = parse_model_config(read_json("tests/data/deepseek_v4_flash_0731_config.json"));
    ASSERT_TRUE(c.dspark.has_value());
    EXPECT_EQ(c.dspark->block_size, 5);
    EXPECT_EQ(c.dspark->noise_token_id, 128799);
    EXPECT_EQ(c.dspark->target_layer_ids, (std::vector<int>{40, 41, 42}));
}

TEST(ModelConfig, HfStyleKeys) {
    nlohmann::json j = read_json("tests/data/deepseek_v4_flash_config.json");
    std::vector<std::string> types;
    for (int r : j["compress_ratios"].get<std::vector<int>>()) {
        types.push_back(r == 0   ? "sliding_attention"
                        : r == 4 ? "compressed_sparse_attention"
                                 : "heavily_compressed_attention");
    }
    types.resize(43);
    j.erase("compress_ratios");
    j["layer_types"] = types;
    j.erase("num_hash_layers");
    std::vector<std::string> mlp(43, "moe");
    mlp[0] = mlp[1] = "hash_moe";
    j["mlp_layer_types"] = mlp;
    j.erase("rope_scaling");
    j["rope_parameters"] = {{"main", {{"rope_type", "default"}, {"rope_theta", 10000.0}}},
                            {"compress",
                             {{"rope_type", "yarn"},
                              {"rope_theta", 160000.0},
                              {"factor", 16},
                              {"original_max_position_embeddings", 65536},
                              {"attention_factor", 1.0}}}};
    ModelConfig c = parse_model_config(j);
    EXPECT_EQ(c.num_hash_layers, 2);
    EXPECT_EQ(c.layers[2].routing, RoutingType::kLearned);
    EXPECT_EQ(c.layers[3].attention, AttentionType::kHca);
    ASSERT_TRUE(c.layers[3].rope.yarn.has_value());
}

TEST(ModelConfig, ErrorsNameTheProblem) {
    nlohmann::json base = read_json("tests/data/deepseek_v4_flash_config.json");
    auto expect_error = [](nlohmann::json j, const std::string& fragment) {
        try {
            parse_model_config(j);
            ADD_FAILURE() << "no error for " << fragment;
        } catch (const Error& e) {
            EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
        }
    };
    auto j = base;
    j["model_type"] = "llama";
    expect_error(j, "model_type 'llama'");
    j = base;
    j.erase("hidden_size");
    expect_error(j, "'hidden_size'");
    j = base;
    j["compress_ratios"][5] = 7;
    expect_error(j, "compress_ratios[5] = 7");
    j = base;
    j["num_attention_heads"] = 60;
    expect_error(j, "o_groups");
    j = base;
    j["hidden_size"] = "big";
    expect_error(j, "wrong type");
    j = base;
    j["compress_ratios"] = {0, 4};
    expect_error(j, "compress_ratios has 2 entries");
    j = base;
    j["rope_scaling"]["attention_factor"] = 1.3;
    expect_error(j, "magnitude scaling");
}

TEST(TensorSpec, FlashShapesAndCounts) {
    ModelConfig c = parse_model_config(read_json("tests/data/deepseek_v4_flash_config.json"));
    auto specs = expected_tensors(c);
    auto find = [&](const std::string& name) -> const TensorSpec& {
        for (const auto& s : specs) {
            if (s.name == name) return s;
        }
        throw Error("missing " + name);
    };
    EXPECT_EQ(find("layers.0.attn.wq_b.scale").shape, (std::vector<int64_t>{256, 8}));
    EXPECT_EQ(find("layers.5.attn.wo_b.scale").shape, (std::vector<int64_t>{32, 64}));
    EXPECT_EQ(find("layers.3.ffn.experts.255.w2.weight").shape, (std::vector<int64_t>{4096, 1024}));
    EXPECT_EQ(find("layers.3.ffn.experts.255.w2.scale").shape, (std::vector<int64_t>{4096, 64}));
    EXPECT_EQ(find("layers.2.attn.indexer.compressor.ape").shape, (std::vector<int64_t>{4, 256}));
    EXPECT_EQ(find("layers.3.attn.compressor.ape").shape, (std::vector<int64_t>{128, 512}));
    EXPECT_EQ(find("layers.1.ffn.gate.tid2eid").shape, (std::vector<int64_t>{129280, 6}));
    int64_t params = 0, bytes = 0;
    for (const auto& s : specs) {
        params += s.params;
        int64_t n = 1;
        for (auto d : s.shape) n *= d;
        bytes += n * dtype_bits(s.dtype) / 8;
    }
    // model-spec 1.5 / 1.6: 284.33 B parameters and 156,015,698,140 bytes for the backbone with embed/head.
    EXPECT_NEAR(static_cast<double>(params) / 1e9, 284.33, 0.005);
    EXPECT_EQ(bytes, 156015698140);
}

}  // namespace
}  // namespace dsv4
