#include "config/model_config.h"

#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.h"

namespace dsv4 {
namespace {

using nlohmann::json;

// Reads a required key; the error names the key so a user can fix the file.
template <typename T>
T required(const json& j, const char* key) {
    auto it = j.find(key);
    DSV4_CHECK(it != j.end() && !it->is_null(), "config.json: missing required key '{}'", key);
    try {
        return it->get<T>();
    } catch (const json::exception& e) {
        fail("config.json: key '{}' has the wrong type ({})", key, e.what());
    }
}

template <typename T>
T optional(const json& j, const char* key, T fallback) {
    auto it = j.find(key);
    if (it == j.end() || it->is_null()) return fallback;
    try {
        return it->get<T>();
    } catch (const json::exception& e) {
        fail("config.json: key '{}' has the wrong type ({})", key, e.what());
    }
}

void check_positive(int64_t value, const char* key) {
    DSV4_CHECK(value > 0, "config.json: '{}' must be positive, got {}", key, value);
}

// YaRN from a DeepSeek-style rope_scaling block or an HF-style rope_parameters.compress block.
std::optional<YarnParams> parse_yarn(const json& block) {
    std::string type = optional<std::string>(block, "rope_type", optional<std::string>(block, "type", "default"));
    if (type == "default" || type == "none") return std::nullopt;
    DSV4_CHECK(type == "yarn", "config.json: unsupported rope scaling type '{}' (DeepSeek-V4 uses yarn)", type);
    YarnParams yarn;
    yarn.factor = required<double>(block, "factor");
    yarn.original_max_position_embeddings = required<int64_t>(block, "original_max_position_embeddings");
    yarn.beta_fast = optional<double>(block, "beta_fast", 32.0);
    yarn.beta_slow = optional<double>(block, "beta_slow", 1.0);
    DSV4_CHECK(yarn.factor >= 1.0, "config.json: yarn factor must be >= 1, got {}", yarn.factor);
    DSV4_CHECK(yarn.original_max_position_embeddings > 0,
               "config.json: yarn original_max_position_embeddings must "
               "be positive");
    // The V4 reference applies no magnitude scaling (model-spec 2.4); refuse configs that ask for one.
    double attention_factor = optional<double>(block, "attention_factor", 1.0);
    DSV4_CHECK(attention_factor == 1.0 && optional<double>(block, "mscale", 0.0) == 0.0,
               "config.json: yarn magnitude scaling (attention_factor/mscale) is not part of DeepSeek-V4");
    return yarn;
}

void parse_rope(const json& j, ModelConfig& c) {
    c.rope_theta = optional<double>(j, "rope_theta", 10000.0);
    c.compress_rope_theta = optional<double>(j, "compress_rope_theta", 160000.0);
    if (auto it = j.find("rope_parameters"); it != j.end() && it->is_object() && it->contains("compress")) {
        const json& main = it->at("main");
        const json& compress = it->at("compress");
        c.rope_theta = optional<double>(main, "rope_theta", c.rope_theta);
        c.compress_rope_theta = optional<double>(compress, "rope_theta", c.compress_rope_theta);
        c.yarn = parse_yarn(compress);
    } else if (auto rs = j.find("rope_scaling"); rs != j.end() && rs->is_object()) {
        c.yarn = parse_yarn(*rs);
    }
    if (j.contains("qk_rope_head_dim")) {
        c.rope_head_dim = required<int>(j, "qk_rope_head_dim");
    } else if (j.contains("partial_rotary_factor")) {
        c.rope_head_dim = static_cast<int>(c.head_dim * required<double>(j, "partial_rotary_factor"));
    } else {
        c.rope_head_dim = 64;
    }
}

AttentionType attention_from_ratio(int ratio, const ModelConfig& c, size_t layer) {
    if (ratio == 0) return AttentionType::kSliding;
    if (ratio == c.csa_ratio) return AttentionType::kCsa;
    if (ratio == c.hca_ratio) return AttentionType::kHca;
    fail("config.json: compress_ratios[{}] = {} is not 0, the CSA ratio {} or the HCA ratio {}", layer, ratio,
         c.csa_ratio, c.hca_ratio);
}

AttentionType attention_from_name(const std::string& name, size_t layer) {
    if (name == "sliding_attention") return AttentionType::kSliding;
    if (name == "compressed_sparse_attention") return AttentionType::kCsa;
    if (name == "heavily_compressed_attention") return AttentionType::kHca;
    fail("config.json: layer_types[{}] = '{}' is not a DeepSeek-V4 attention type", layer, name);
}

void parse_layer_schedule(const json& j, ModelConfig& c) {
    if (auto it = j.find("compress_rates"); it != j.end() && it->is_object()) {
        c.csa_ratio = optional<int>(*it, "compressed_sparse_attention", c.csa_ratio);
        c.hca_ratio = optional<int>(*it, "heavily_compressed_attention", c.hca_ratio);
    }
    c.csa_ratio = optional<int>(j, "compress_rate_csa", c.csa_ratio);
    c.hca_ratio = optional<int>(j, "compress_rate_hca", c.hca_ratio);
    check_positive(c.csa_ratio, "compress_rate_csa");
    check_positive(c.hca_ratio, "compress_rate_hca");

    std::vector<AttentionType> types;
    if (j.contains("layer_types")) {
        auto names = required<std::vector<std::string>>(j, "layer_types");
        DSV4_CHECK(names.size() >= static_cast<size_t>(c.num_layers),
                   "config.json: layer_types has {} entries, "
                   "num_hidden_layers is {}",
                   names.size(), c.num_layers);
        for (size_t i = 0; i < static_cast<size_t>(c.num_layers); ++i)
            types.push_back(attention_from_name(names[i], i));
    } else {
        auto ratios = required<std::vector<int>>(j, "compress_ratios");
        // Entries past num_hidden_layers describe the MTP / DSpark layers (all 0).
        DSV4_CHECK(ratios.size() >= static_cast<size_t>(c.num_layers),
                   "config.json: compress_ratios has {} entries, "
                   "num_hidden_layers is {}",
                   ratios.size(), c.num_layers);
        for (size_t i = 0; i < static_cast<size_t>(c.num_layers); ++i) {
            types.push_back(attention_from_ratio(ratios[i], c, i));
        }
        for (size_t i = c.num_layers; i < ratios.size(); ++i) {
            DSV4_CHECK(ratios[i] == 0, "config.json: compress_ratios[{}] = {} for a draft layer (must be 0)", i,
                       ratios[i]);
        }
    }

    std::vector<RoutingType> routing(c.num_layers, RoutingType::kLearned);
    if (j.contains("mlp_layer_types")) {
        auto names = required<std::vector<std::string>>(j, "mlp_layer_types");
        DSV4_CHECK(names.size() >= static_cast<size_t>(c.num_layers),
                   "config.json: mlp_layer_types has {} entries, "
                   "num_hidden_layers is {}",
                   names.size(), c.num_layers);
        c.num_hash_layers = 0;
        for (int i = 0; i < c.num_layers; ++i) {
            DSV4_CHECK(names[i] == "hash_moe" || names[i] == "moe",
                       "config.json: mlp_layer_types[{}] = '{}' is "
                       "neither 'hash_moe' nor 'moe'",
                       i, names[i]);
            routing[i] = names[i] == "hash_moe" ? RoutingType::kHash : RoutingType::kLearned;
            c.num_hash_layers += routing[i] == RoutingType::kHash;
        }
    } else {
        c.num_hash_layers = optional<int>(j, "num_hash_layers", 3);
        DSV4_CHECK(c.num_hash_layers >= 0 && c.num_hash_layers <= c.num_layers,
                   "config.json: num_hash_layers {} is "
                   "outside [0, {}]",
                   c.num_hash_layers, c.num_layers);
        for (int i = 0; i < c.num_hash_layers; ++i) routing[i] = RoutingType::kHash;
    }

    c.layers.resize(c.num_layers);
    for (int i = 0; i < c.num_layers; ++i) {
        LayerConfig& layer = c.layers[i];
        layer.attention = types[i];
        layer.compress_ratio = types[i] == AttentionType::kCsa   ? c.csa_ratio
                               : types[i] == AttentionType::kHca ? c.hca_ratio
                                                                 : 0;
        layer.routing = routing[i];
        layer.rope.rope_dim = c.rope_head_dim;
        // Sliding-only layers: theta 1e4, no YaRN. Compressed layers: compress theta with YaRN (model-spec 2.4).
        layer.rope.theta = layer.compress_ratio == 0 ? c.rope_theta : c.compress_rope_theta;
        if (layer.compress_ratio != 0) layer.rope.yarn = c.yarn;
    }
}

Fp8Dialect parse_fp8_fmt(const std::string& fmt) {
    if (fmt == kFp8FmtOcp || fmt == "e4m3fn") return Fp8Dialect::kOcp;
    if (fmt == kFp8FmtFnuz || fmt == "e4m3fnuz") return Fp8Dialect::kFnuz;
    fail(
        "config.json: quantization_config.fmt '{}' is not supported ({} = OCP e4m3 as DeepSeek ships it, {} = AMD "
        "gfx942 FNUZ e4m3 as `dsv4 convert-checkpoint --fp8 fnuz` writes it)",
        fmt, kFp8FmtOcp, kFp8FmtFnuz);
}

void parse_quantization(const json& j, ModelConfig& c) {
    auto it = j.find("quantization_config");
    c.fp8_weights = it != j.end() && it->is_object();
    if (c.fp8_weights) {
        const json& q = *it;
        auto method = optional<std::string>(q, "quant_method", "fp8");
        DSV4_CHECK(method == "fp8", "config.json: quantization_config.quant_method '{}' is not supported (fp8 only)",
                   method);
        c.fp8_dialect = parse_fp8_fmt(optional<std::string>(q, "fmt", kFp8FmtOcp));
        auto scale_fmt = optional<std::string>(q, "scale_fmt", "ue8m0");
        DSV4_CHECK(scale_fmt == "ue8m0",
                   "config.json: quantization_config.scale_fmt '{}' is not supported (ue8m0 "
                   "only)",
                   scale_fmt);
        auto block = optional<std::vector<int>>(q, "weight_block_size", {128, 128});
        DSV4_CHECK(block.size() == 2 && block[0] > 0 && block[1] > 0,
                   "config.json: quantization_config."
                   "weight_block_size must be two positive integers");
        c.weight_block_rows = block[0];
        c.weight_block_cols = block[1];
    }
    auto expert = optional<std::string>(j, "expert_dtype", c.fp8_weights ? "fp8" : "bf16");
    if (expert == "fp4") {
        c.expert_dtype = ExpertDtype::kFp4;
    } else if (expert == "fp8") {
        c.expert_dtype = ExpertDtype::kFp8;
    } else if (expert == "bf16" || expert == "bfloat16") {
        c.expert_dtype = ExpertDtype::kBf16;
    } else {
        fail("config.json: expert_dtype '{}' is not one of fp4, fp8, bf16", expert);
    }
    DSV4_CHECK(c.expert_dtype != ExpertDtype::kFp8 || c.fp8_weights,
               "config.json: expert_dtype fp8 needs a "
               "quantization_config");
}

void parse_drafters(const json& j, ModelConfig& c) {
    c.num_nextn_predict_layers = optional<int>(j, "num_nextn_predict_layers", 0);
    DSV4_CHECK(c.num_nextn_predict_layers >= 0, "config.json: num_nextn_predict_layers must be >= 0");
    if (!j.contains("dspark_block_size")) return;
    DsparkConfig d;
    d.block_size = required<int>(j, "dspark_block_size");
    d.markov_rank = required<int>(j, "dspark_markov_rank");
    d.noise_token_id = required<int64_t>(j, "dspark_noise_token_id");
    d.target_layer_ids = required<std::vector<int>>(j, "dspark_target_layer_ids");
    check_positive(d.block_size, "dspark_block_size");
    check_positive(d.markov_rank, "dspark_markov_rank");
    DSV4_CHECK(d.noise_token_id >= 0 && d.noise_token_id < c.vocab_size,
               "config.json: dspark_noise_token_id {} is "
               "outside the vocabulary",
               d.noise_token_id);
    DSV4_CHECK(!d.target_layer_ids.empty(), "config.json: dspark_target_layer_ids is empty");
    for (int id : d.target_layer_ids) {
        DSV4_CHECK(id >= 0 && id < c.num_layers, "config.json: dspark_target_layer_ids has {} (model has {} layers)",
                   id, c.num_layers);
    }
    c.dspark = d;
}

void validate(const ModelConfig& c) {
    DSV4_CHECK(c.rope_head_dim > 0 && c.rope_head_dim % 2 == 0 && c.rope_head_dim < c.head_dim,
               "config.json: qk_rope_head_dim {} must be even, positive and below head_dim {}", c.rope_head_dim,
               c.head_dim);
    DSV4_CHECK(c.num_heads % c.o_groups == 0, "config.json: num_attention_heads {} is not a multiple of o_groups {}",
               c.num_heads, c.o_groups);
    DSV4_CHECK(c.n_experts_per_tok <= c.n_routed_experts,
               "config.json: num_experts_per_tok {} exceeds "
               "n_routed_experts {}",
               c.n_experts_per_tok, c.n_routed_experts);
    DSV4_CHECK(c.n_shared_experts == 0 || c.n_shared_experts == 1,
               "config.json: n_shared_experts {} is not "
               "supported (0 or 1)",
               c.n_shared_experts);
    DSV4_CHECK(c.scoring_func == "sqrtsoftplus" || c.scoring_func == "sigmoid" || c.scoring_func == "softmax",
               "config.json: scoring_func '{}' is not one of sqrtsoftplus, sigmoid, softmax", c.scoring_func);
    DSV4_CHECK(c.hc_sinkhorn_iters >= 1, "config.json: hc_sinkhorn_iters must be >= 1");
    DSV4_CHECK(c.rms_norm_eps > 0 && c.hc_eps >= 0, "config.json: rms_norm_eps must be positive and hc_eps >= 0");
    if (c.expert_dtype == ExpertDtype::kFp4) {
        DSV4_CHECK(c.hidden_size % c.fp4_scale_block == 0 && c.moe_intermediate_size % c.fp4_scale_block == 0,
                   "config.json: FP4 experts need hidden_size {} and moe_intermediate_size {} to be multiples of {}",
                   c.hidden_size, c.moe_intermediate_size, c.fp4_scale_block);
    }
    bool has_csa = false;
    for (const auto& layer : c.layers) has_csa |= layer.attention == AttentionType::kCsa;
    if (has_csa) {
        check_positive(c.index_n_heads, "index_n_heads");
        check_positive(c.index_head_dim, "index_head_dim");
        check_positive(c.index_topk, "index_topk");
        DSV4_CHECK(c.rope_head_dim <= c.index_head_dim,
                   "config.json: index_head_dim {} is smaller than the rope dims "
                   "{}",
                   c.index_head_dim, c.rope_head_dim);
    }
}

}  // namespace

ModelConfig parse_model_config(const json& j) {
    DSV4_CHECK(j.is_object(), "config.json: top level is not a JSON object");
    ModelConfig c;
    c.model_type = optional<std::string>(j, "model_type", "");
    DSV4_CHECK(c.model_type == "deepseek_v4",
               "config.json: model_type '{}' is not supported (dsv4 serves "
               "deepseek_v4)",
               c.model_type);
    c.vocab_size = required<int64_t>(j, "vocab_size");
    c.hidden_size = required<int64_t>(j, "hidden_size");
    c.num_layers = required<int>(j, "num_hidden_layers");
    c.num_heads = required<int>(j, "num_attention_heads");
    c.head_dim = required<int>(j, "head_dim");
    c.q_lora_rank = required<int>(j, "q_lora_rank");
    c.o_groups = required<int>(j, "o_groups");
    c.o_lora_rank = required<int>(j, "o_lora_rank");
    c.sliding_window = required<int>(j, "sliding_window");
    int kv_heads = optional<int>(j, "num_key_value_heads", 1);
    DSV4_CHECK(kv_heads == 1, "config.json: num_key_value_heads {} is not supported (DeepSeek-V4 shares one K=V head)",
               kv_heads);
    c.index_n_heads = optional<int>(j, "index_n_heads", 0);
    c.index_head_dim = optional<int>(j, "index_head_dim", 0);
    c.index_topk = optional<int>(j, "index_topk", 0);
    c.n_routed_experts = required<int>(j, "n_routed_experts");
    c.n_experts_per_tok = required<int>(j, "num_experts_per_tok");
    c.n_shared_experts = optional<int>(j, "n_shared_experts", 1);
    c.moe_intermediate_size = required<int>(j, "moe_intermediate_size");
    c.scoring_func = optional<std::string>(j, "scoring_func", "sqrtsoftplus");
    auto topk_method = optional<std::string>(j, "topk_method", "noaux_tc");
    DSV4_CHECK(topk_method == "noaux_tc", "config.json: topk_method '{}' is not supported (noaux_tc)", topk_method);
    c.norm_topk_prob = optional<bool>(j, "norm_topk_prob", true);
    c.routed_scaling_factor = optional<double>(j, "routed_scaling_factor", 1.0);
    c.swiglu_limit = optional<double>(j, "swiglu_limit", 0.0);
    c.hc_mult = required<int>(j, "hc_mult");
    c.hc_sinkhorn_iters = optional<int>(j, "hc_sinkhorn_iters", 20);
    c.hc_eps = optional<double>(j, "hc_eps", 1e-6);
    c.rms_norm_eps = optional<double>(j, "rms_norm_eps", 1e-6);
    c.max_position_embeddings = optional<int64_t>(j, "max_position_embeddings", 1048576);
    c.bos_token_id = optional<int64_t>(j, "bos_token_id", 0);
    c.eos_token_id = optional<int64_t>(j, "eos_token_id", 1);
    DSV4_CHECK(!optional<bool>(j, "tie_word_embeddings", false), "config.json: tied embeddings are not DeepSeek-V4");

    for (auto [value, key] : {std::pair<int64_t, const char*>{c.vocab_size, "vocab_size"},
                              {c.hidden_size, "hidden_size"},
                              {c.num_layers, "num_hidden_layers"},
                              {c.num_heads, "num_attention_heads"},
                              {c.head_dim, "head_dim"},
                              {c.q_lora_rank, "q_lora_rank"},
                              {c.o_groups, "o_groups"},
                              {c.o_lora_rank, "o_lora_rank"},
                              {c.sliding_window, "sliding_window"},
                              {c.n_routed_experts, "n_routed_experts"},
                              {c.n_experts_per_tok, "num_experts_per_tok"},
                              {c.moe_intermediate_size, "moe_intermediate_size"},
                              {c.hc_mult, "hc_mult"},
                              {c.max_position_embeddings, "max_position_embeddings"}}) {
        check_positive(value, key);
    }
    parse_rope(j, c);
    parse_layer_schedule(j, c);
    parse_quantization(j, c);
    parse_drafters(j, c);
    validate(c);
    return c;
}

ModelConfig load_model_config(const std::filesystem::path& config_json) {
    std::ifstream in(config_json);
    DSV4_CHECK(in.good(), "cannot open {}", config_json.string());
    json j;
    try {
        in >> j;
    } catch (const json::exception& e) {
        fail("{}: not valid JSON ({})", config_json.string(), e.what());
    }
    try {
        return parse_model_config(j);
    } catch (const Error& e) {
        fail("{}: {}", config_json.string(), e.what());
    }
}

std::string_view attention_type_name(AttentionType type) {
    switch (type) {
        case AttentionType::kSliding:
            return "sliding";
        case AttentionType::kCsa:
            return "csa";
        case AttentionType::kHca:
            return "hca";
    }
    return "?";
}

}  // namespace dsv4
