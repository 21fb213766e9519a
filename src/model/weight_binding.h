// Weight binding: checks a Checkpoint against the exact tensor set the ModelConfig implies (tensor_spec.h) and maps
// every expected tensor (by its original DeepSeek name) to its bytes.
// Boundary: the model code asks BoundWeights for tensors by original name; it never sees file or HF names.
//
// - Every problem is reported at once: missing, unexpected and wrong (dtype / shape) tensors, grouped by name pattern
//   and truncated for huge lists (describe()).
// - Naming: checkpoints in DeepSeek's original names (as shipped), or renamed the HF transformers way
//   (model-spec 4.2 [HF-conv]: model.layers.N.self_attn.q_a_proj.weight, ...weight_scale_inv, embed_tokens, lm_head).
//   The naming is detected from the tensor names (model.embed_tokens.weight / lm_head.weight / model.layers.*).
//   MTP / DSpark tensors keep their original `mtp.*` names in both (HF drops them on load).
// - HF routed experts: stacked per layer (`mlp.experts.gate_up_proj` [E, 2I, D], `mlp.experts.down_proj`) are
//   detected and reported as unsupported (per-expert slicing of stacked tensors is not implemented yet); per-expert HF
//   names (`mlp.experts.E.gate_proj/up_proj/down_proj`) are accepted.
// - Draft stages are probed from the weights (`mtp.<i>.attn_norm.weight`): `e_proj` means original MTP, `main_proj`
//   DSpark (0731 keeps num_nextn_predict_layers = 1 while shipping 3 stages).
#pragma once

#include <cstddef>
#include <deque>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "config/model_config.h"
#include "loader/checkpoint.h"
#include "model/tensor_spec.h"

namespace dsv4 {

enum class CheckpointNaming : uint8_t { kOriginal, kHf };
std::string_view checkpoint_naming_name(CheckpointNaming naming);

// The HF transformers name of an original tensor name (is_scale: a UE8M0 `.scale` tensor -> `.weight_scale_inv`).
// Routed experts map to per-expert names (`model.layers.N.mlp.experts.E.gate_proj.weight`); `mtp.*` is unchanged.
std::string hf_tensor_name(std::string_view original, bool is_scale);

CheckpointNaming detect_checkpoint_naming(const Checkpoint& checkpoint);

// The name with every all-digit component (layer, expert, stage index) shown as '#':
// "layers.#.ffn.experts.#.w1.weight".
std::string tensor_name_pattern(std::string_view name);
DraftLayout probe_draft_layout(const ModelConfig& config, const Checkpoint& checkpoint);

struct BindingIssue {
    std::string name;    // as looked up in / found in the checkpoint
    std::string detail;  // e.g. "expected F8_E4M3 [512, 4096], got BF16 [512, 4096]"
};

struct BindingReport {
    CheckpointNaming naming = CheckpointNaming::kOriginal;
    DraftLayout drafts;
    size_t expected = 0;  // tensors the config implies (including drafts found)
    size_t matched = 0;
    std::vector<BindingIssue> missing;
    std::vector<BindingIssue> unexpected;
    std::vector<BindingIssue> wrong;
    std::vector<BindingIssue> unsupported;

    bool ok() const { return missing.empty() && unexpected.empty() && wrong.empty() && unsupported.empty(); }
    // One line summary, then each non-empty group: individual lines when short, else grouped by name pattern
    // (index components shown as '#', with a count and the first example), at most max_lines lines per group.
    std::string describe(size_t max_lines = 20) const;
};

class BoundWeights {
  public:
    CheckpointNaming naming = CheckpointNaming::kOriginal;
    DraftLayout drafts;
    std::vector<TensorSpec> specs;  // what was bound, in expected_tensors order
    // The dialect of the bound F8_E4M3 views: the checkpoint's (ModelConfig::fp8_dialect), or the backend's once
    // model/fp8_weights.h converted them.
    Fp8Dialect fp8_dialect = Fp8Dialect::kOcp;

    const TensorView* find(std::string_view original_name) const;
    const TensorView& get(std::string_view original_name) const;  // throws naming the tensor
    size_t size() const { return views_.size(); }

    // Points a bound tensor at new bytes of the same dtype and shape, owned here (the load-time dialect conversion).
    // Views handed out before stay valid (they still see the checkpoint's bytes); later lookups see the new ones.
    void replace_bytes(std::string_view original_name, std::vector<uint8_t> bytes);

  private:
    friend BindingReport validate_weights(const ModelConfig&, const Checkpoint&, BoundWeights*);
    struct OwnedTensor {
        std::vector<uint8_t> bytes;
        std::vector<int64_t> shape;
        TensorView view;
    };
    std::map<std::string, const TensorView*, std::less<>> views_;
    std::deque<OwnedTensor> owned_;  // a deque: elements never move, so views_ may point into it
};

// Checks everything and returns the report; fills *bound (when given) with the tensors that matched.
BindingReport validate_weights(const ModelConfig& config, const Checkpoint& checkpoint, BoundWeights* bound = nullptr);

// validate_weights, then throws dsv4::Error with report.describe() unless everything matched.
BoundWeights bind_weights(const ModelConfig& config, const Checkpoint& checkpoint);

}  // namespace dsv4
