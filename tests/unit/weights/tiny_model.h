// A tiny DeepSeek-V4 config (every layer type, hash + learned routing, FP8 + FP4) and a writer for a checkpoint
// holding exactly its expected tensors (zero bytes), optionally renamed the HF way.
#pragma once

#include <filesystem>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "config/model_config.h"
#include "model/tensor_spec.h"
#include "st_writer.h"

namespace dsv4::test {

inline nlohmann::json tiny_config_json() {
    return nlohmann::json::parse(R"({
        "model_type": "deepseek_v4", "vocab_size": 512, "hidden_size": 256, "num_hidden_layers": 4,
        "num_attention_heads": 4, "num_key_value_heads": 1, "head_dim": 64, "qk_rope_head_dim": 16,
        "q_lora_rank": 128, "o_groups": 2, "o_lora_rank": 64, "sliding_window": 32,
        "compress_ratios": [0, 4, 128, 4, 0], "index_n_heads": 2, "index_head_dim": 32, "index_topk": 8,
        "n_routed_experts": 4, "num_experts_per_tok": 2, "n_shared_experts": 1, "moe_intermediate_size": 128,
        "num_hash_layers": 1, "hc_mult": 2, "num_nextn_predict_layers": 1, "expert_dtype": "fp4",
        "quantization_config": {"quant_method": "fp8", "fmt": "e4m3", "scale_fmt": "ue8m0",
                                "weight_block_size": [128, 128]}})");
}

inline TestTensor zero_tensor(const std::string& name, DType dtype, const std::vector<int64_t>& shape) {
    size_t numel = 1;
    for (int64_t d : shape) numel *= static_cast<size_t>(d);
    return TestTensor{name, std::string(dtype_name(dtype)), shape, std::vector<uint8_t>(numel * dtype_bits(dtype) / 8)};
}

// Writes the specs as a two-shard checkpoint; rename maps a spec to its file name ("" drops it).
inline void write_checkpoint(const std::filesystem::path& dir, const std::vector<TensorSpec>& specs,
                             const std::function<std::string(const TensorSpec&)>& rename,
                             const std::vector<TestTensor>& extra = {}) {
    std::map<std::string, std::vector<TestTensor>> shards;
    size_t i = 0;
    for (const auto& spec : specs) {
        std::string name = rename(spec);
        if (name.empty()) continue;
        shards[i++ % 2 == 0 ? "model-00001-of-00002.safetensors" : "model-00002-of-00002.safetensors"].push_back(
            zero_tensor(name, spec.dtype, spec.shape));
    }
    for (const auto& t : extra) shards["model-00002-of-00002.safetensors"].push_back(t);
    write_sharded_checkpoint(dir, shards);
}

}  // namespace dsv4::test
