// The exact set of tensors a DeepSeek-V4 checkpoint holds for a given ModelConfig (original DeepSeek names,
// model-spec 4.2 and 3.x), with dtype, stored shape and the component each belongs to. Used to validate a
// checkpoint, to count parameters and bytes (`dsv4 inspect`) and to build synthetic checkpoints.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "config/model_config.h"
#include "core/dtype.h"

namespace dsv4 {

enum class Component : uint8_t {
    kEmbedding,
    kHead,
    kAttention,   // wq_a, q_norm, wq_b, wkv, kv_norm, wo_a, wo_b, attn_sink, attn_norm
    kCompressor,  // main KV compressor of CSA / HCA layers
    kIndexer,     // lightning indexer (its wq_b, weights_proj and its own compressor)
    kRoutedExperts,
    kSharedExperts,
    kRouter,  // gate weight, bias, tid2eid
    kMhc,     // hyper-connection fn/base/scale (incl. hc_head)
    kNorms,   // ffn_norm, final norm
    kDraft,   // MTP (original V4) or DSpark (0731) stages
};

std::string_view component_name(Component c);

struct TensorSpec {
    std::string name;
    DType dtype;
    std::vector<int64_t> shape;  // as stored (FP4 weights: I8 [out, in/2])
    Component component;
    int64_t params = 0;     // logical parameter count (0 for scale tensors and lookup tables)
    bool is_scale = false;  // a UE8M0 scale tensor (counts bytes, not parameters)
};

// Draft stages present in the checkpoint: MTP (original V4, `e_proj`/`h_proj`) or DSpark (0731, `main_proj`...).
enum class DraftKind : uint8_t { kNone, kMtp, kDspark };

struct DraftLayout {
    DraftKind kind = DraftKind::kNone;
    int stages = 0;
};

// DSpark (-0731) ships three draft stages run in sequence (model-spec.md section 3; its config.json names no count).
inline constexpr int kDsparkStages = 3;
// MTP ships one stage, run recursively for k drafts.
inline constexpr int kMtpStages = 1;
inline constexpr DraftLayout kDsparkLayout{DraftKind::kDspark, kDsparkStages};
inline constexpr DraftLayout kMtpLayout{DraftKind::kMtp, kMtpStages};

// A draft stage's block: sliding window only, learned routing, the main RoPE (rope_theta, no YaRN).
LayerConfig draft_layer_config(const ModelConfig& config);

// The configuration the sequence state is created from when drafters run: the model's layers followed by `stages`
// draft-stage layers (draft_layer_config), so that state layer num_layers + s is draft stage s's own K=V ring in
// every slot (reset, forked, snapshotted and rewound with the target's state). The model itself keeps `config`.
ModelConfig config_with_draft_state(const ModelConfig& config, int stages);

// Every tensor of the backbone plus the given draft stages.
std::vector<TensorSpec> expected_tensors(const ModelConfig& config, const DraftLayout& drafts = {});

// Tensors of one backbone-style block (attention + MoE + mHC) under `prefix` ("layers.3." or "mtp.0.").
void append_block_tensors(const ModelConfig& config, const std::string& prefix, const LayerConfig& layer,
                          Component attention_component, std::vector<TensorSpec>& out);

}  // namespace dsv4
