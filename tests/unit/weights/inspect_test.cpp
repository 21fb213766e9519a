// `inspect` counts for the FULL-SIZE DeepSeek-V4-Flash (and -0731) configs against model-spec 1.5 / 1.6 / 5.4 and the
// published checkpoint totals, computed from the config alone (no weights allocated); plus inspect_directory.
#include "model/inspect.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "core/error.h"
#include "tiny_model.h"

namespace dsv4 {
namespace {

// model-spec 1.1 (original deepseek-ai/DeepSeek-V4-Flash config.json), typed in from the spec.
nlohmann::json flash_config_json() {
    nlohmann::json j = nlohmann::json::parse(R"({
        "architectures": ["DeepseekV4ForCausalLM"], "model_type": "deepseek_v4",
        "vocab_size": 129280, "hidden_size": 4096, "num_hidden_layers": 43, "num_attention_heads": 64,
        "num_key_value_heads": 1, "head_dim": 512, "qk_rope_head_dim": 64, "q_lora_rank": 1024,
        "o_groups": 8, "o_lora_rank": 1024, "sliding_window": 128,
        "compress_rope_theta": 160000, "rope_theta": 10000,
        "rope_scaling": {"type": "yarn", "factor": 16, "original_max_position_embeddings": 65536,
                         "beta_fast": 32, "beta_slow": 1},
        "max_position_embeddings": 1048576, "index_n_heads": 64, "index_head_dim": 128, "index_topk": 512,
        "n_routed_experts": 256, "num_experts_per_tok": 6, "n_shared_experts": 1, "moe_intermediate_size": 2048,
        "num_hash_layers": 3, "scoring_func": "sqrtsoftplus", "topk_method": "noaux_tc", "norm_topk_prob": true,
        "routed_scaling_factor": 1.5, "swiglu_limit": 10.0, "hidden_act": "silu",
        "hc_mult": 4, "hc_sinkhorn_iters": 20, "hc_eps": 1e-6, "rms_norm_eps": 1e-6,
        "num_nextn_predict_layers": 1, "expert_dtype": "fp4",
        "quantization_config": {"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8",
                                "scale_fmt": "ue8m0", "weight_block_size": [128, 128]},
        "bos_token_id": 0, "eos_token_id": 1, "tie_word_embeddings": false, "torch_dtype": "bfloat16"})");
    // [0, 0, 4, 128, 4, 128, ..., 4, 128, 4, 0]: 43 backbone entries + the MTP layer.
    std::vector<int> ratios{0, 0};
    for (int i = 2; i < 43; ++i) ratios.push_back(i % 2 == 0 ? 4 : 128);
    ratios.push_back(0);
    j["compress_ratios"] = ratios;
    return j;
}

// model-spec 1.2: 0731 adds the DSpark keys and three 0 entries to compress_ratios.
nlohmann::json flash_0731_config_json() {
    nlohmann::json j = flash_config_json();
    std::vector<int> ratios = j["compress_ratios"].get<std::vector<int>>();
    ratios.resize(43);
    ratios.insert(ratios.end(), {0, 0, 0});
    j["compress_ratios"] = ratios;
    j["dspark_block_size"] = 5;
    j["dspark_markov_rank"] = 256;
    j["dspark_noise_token_id"] = 128799;
    j["dspark_target_layer_ids"] = {40, 41, 42};
    return j;
}

const ComponentTotals& component(const Inspection& in, Component c) {
    return in.components.at(static_cast<size_t>(c));
}

double billions(int64_t n) {
    return std::round(static_cast<double>(n) / 1e6) / 1e3;
}  // to 3 decimals

// Bytes of the expected tensors of one component restricted to some dtypes (model-spec 1.6 splits rows that way).
uint64_t bytes_of(const std::vector<TensorSpec>& specs, Component c, std::initializer_list<DType> dtypes) {
    uint64_t total = 0;
    for (const auto& s : specs) {
        if (s.component != c || std::find(dtypes.begin(), dtypes.end(), s.dtype) == dtypes.end()) continue;
        uint64_t n = 1;
        for (int64_t d : s.shape) n *= static_cast<uint64_t>(d);
        total += n * static_cast<uint64_t>(dtype_bits(s.dtype)) / 8;
    }
    return total;
}

TEST(InspectFlash, ScheduleAndParameterCounts) {
    ModelConfig config = parse_model_config(flash_config_json());
    DraftLayout drafts = draft_layout_from_config(config);
    EXPECT_EQ(drafts.kind, DraftKind::kMtp);
    EXPECT_EQ(drafts.stages, 1);
    Inspection in = inspect_model(config, drafts);
    EXPECT_EQ(in.sliding_layers, 2);
    EXPECT_EQ(in.csa_layers, 21);
    EXPECT_EQ(in.hca_layers, 20);
    EXPECT_EQ(in.hash_layers, 3);

    // model-spec 1.5 table (3-decimal billions).
    EXPECT_EQ(billions(component(in, Component::kAttention).params), 4.599);
    EXPECT_EQ(billions(component(in, Component::kIndexer).params), 0.226);
    EXPECT_EQ(billions(component(in, Component::kCompressor).params), 0.261);  // CSA 0.176 + HCA 0.085
    EXPECT_EQ(billions(component(in, Component::kRoutedExperts).params), 277.025);
    EXPECT_EQ(billions(component(in, Component::kSharedExperts).params), 1.082);
    EXPECT_EQ(billions(component(in, Component::kRouter).params), 0.045);
    EXPECT_EQ(billions(component(in, Component::kMhc).params), 0.034);
    EXPECT_EQ(billions(component(in, Component::kEmbedding).params), 0.530);
    EXPECT_EQ(billions(component(in, Component::kHead).params), 0.530);
    EXPECT_EQ(std::round(static_cast<double>(in.params_backbone) / 1e7) / 1e2, 284.33);
    EXPECT_EQ(billions(component(in, Component::kDraft).params), 6.610);
    // [nano]'s exact totals: all parameters with MTP, and activated + embedding table + activated MTP.
    EXPECT_EQ(in.params_total, 290942289362);
    EXPECT_EQ(in.params_activated_with_embedding_and_drafts, 14118225362);
    EXPECT_EQ(std::round(static_cast<double>(in.params_activated) / 1e7) / 1e2, 13.27);
}

TEST(InspectFlash, BytesMatchTheCheckpoint) {
    ModelConfig config = parse_model_config(flash_config_json());
    Inspection in = inspect_model(config, {DraftKind::kMtp, 1});
    // model-spec 1.6 and the published checkpoint (46 shards, 69,187 tensors).
    EXPECT_EQ(in.bytes_backbone, 156015698140u);
    EXPECT_EQ(component(in, Component::kDraft).bytes, 3593787756u);
    EXPECT_EQ(in.bytes_total, 159609485896u);
    EXPECT_EQ(in.tensors, 69187u);
    EXPECT_EQ(component(in, Component::kRoutedExperts).bytes, 147169738752u);
    EXPECT_EQ(component(in, Component::kSharedExperts).bytes, 1082196480u);
    EXPECT_EQ(component(in, Component::kEmbedding).bytes, 1059061760u);
    EXPECT_EQ(component(in, Component::kHead).bytes, 1059061760u);
    EXPECT_EQ(component(in, Component::kRouter).bytes, 90218496u + 18616320u);
    const auto specs = expected_tensors(config);
    EXPECT_EQ(bytes_of(specs, Component::kAttention, {DType::kF8E4M3, DType::kF8E8M0}), 4599335040u);
    EXPECT_EQ(bytes_of(specs, Component::kCompressor, {DType::kBF16}), 520135680u);
    EXPECT_EQ(bytes_of(specs, Component::kIndexer, {DType::kF8E4M3, DType::kF8E8M0}), 176171520u);
    EXPECT_EQ(bytes_of(specs, Component::kIndexer, {DType::kBF16}), 99095808u);
    // mHC of the layers (hc_head_* excluded): 135,275,592 B.
    uint64_t hc_head = (4 * 16384 + 4 + 1) * 4;
    EXPECT_EQ(component(in, Component::kMhc).bytes - hc_head, 135275592u);
    // Dtype census of the full original checkpoint (model-spec 3.1).
    std::map<DType, size_t> census;
    for (const auto& d : in.dtypes) census[d.dtype] = d.tensors;
    EXPECT_EQ(census, (std::map<DType, size_t>{{DType::kBF16, 433},
                                               {DType::kF32, 417},
                                               {DType::kF8E4M3, 375},
                                               {DType::kF8E8M0, 34167},
                                               {DType::kI64, 3},
                                               {DType::kI8, 33792}}));
}

TEST(InspectFlash, Revision0731WithDspark) {
    ModelConfig config = parse_model_config(flash_0731_config_json());
    DraftLayout drafts = draft_layout_from_config(config);
    EXPECT_EQ(drafts.kind, DraftKind::kDspark);
    EXPECT_EQ(drafts.stages, 3);
    Inspection in = inspect_model(config, drafts);
    EXPECT_EQ(in.bytes_backbone, 156015698140u);
    EXPECT_EQ(component(in, Component::kDraft).bytes, 10862838300u);
    EXPECT_EQ(in.bytes_total, 166878536440u);  // 48 shards, 72,317 tensors
    EXPECT_EQ(in.tensors, 72317u);
    EXPECT_EQ(billions(component(in, Component::kDraft).params), 19.846);  // "19.85 B"
    EXPECT_EQ(std::round(static_cast<double>(in.params_total) / 1e7) / 1e2, 304.18);
}

TEST(InspectFlash, KvFootprint) {
    ModelConfig config = parse_model_config(flash_config_json());
    Inspection in = inspect_model(config, {DraftKind::kMtp, 1});
    const KvFootprint& kv = in.kv;
    EXPECT_EQ(kv.fp8_row, 584);
    EXPECT_EQ(kv.fp8_indexer, 132);
    EXPECT_EQ(kv.mxfp4_indexer, 68);
    // model-spec 5.4: 21*(584+132)/4 + 20*584/128, 21*(584+68)/4 + ..., 21*(1024+256)/4 + 20*1024/128.
    EXPECT_DOUBLE_EQ(kv.fp8_per_token, 3850.25);
    EXPECT_DOUBLE_EQ(kv.fp8_mxfp4_per_token, 3514.25);
    EXPECT_DOUBLE_EQ(kv.bf16_per_token, 6880.0);
    // Fixed state: 43 x 128 rows; 21 x (64 + 16) KiB + 20 x 512 KiB = 11.64 MiB of compressor state.
    EXPECT_EQ(kv.swa_ring_fp8, 43u * 128 * 584);
    EXPECT_EQ(kv.swa_ring_bf16, 43u * 128 * 1024);
    EXPECT_EQ(kv.draft_swa_ring_fp8, 1u * 128 * 584);
    EXPECT_EQ(kv.compressor_state, 21u * (64 + 16) * 1024 + 20u * 512 * 1024);
    // 1M context per sequence including the fixed state: 3.77 GiB (fp8) and 6.74 GiB (bf16).
    const double gib = 1024.0 * 1024 * 1024;
    EXPECT_EQ(std::round((kv.fp8_per_token * 1048576 + static_cast<double>(kv.swa_ring_fp8 + kv.compressor_state)) /
                         gib * 100) /
                  100,
              3.77);
    EXPECT_EQ(std::round((kv.bf16_per_token * 1048576 + static_cast<double>(kv.swa_ring_bf16 + kv.compressor_state)) /
                         gib * 100) /
                  100,
              6.74);
}

TEST(InspectFlash, GpuFit) {
    Inspection in = inspect_model(parse_model_config(flash_config_json()), {DraftKind::kMtp, 1});
    GpuFit h200 = estimate_gpu_fit(in, 139.0);  // model-spec 1.6: 148.65 GiB does not fit one H200
    EXPECT_FALSE(h200.fits);
    EXPECT_NEAR(h200.weights_gib, 148.65, 0.005);
    EXPECT_EQ(h200.min_gpus, 2);
    GpuFit big = estimate_gpu_fit(in, 200.0, 4.0);
    EXPECT_TRUE(big.fits);
    const double free = 200.0 - h200.weights_gib - 4.0 -
                        static_cast<double>(in.kv.swa_ring_fp8 + in.kv.draft_swa_ring_fp8 + in.kv.compressor_state) /
                            (1024.0 * 1024 * 1024);
    EXPECT_NEAR(big.free_gib, free, 1e-9);
    EXPECT_EQ(big.max_context_tokens_fp8, 1048576);   // capped at max_position_embeddings
    GpuFit tight = estimate_gpu_fit(in, 153.0, 4.0);  // ~0.33 GiB left: ~93K tokens of fp8 cache
    EXPECT_TRUE(tight.fits);
    EXPECT_EQ(tight.max_context_tokens_fp8,
              static_cast<int64_t>(tight.free_gib * 1024.0 * 1024 * 1024 / in.kv.fp8_per_token));
    EXPECT_LT(tight.max_context_tokens_fp8, 1048576);
    EXPECT_THROW(estimate_gpu_fit(in, -1.0), Error);
}

TEST(InspectFlash, TextAndJsonReports) {
    ModelConfig config = parse_model_config(flash_config_json());
    Inspection in = inspect_model(config, {DraftKind::kMtp, 1});
    GpuFit fit = estimate_gpu_fit(in, 139.0);
    std::string text = inspection_text(config, in, fit, std::nullopt);
    EXPECT_NE(text.find("290,942,289,362"), std::string::npos) << text;
    EXPECT_NE(text.find("156,015,698,140"), std::string::npos) << text;
    EXPECT_NE(text.find("3850.25 B/token"), std::string::npos) << text;
    EXPECT_NE(text.find("does NOT fit"), std::string::npos) << text;
    EXPECT_NE(text.find("   42  csa"), std::string::npos) << text;
    nlohmann::json j = nlohmann::json::parse(inspection_json(config, in, fit, std::nullopt).dump());
    EXPECT_EQ(j["bytes_total"].get<uint64_t>(), 159609485896u);
    EXPECT_EQ(j["schedule"].size(), 43u);
    EXPECT_EQ(j["schedule"][3]["attention"], "hca");
    EXPECT_EQ(j["schedule"][2]["yarn_factor"].get<double>(), 16.0);
    EXPECT_TRUE(j["schedule"][0]["yarn_factor"].is_null());
    EXPECT_EQ(j["gpu_fit"]["fits"], false);
    EXPECT_DOUBLE_EQ(j["kv"]["bytes_per_token_bf16"].get<double>(), 6880.0);
}

// quantization_config.fmt names the checkpoint's FP8 dialect; inspect reports it and the runtime sites of a dialect.
TEST(InspectFlash, Fp8DialectFromTheConfigAndRuntimeSites) {
    nlohmann::json j = flash_config_json();
    EXPECT_EQ(parse_model_config(j).fp8_dialect, Fp8Dialect::kOcp);
    for (const char* fnuz : {"e4m3_fnuz", "e4m3fnuz"}) {
        j["quantization_config"]["fmt"] = fnuz;
        EXPECT_EQ(parse_model_config(j).fp8_dialect, Fp8Dialect::kFnuz) << fnuz;
    }
    j["quantization_config"].erase("fmt");
    EXPECT_EQ(parse_model_config(j).fp8_dialect, Fp8Dialect::kOcp) << "absent: DeepSeek's OCP";
    j["quantization_config"]["fmt"] = "e5m2";
    try {
        parse_model_config(j);
        ADD_FAILURE() << "fmt e5m2 accepted";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("e4m3_fnuz"), std::string::npos) << e.what();
    }
    j["quantization_config"]["fmt"] = "e4m3";
    const Fp8Inspection in = inspect_fp8(parse_model_config(j), nullptr, Fp8Dialect::kFnuz);
    const std::string text = fp8_inspection_text(in);
    EXPECT_NE(text.find("OCP e4m3 (e4m3fn) per config.json"), std::string::npos) << text;
    EXPECT_NE(text.find("converted exactly at load"), std::string::npos) << text;
    EXPECT_NE(text.find("activations fnuz max 240; K=V rows (fp8) fnuz max 240; indexer keys (fp8) fnuz max 224"),
              std::string::npos)
        << text;
    const nlohmann::json js = fp8_inspection_json(in);
    EXPECT_EQ(js["claimed"], "ocp");
    EXPECT_EQ(js["runtime"]["index_keys"]["max"], 224.0);
    EXPECT_FALSE(js["scanned"].get<bool>());
}

