#include "model/synthetic_presets.h"

#include <fmt/format.h>

#include <algorithm>

#include "core/error.h"

namespace dsv4 {
namespace {

using nlohmann::json;

// The keys every preset shares with the real DeepSeek-V4-Flash config.json (model-spec 1.1).
json base_config() {
    return json{
        {"architectures", {"DeepseekV4ForCausalLM"}},
        {"model_type", "deepseek_v4"},
        {"num_key_value_heads", 1},
        {"compress_rope_theta", 160000.0},
        {"rope_theta", 10000.0},
        {"rope_scaling",
         {{"type", "yarn"},
          {"factor", 16},
          {"original_max_position_embeddings", 65536},
          {"beta_fast", 32},
          {"beta_slow", 1}}},
        {"max_position_embeddings", 1048576},
        {"n_shared_experts", 1},
        {"scoring_func", "sqrtsoftplus"},
        {"topk_method", "noaux_tc"},
        {"norm_topk_prob", true},
        {"routed_scaling_factor", 1.5},
        {"swiglu_limit", 10.0},
        {"hidden_act", "silu"},
        {"hc_mult", 4},
        {"hc_sinkhorn_iters", 20},
        {"hc_eps", 1e-6},
        {"rms_norm_eps", 1e-6},
        {"num_hash_layers", 3},
        {"num_nextn_predict_layers", 0},
        {"expert_dtype", "fp4"},
        {"quantization_config",
         {{"activation_scheme", "dynamic"},
          {"fmt", "e4m3"},
          {"quant_method", "fp8"},
          {"scale_fmt", "ue8m0"},
          {"weight_block_size", {128, 128}}}},
        {"bos_token_id", 0},
        {"eos_token_id", 1},
        {"tie_word_embeddings", false},
        {"torch_dtype", "bfloat16"},
        {"attention_bias", false},
        {"attention_dropout", 0.0},
        {"initializer_range", 0.02},
        {"use_cache", true},
    };
}

// The real schedule's first `layers` ratios: 0, 0, then 4 / 128 alternating (even layers CSA, odd HCA), then one 0
// per draft stage.
std::vector<int> schedule(int layers, int draft_stages) {
    std::vector<int> ratios;
    for (int i = 0; i < layers; ++i) ratios.push_back(i < 2 ? 0 : (i % 2 == 0 ? 4 : 128));
    for (int i = 0; i < draft_stages; ++i) ratios.push_back(0);
    return ratios;
}

void set_dims(json& c, json dims) {
    for (auto& [key, value] : dims.items()) c[key] = value;
}

SyntheticModel flash(bool dspark) {
    SyntheticModel m;
    m.preset = dspark ? "flash-0731" : "flash";
    m.config = base_config();
    set_dims(m.config, {{"vocab_size", 129280},
                        {"hidden_size", 4096},
                        {"num_hidden_layers", 43},
                        {"num_attention_heads", 64},
                        {"head_dim", 512},
                        {"qk_rope_head_dim", 64},
                        {"q_lora_rank", 1024},
                        {"o_groups", 8},
                        {"o_lora_rank", 1024},
                        {"sliding_window", 128},
                        {"index_n_heads", 64},
                        {"index_head_dim", 128},
                        {"index_topk", 512},
                        {"n_routed_experts", 256},
                        {"num_experts_per_tok", 6},
                        {"moe_intermediate_size", 2048},
                        {"num_nextn_predict_layers", 1},
                        {"transformers_version", "4.57.1"}});
    if (dspark) {
        // 0731 keeps num_nextn_predict_layers = 1 while shipping three DSpark stages (model-spec 1.2).
        m.config["compress_ratios"] = schedule(43, 3);
        set_dims(m.config, {{"dspark_block_size", 5},
                            {"dspark_markov_rank", 256},
                            {"dspark_noise_token_id", 128799},
                            {"dspark_target_layer_ids", {40, 41, 42}}});
        m.drafts = kDsparkLayout;
    } else {
        m.config["compress_ratios"] = schedule(43, 1);
        m.drafts = kMtpLayout;
    }
    return m;
}

SyntheticModel random_v4() {
    SyntheticModel m;
    m.preset = "random-v4";
    m.config = base_config();
    set_dims(m.config, {{"vocab_size", 129280},
                        {"hidden_size", 128},
                        {"num_hidden_layers", 4},
                        {"num_attention_heads", 4},
                        {"head_dim", 128},
                        {"qk_rope_head_dim", 64},
                        {"q_lora_rank", 128},
                        {"o_groups", 2},
                        {"o_lora_rank", 64},
                        {"sliding_window", 128},
                        {"index_n_heads", 8},
                        {"index_head_dim", 64},
                        {"index_topk", 32},
                        {"n_routed_experts", 8},
                        {"num_experts_per_tok", 2},
                        {"moe_intermediate_size", 128},
                        {"num_nextn_predict_layers", 1},
                        {"compress_ratios", schedule(4, 1)}});
    m.drafts = kMtpLayout;
    return m;
}

SyntheticModel tiny() {
    SyntheticModel m;
    m.preset = "tiny";
    m.config = base_config();
    set_dims(m.config, {{"vocab_size", 512},
                        {"hidden_size", 128},
                        {"num_hidden_layers", 6},
                        {"num_attention_heads", 4},
                        {"head_dim", 128},
                        {"qk_rope_head_dim", 64},
                        {"q_lora_rank", 64},
                        {"o_groups", 2},
                        {"o_lora_rank", 32},
                        {"sliding_window", 128},
                        {"index_n_heads", 32},
                        {"index_head_dim", 128},
                        {"index_topk", 16},
                        {"n_routed_experts", 8},
                        {"num_experts_per_tok", 3},
                        {"moe_intermediate_size", 64},
                        {"compress_ratios", schedule(6, 0)}});
    return m;
}

// tiny with draft stages for the speculative-decoding tests: window 32 and HCA ratio 16, so that short prompts cross
// window, compression and (block size 32) prefix-cache block boundaries; MTP (1 stage) or DSpark (3 stages).
SyntheticModel tiny_draft(bool dspark) {
    SyntheticModel m = tiny();
    m.preset = dspark ? "tiny-dspark" : "tiny-mtp";
    const int stages = dspark ? 3 : 1;
    std::vector<int> ratios;
    for (int i = 0; i < 6; ++i) ratios.push_back(i < 2 ? 0 : (i % 2 == 0 ? 4 : 16));
    for (int i = 0; i < stages; ++i) ratios.push_back(0);
    set_dims(m.config, {{"sliding_window", 32},
                        {"compress_rates", {{"compressed_sparse_attention", 4}, {"heavily_compressed_attention", 16}}},
                        {"compress_ratios", ratios},
                        {"num_nextn_predict_layers", 1}});
    if (dspark) {
        set_dims(m.config, {{"dspark_block_size", 5},
                            {"dspark_markov_rank", 16},
                            {"dspark_noise_token_id", 511},
                            {"dspark_target_layer_ids", {3, 4, 5}}});
        m.drafts = kDsparkLayout;
    } else {
        m.drafts = kMtpLayout;
    }
    return m;
}

SyntheticModel mid() {
    SyntheticModel m;
    m.preset = "mid";
    m.config = base_config();
    set_dims(m.config, {{"vocab_size", 32768},
                        {"hidden_size", 1024},
                        {"num_hidden_layers", 8},
                        {"num_attention_heads", 16},
                        {"head_dim", 256},
                        {"qk_rope_head_dim", 64},
                        {"q_lora_rank", 256},
                        {"o_groups", 4},
                        {"o_lora_rank", 256},
                        {"sliding_window", 128},
                        {"index_n_heads", 16},
                        {"index_head_dim", 64},
                        {"index_topk", 64},
                        {"n_routed_experts", 64},
                        {"num_experts_per_tok", 6},
                        {"moe_intermediate_size", 512},
                        {"compress_ratios", schedule(8, 0)}});
    return m;
}

}  // namespace

std::vector<std::string> synthetic_preset_names() {
    return {"random-v4", "tiny", "tiny-mtp", "tiny-dspark", "mid", "flash", "flash-0731"};
}

SyntheticModel synthetic_preset(std::string_view name) {
    // "bundled" is random-v4's old name (it was the served default before the trained demo model, models/demo).
    if (name == "random-v4" || name == "bundled") return random_v4();
    if (name == "tiny") return tiny();
    if (name == "tiny-mtp") return tiny_draft(false);
    if (name == "tiny-dspark") return tiny_draft(true);
    if (name == "mid") return mid();
    if (name == "flash") return flash(false);
    if (name == "flash-0731") return flash(true);
    fail("unknown preset '{}' (known: {})", name, fmt::join(synthetic_preset_names(), ", "));
}

void truncate_synthetic_model(SyntheticModel& model, std::optional<int> layers, std::optional<int> experts) {
    json& c = model.config;
    if (layers) {
        const int have = c.at("num_hidden_layers").get<int>();
        DSV4_CHECK(*layers >= 1 && *layers <= have, "--layers {} must be in [1, {}] for preset {}", *layers, have,
                   model.preset);
        auto ratios = c.at("compress_ratios").get<std::vector<int>>();
        std::vector<int> kept(ratios.begin(), ratios.begin() + *layers);
        kept.insert(kept.end(), ratios.begin() + have, ratios.end());  // the draft stages' entries
        c["compress_ratios"] = kept;
        c["num_hidden_layers"] = *layers;
        c["num_hash_layers"] = std::min(c.at("num_hash_layers").get<int>(), *layers);
        if (c.contains("dspark_target_layer_ids")) {
            // The real targets are the last three layers; keep "the last N layers" of the truncated stack.
            const auto targets = c.at("dspark_target_layer_ids").get<std::vector<int>>();
            std::vector<int> moved;
            for (int id : targets) moved.push_back(std::max(0, id - (have - *layers)));
            moved.erase(std::unique(moved.begin(), moved.end()), moved.end());
            c["dspark_target_layer_ids"] = moved;
        }
    }
    if (experts) {
        const int have = c.at("n_routed_experts").get<int>();
        DSV4_CHECK(*experts >= 1 && *experts <= have, "--experts {} must be in [1, {}] for preset {}", *experts, have,
                   model.preset);
        c["n_routed_experts"] = *experts;
        c["num_experts_per_tok"] = std::min(c.at("num_experts_per_tok").get<int>(), *experts);
    }
}

}  // namespace dsv4
