// Weight binding: exact match, every kind of problem reported at once, grouping, HF renames, stacked experts, drafts.
#include "model/weight_binding.h"

#include <gtest/gtest.h>

#include "core/error.h"
#include "error_matchers.h"
#include "tiny_model.h"

namespace dsv4 {
namespace {

using test::expect_error;
using test::TempDir;

const DraftLayout kMtp1{DraftKind::kMtp, 1};

std::string same_name(const TensorSpec& spec) {
    return spec.name;
}
std::string hf_name(const TensorSpec& spec) {
    return hf_tensor_name(spec.name, spec.is_scale);
}

class WeightBindingTest : public ::testing::Test {
  protected:
    ModelConfig config_ = parse_model_config(test::tiny_config_json());
    std::vector<TensorSpec> specs_ = expected_tensors(config_, kMtp1);
    TempDir dir_;
};

TEST_F(WeightBindingTest, ExactOriginalCheckpointBinds) {
    test::write_checkpoint(dir_.path(), specs_, same_name);
    Checkpoint checkpoint = Checkpoint::open(dir_.path());
    BoundWeights bound = bind_weights(config_, checkpoint);
    EXPECT_EQ(bound.naming, CheckpointNaming::kOriginal);
    EXPECT_EQ(bound.drafts.kind, DraftKind::kMtp);
    EXPECT_EQ(bound.drafts.stages, 1);
    EXPECT_EQ(bound.size(), specs_.size());
    EXPECT_EQ(bound.specs.size(), specs_.size());
    EXPECT_EQ(&bound.get("layers.1.attn.indexer.wq_b.scale"), checkpoint.find("layers.1.attn.indexer.wq_b.scale"));
    EXPECT_EQ(&bound.get("mtp.0.e_proj.weight"), checkpoint.find("mtp.0.e_proj.weight"));
    EXPECT_EQ(bound.find("layers.9.attn.wkv.weight"), nullptr);
    expect_error([&] { bound.get("nope"); }, {"'nope'"});
    BindingReport report = validate_weights(config_, checkpoint);
    EXPECT_TRUE(report.ok()) << report.describe();
    EXPECT_EQ(report.expected, specs_.size());
    EXPECT_EQ(report.matched, specs_.size());
}

TEST_F(WeightBindingTest, EveryProblemIsReportedAtOnce) {
    auto rename = [](const TensorSpec& spec) -> std::string {
        if (spec.name == "layers.1.attn.wkv.scale" || spec.name == "norm.weight") return "";  // missing
        return spec.name;
    };
    // Wrong dtype (bias as BF16), wrong shape (q_norm [129]) and one tensor nobody expects.
    std::vector<TensorSpec> specs = specs_;
    for (auto& spec : specs) {
        if (spec.name == "layers.2.ffn.gate.bias") spec.dtype = DType::kBF16;
        if (spec.name == "layers.0.attn.q_norm.weight") spec.shape = {129};
    }
    test::write_checkpoint(dir_.path(), specs, rename, {test::zero_tensor("layers.0.attn.extra", DType::kF32, {2})});
    Checkpoint checkpoint = Checkpoint::open(dir_.path());
    BindingReport report = validate_weights(config_, checkpoint);
    EXPECT_FALSE(report.ok());
    EXPECT_EQ(report.missing.size(), 2u);
    EXPECT_EQ(report.unexpected.size(), 1u);
    EXPECT_EQ(report.wrong.size(), 2u);
    EXPECT_EQ(report.matched, specs_.size() - 4);
    expect_error([&] { bind_weights(config_, checkpoint); },
                 {dir_.path().string(), "2 missing, 1 unexpected, 2 wrong dtype/shape",
                  "'layers.1.attn.wkv.scale'  F8_E8M0 [1, 2]", "'norm.weight'  BF16 [256]",
                  "'layers.0.attn.extra'  F32 [2]", "'layers.2.ffn.gate.bias'  expected F32 [4], got BF16 [4]",
                  "'layers.0.attn.q_norm.weight'  expected BF16 [128], got BF16 [129]"});
}

TEST_F(WeightBindingTest, HugeListsAreGroupedByPattern) {
    // Drop every routed expert of layers 2 and 3 (2 x 4 experts x 6 tensors = 48 missing).
    test::write_checkpoint(dir_.path(), specs_, [](const TensorSpec& spec) -> std::string {
        bool dropped =
            spec.name.rfind("layers.2.ffn.experts.", 0) == 0 || spec.name.rfind("layers.3.ffn.experts.", 0) == 0;
        return dropped ? "" : spec.name;
    });
    Checkpoint checkpoint = Checkpoint::open(dir_.path());
    BindingReport report = validate_weights(config_, checkpoint);
    ASSERT_EQ(report.missing.size(), 48u);
    std::string text = report.describe();
    EXPECT_NE(text.find("missing (48):"), std::string::npos) << text;
    EXPECT_NE(text.find("'layers.#.ffn.experts.#.w1.weight' x8  (first: 'layers.2.ffn.experts.0.w1.weight'  I8 "
                        "[128, 128])"),
              std::string::npos)
        << text;
    EXPECT_NE(text.find("'layers.#.ffn.experts.#.w2.scale' x8"), std::string::npos) << text;
    EXPECT_EQ(text.find("layers.3.ffn.experts.1.w3.weight"), std::string::npos) << "listed individually: " << text;
    // With fewer lines allowed than patterns, the rest is counted.
    EXPECT_NE(report.describe(4).find("... and 2 more name patterns"), std::string::npos) << report.describe(4);
}

TEST_F(WeightBindingTest, HfRenamedCheckpointBinds) {
    test::write_checkpoint(dir_.path(), specs_, hf_name);
    Checkpoint checkpoint = Checkpoint::open(dir_.path());
    ASSERT_NE(checkpoint.find("model.layers.1.self_attn.compressor.indexer.q_b_proj.weight_scale_inv"), nullptr);
    BoundWeights bound = bind_weights(config_, checkpoint);
    EXPECT_EQ(bound.naming, CheckpointNaming::kHf);
    EXPECT_EQ(bound.size(), specs_.size());
    EXPECT_EQ(&bound.get("layers.1.attn.indexer.wq_b.scale"),
              checkpoint.find("model.layers.1.self_attn.compressor.indexer.q_b_proj.weight_scale_inv"));
    EXPECT_EQ(&bound.get("embed.weight"), checkpoint.find("model.embed_tokens.weight"));
}

TEST_F(WeightBindingTest, HfStackedExpertsAreReportedUnsupported) {
    auto rename = [](const TensorSpec& spec) -> std::string {
        if (spec.name.rfind("layers.1.ffn.experts.", 0) == 0) return "";
        return hf_tensor_name(spec.name, spec.is_scale);
    };
    test::write_checkpoint(dir_.path(), specs_, rename,
                           {test::zero_tensor("model.layers.1.mlp.experts.gate_up_proj", DType::kBF16, {4, 256, 256}),
                            test::zero_tensor("model.layers.1.mlp.experts.down_proj", DType::kBF16, {4, 256, 128})});
    Checkpoint checkpoint = Checkpoint::open(dir_.path());
    BindingReport report = validate_weights(config_, checkpoint);
    EXPECT_EQ(report.missing.size(), 0u) << report.describe();
    EXPECT_EQ(report.unexpected.size(), 0u) << report.describe();
    EXPECT_EQ(report.unsupported.size(), 2u);
    expect_error([&] { bind_weights(config_, checkpoint); },
                 {"2 unsupported", "'model.layers.1.mlp.experts.gate_up_proj'", "stacked routed experts"});
}

TEST_F(WeightBindingTest, DraftStagesAreProbed) {
    // No mtp.* tensors: no drafts expected, nothing missing.
    test::write_checkpoint(dir_.path(), specs_,
                           [](const TensorSpec& spec) { return spec.name.rfind("mtp.", 0) == 0 ? "" : spec.name; });
    {
        Checkpoint checkpoint = Checkpoint::open(dir_.path());
        BindingReport report = validate_weights(config_, checkpoint);
        EXPECT_TRUE(report.ok()) << report.describe();
        EXPECT_EQ(report.drafts.kind, DraftKind::kNone);
        EXPECT_EQ(report.expected, expected_tensors(config_).size());
    }
    // A stage without e_proj / h_proj is still MTP (the config has no DSpark keys) and the projections are missing.
    test::write_checkpoint(dir_.path(), specs_, [](const TensorSpec& spec) {
        return spec.name.rfind("mtp.0.e_proj.", 0) == 0 ? "" : spec.name;
    });
    Checkpoint checkpoint = Checkpoint::open(dir_.path());
    BindingReport report = validate_weights(config_, checkpoint);
    EXPECT_EQ(report.drafts.kind, DraftKind::kMtp);
    EXPECT_EQ(report.drafts.stages, 1);
    ASSERT_EQ(report.missing.size(), 2u) << report.describe();
    EXPECT_EQ(report.missing[0].name, "mtp.0.e_proj.weight");
}

TEST(HfNames, RenameTableOfModelSpec42) {
    const std::pair<const char*, const char*> cases[] = {
        {"embed.weight", "model.embed_tokens.weight"},
        {"head.weight", "lm_head.weight"},
        {"norm.weight", "model.norm.weight"},
        {"hc_head_fn", "model.hc_head.hc_fn"},
        {"hc_head_scale", "model.hc_head.hc_scale"},
        {"layers.3.attn_norm.weight", "model.layers.3.input_layernorm.weight"},
        {"layers.3.ffn_norm.weight", "model.layers.3.post_attention_layernorm.weight"},
        {"layers.3.hc_attn_fn", "model.layers.3.attn_hc.fn"},
        {"layers.3.hc_attn_scale", "model.layers.3.attn_hc.scale"},
        {"layers.3.hc_ffn_base", "model.layers.3.ffn_hc.base"},
        {"layers.2.attn.wq_a.weight", "model.layers.2.self_attn.q_a_proj.weight"},
        {"layers.2.attn.q_norm.weight", "model.layers.2.self_attn.q_a_norm.weight"},
        {"layers.2.attn.wq_b.weight", "model.layers.2.self_attn.q_b_proj.weight"},
        {"layers.2.attn.wkv.weight", "model.layers.2.self_attn.kv_proj.weight"},
        {"layers.2.attn.kv_norm.weight", "model.layers.2.self_attn.kv_norm.weight"},
        {"layers.2.attn.wo_a.weight", "model.layers.2.self_attn.o_a_proj.weight"},
        {"layers.2.attn.wo_b.weight", "model.layers.2.self_attn.o_b_proj.weight"},
        {"layers.2.attn.attn_sink", "model.layers.2.self_attn.sinks"},
        {"layers.2.attn.compressor.wkv.weight", "model.layers.2.self_attn.compressor.kv_proj.weight"},
        {"layers.2.attn.compressor.wgate.weight", "model.layers.2.self_attn.compressor.gate_proj.weight"},
        {"layers.2.attn.compressor.ape", "model.layers.2.self_attn.compressor.position_bias"},
        {"layers.2.attn.compressor.norm.weight", "model.layers.2.self_attn.compressor.kv_norm.weight"},
        {"layers.2.attn.indexer.compressor.wkv.weight", "model.layers.2.self_attn.compressor.indexer.kv_proj.weight"},
        {"layers.2.attn.indexer.compressor.ape", "model.layers.2.self_attn.compressor.indexer.position_bias"},
        {"layers.2.attn.indexer.compressor.norm.weight", "model.layers.2.self_attn.compressor.indexer.kv_norm.weight"},
        {"layers.2.attn.indexer.wq_b.weight", "model.layers.2.self_attn.compressor.indexer.q_b_proj.weight"},
        {"layers.2.attn.indexer.weights_proj.weight",
         "model.layers.2.self_attn.compressor.indexer.scorer.weights_proj.weight"},
        {"layers.5.ffn.gate.weight", "model.layers.5.mlp.gate.weight"},
        {"layers.5.ffn.gate.bias", "model.layers.5.mlp.gate.e_score_correction_bias"},
        {"layers.0.ffn.gate.tid2eid", "model.layers.0.mlp.gate.tid2eid"},
        {"layers.5.ffn.shared_experts.w1.weight", "model.layers.5.mlp.shared_experts.gate_proj.weight"},
        {"layers.5.ffn.shared_experts.w3.weight", "model.layers.5.mlp.shared_experts.up_proj.weight"},
        {"layers.5.ffn.shared_experts.w2.weight", "model.layers.5.mlp.shared_experts.down_proj.weight"},
        {"mtp.0.e_proj.weight", "mtp.0.e_proj.weight"},
    };
    for (const auto& [original, hf] : cases) EXPECT_EQ(hf_tensor_name(original, false), hf) << original;
    EXPECT_EQ(hf_tensor_name("layers.2.attn.wq_a.scale", true), "model.layers.2.self_attn.q_a_proj.weight_scale_inv");
    EXPECT_EQ(hf_tensor_name("layers.5.ffn.shared_experts.w2.scale", true),
              "model.layers.5.mlp.shared_experts.down_proj.weight_scale_inv");
    EXPECT_EQ(hf_tensor_name("layers.5.ffn.experts.17.w3.scale", true),
              "model.layers.5.mlp.experts.17.up_proj.weight_scale_inv");
    EXPECT_EQ(hf_tensor_name("mtp.0.e_proj.scale", true), "mtp.0.e_proj.scale");
}

}  // namespace
}  // namespace dsv4