TEST(InspectDirectory, ConfigOnlyThenValidWeightsThenBroken) {
    test::TempDir dir;
    nlohmann::json config_json = test::tiny_config_json();
    test::write_text(dir / "config.json", config_json.dump());
    DirectoryInspection only_config = inspect_directory(dir.path(), std::nullopt);
    EXPECT_EQ(only_config.validation.state, ValidationSummary::State::kSkipped);
    EXPECT_EQ(only_config.inspection.drafts.kind, DraftKind::kMtp);  // from num_nextn_predict_layers
    EXPECT_FALSE(only_config.fit.has_value());

    ModelConfig config = parse_model_config(config_json);
    auto specs = expected_tensors(config);  // no draft stage in the weights
    test::write_checkpoint(dir.path(), specs, [](const TensorSpec& s) { return s.name; });
    DirectoryInspection valid = inspect_directory(dir.path(), 80.0);
    EXPECT_EQ(valid.validation.state, ValidationSummary::State::kOk) << valid.validation.text;
    EXPECT_EQ(valid.inspection.drafts.kind, DraftKind::kNone);  // the weights decide
    EXPECT_EQ(valid.inspection.tensors, specs.size());
    ASSERT_TRUE(valid.fit.has_value());
    EXPECT_TRUE(valid.fit->fits);

    test::write_checkpoint(dir.path(), specs,
                           [](const TensorSpec& s) { return s.name == "head.weight" ? "" : s.name; });
    DirectoryInspection broken = inspect_directory(dir.path(), std::nullopt);
    EXPECT_EQ(broken.validation.state, ValidationSummary::State::kFailed);
    EXPECT_NE(broken.validation.text.find("'head.weight'"), std::string::npos) << broken.validation.text;
    nlohmann::json j = inspection_json(broken.config, broken.inspection, broken.fit, broken.validation);
    EXPECT_EQ(j["validation"]["state"], "failed");
    EXPECT_EQ(j["validation"]["missing"], 1);
}

}  // namespace
}  // namespace dsv4
