#include "model/flash_preset.h"

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace dsv4 {
namespace {

// The original DeepSeek-V4-Flash config.json (model-spec 1.1).
constexpr const char* kFlashConfig =
    R"json({"architectures": ["DeepseekV4ForCausalLM"], "model_type": "deepseek_v4", "vocab_size": 129280, "hidden_size": 4096, "num_hidden_layers": 43, "num_attention_heads": 64, "num_key_value_heads": 1, "head_dim": 512, "qk_rope_head_dim": 64, "q_lora_rank": 1024, "o_groups": 8, "o_lora_rank": 1024, "sliding_window": 128, "compress_ratios": [0, 0, 4, 128, 4, 128, 4, 128, 4, 128, 4, 128, 4, 128, 4, 128, 4, 128, 4, 128, 4, 128, 4, 128, 4, 128, 4, 128, 4, 128, 4, 128, 4, 128, 4, 128, 4, 128, 4, 128, 4, 128, 4, 0], "compress_rope_theta": 160000, "rope_theta": 10000, "rope_scaling": {"type": "yarn", "factor": 16, "original_max_position_embeddings": 65536, "beta_fast": 32, "beta_slow": 1}, "max_position_embeddings": 1048576, "index_n_heads": 64, "index_head_dim": 128, "index_topk": 512, "n_routed_experts": 256, "num_experts_per_tok": 6, "n_shared_experts": 1, "moe_intermediate_size": 2048, "num_hash_layers": 3, "scoring_func": "sqrtsoftplus", "topk_method": "noaux_tc", "norm_topk_prob": true, "routed_scaling_factor": 1.5, "swiglu_limit": 10.0, "hidden_act": "silu", "hc_mult": 4, "hc_sinkhorn_iters": 20, "hc_eps": 1e-06, "rms_norm_eps": 1e-06, "num_nextn_predict_layers": 1, "expert_dtype": "fp4", "quantization_config": {"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8", "scale_fmt": "ue8m0", "weight_block_size": [128, 128]}, "bos_token_id": 0, "eos_token_id": 1, "tie_word_embeddings": false, "torch_dtype": "bfloat16", "transformers_version": "4.57.1", "attention_bias": false, "attention_dropout": 0.0, "initializer_range": 0.02, "use_cache": true})json";

}  // namespace

ModelConfig flash_preset_config(const std::string& preset, int layers, int experts) {
    nlohmann::json j = nlohmann::json::parse(kFlashConfig);
    if (preset == "flash-0731") {
        auto ratios = j["compress_ratios"].get<std::vector<int>>();
        ratios.resize(43);
        ratios.insert(ratios.end(), {0, 0, 0});
        j["compress_ratios"] = ratios;
        j["dspark_block_size"] = 5;
        j["dspark_markov_rank"] = 256;
        j["dspark_noise_token_id"] = 128799;
        j["dspark_target_layer_ids"] = {40, 41, 42};
    } else if (preset == "flash-160") {
        j["n_routed_experts"] = 160;
    } else {
        DSV4_CHECK(preset == "flash", "unknown preset '{}' (flash, flash-0731, flash-160)", preset);
    }
    if (layers > 0) {
        const int total = j["num_hidden_layers"].get<int>();
        DSV4_CHECK(layers <= total, "--layers {} exceeds the model's {}", layers, total);
        auto ratios = j["compress_ratios"].get<std::vector<int>>();
        ratios.erase(ratios.begin() + layers, ratios.begin() + total);  // keep the draft entries
        j["compress_ratios"] = ratios;
        j["num_hidden_layers"] = layers;
        j["num_hash_layers"] = std::min(layers, j["num_hash_layers"].get<int>());
        if (j.contains("dspark_target_layer_ids")) {
            j["dspark_target_layer_ids"] = {layers - 1};
        }
    }
    if (experts > 0) {
        DSV4_CHECK(experts >= j["num_experts_per_tok"].get<int>(), "--experts {} is below the experts per token",
                   experts);
        j["n_routed_experts"] = experts;
    }
    return parse_model_config(j);
}

}  // namespace dsv4
