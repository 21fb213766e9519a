// ModelConfig: everything the engine needs to know about a DeepSeek-V4-class model, parsed once from config.json
// (DeepSeek-style keys, or HF-style keys) and then immutable. Nothing in dsv4 hard-codes the Flash shapes: every size,
// count and ratio comes from here. See ../shared/docs/model-spec.md sections 1 and 2.
#pragma once

#include <cstdint>
#include <filesystem>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/fp8_dialect.h"

namespace dsv4 {

// quantization_config.fmt values: the dialect of a checkpoint's FP8 weights. "e4m3" is what DeepSeek ships (OCP);
// "e4m3_fnuz" is written by `dsv4 convert-checkpoint --fp8 fnuz`. The torch spellings "e4m3fn" / "e4m3fnuz" are read
// too.
inline constexpr const char* kFp8FmtOcp = "e4m3";
inline constexpr const char* kFp8FmtFnuz = "e4m3_fnuz";
// The fmt value written for a dialect.
inline const char* fp8_fmt_name(Fp8Dialect dialect) {
    return dialect == Fp8Dialect::kFnuz ? kFp8FmtFnuz : kFp8FmtOcp;
}

enum class AttentionType : uint8_t {
    kSliding,  // compress ratio 0: sliding window only
    kCsa,      // compressed sparse attention: overlapping compressor (ratio 4) + lightning indexer top-k
    kHca,      // heavily compressed attention: non-overlapping compressor (ratio 128), all entries attended
};

enum class RoutingType : uint8_t {
    kHash,     // expert selection from the tid2eid table
    kLearned,  // top-k of sqrtsoftplus(gate logits) + bias
};

enum class ExpertDtype : uint8_t { kFp4, kFp8, kBf16 };

// YaRN frequency blend (no magnitude scaling: model-spec 2.4).
struct YarnParams {
    double factor = 16.0;
    int64_t original_max_position_embeddings = 65536;
    double beta_fast = 32.0;
    double beta_slow = 1.0;
};

struct RopeParams {
    double theta = 10000.0;
    int rope_dim = 64;               // rotated (trailing) dims of each head
    std::optional<YarnParams> yarn;  // set on compressed (CSA/HCA) layers only
};

struct LayerConfig {
    AttentionType attention = AttentionType::kSliding;
    int compress_ratio = 0;  // 0, csa ratio (4) or hca ratio (128)
    RoutingType routing = RoutingType::kLearned;
    RopeParams rope;
};

// DSpark (0731) drafter settings; absent on the original V4-Flash.
struct DsparkConfig {
    int block_size = 5;
    int markov_rank = 256;
    int64_t noise_token_id = 128799;
    std::vector<int> target_layer_ids;  // e.g. {40, 41, 42}
};

struct ModelConfig {
    std::string model_type;  // "deepseek_v4"
    int64_t vocab_size = 0;
    int64_t hidden_size = 0;
    int num_layers = 0;
    int num_heads = 0;
    int head_dim = 0;
    int rope_head_dim = 0;  // qk_rope_head_dim
    int q_lora_rank = 0;
    int o_groups = 0;
    int o_lora_rank = 0;
    int sliding_window = 0;

    int index_n_heads = 0;
    int index_head_dim = 0;
    int index_topk = 0;

    int n_routed_experts = 0;
    int n_experts_per_tok = 0;
    int n_shared_experts = 0;
    int moe_intermediate_size = 0;
    int num_hash_layers = 0;
    std::string scoring_func = "sqrtsoftplus";
    bool norm_topk_prob = true;
    double routed_scaling_factor = 1.0;
    double swiglu_limit = 0.0;  // 0 = no clamp

    int hc_mult = 0;
    int hc_sinkhorn_iters = 0;
    double hc_eps = 1e-6;
    double rms_norm_eps = 1e-6;

    double rope_theta = 10000.0;
    double compress_rope_theta = 160000.0;
    std::optional<YarnParams> yarn;  // from rope_scaling / rope_parameters.compress
    int64_t max_position_embeddings = 0;
    int csa_ratio = 4;
    int hca_ratio = 128;

    // Quantization of the checkpoint as shipped.
    bool fp8_weights = true;  // quantization_config.quant_method == "fp8"
    // The dialect of the checkpoint's F8_E4M3 bytes (safetensors has no FNUZ dtype): quantization_config.fmt.
    Fp8Dialect fp8_dialect = Fp8Dialect::kOcp;
    int weight_block_rows = 128;  // quantization_config.weight_block_size
    int weight_block_cols = 128;
    ExpertDtype expert_dtype = ExpertDtype::kFp4;
    int fp4_scale_block = 32;  // per-row scale every 32 input elements

    int64_t bos_token_id = 0;
    int64_t eos_token_id = 1;

    // Drafters. num_nextn_predict_layers is the raw config value; the stage count is probed from the weights
    // (mtp.<i>.attn_norm.weight) by the binder because 0731 keeps the raw value 1 while shipping 3 stages.
    int num_nextn_predict_layers = 0;
    std::optional<DsparkConfig> dspark;

    std::vector<LayerConfig> layers;  // num_layers entries, derived

    int q_heads_per_group() const { return num_heads / o_groups; }
    int nope_head_dim() const { return head_dim - rope_head_dim; }
};

// Parses a config.json document. Throws dsv4::Error naming the offending key on unsupported model_type,
// missing or inconsistent fields.
ModelConfig parse_model_config(const nlohmann::json& config);
ModelConfig load_model_config(const std::filesystem::path& config_json);

std::string_view attention_type_name(AttentionType type);

}  // namespace dsv4
