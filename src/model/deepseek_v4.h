// DeepseekV4: the forward pass of DeepSeek-V4 (model-spec section 2), written once against the Backend interface.
// One call runs one step over every token of a StepBatch (prefill chunks and decode tokens of many sequences
// together) and returns the logits of the rows the batch asks for.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/weights.h"
#include "model/model_config.h"

namespace dsv4 {

class DeepseekV4 {
  public:
    DeepseekV4(ModelConfig config, ModelWeights weights, Backend& backend);

    const ModelConfig& config() const { return config_; }
    Backend& backend() { return backend_; }

    // Runs the step; returns float32 logits [batch.logit_rows.size(), vocab] on the host.
    std::vector<float> forward(const StepBatch& batch);

    // Decode steps (every sequence feeding one token) run as recorded graphs where the backend supports them: the
    // first step of a shape runs eagerly (warm-up), the second records, later ones replay.
    bool use_graphs = true;

    // Called with named intermediates ("layer3" streams, "attn3" / "moe3" sub-layer outputs) when set; for
    // debugging and layer-by-layer comparisons with a reference.
    std::function<void(const std::string& name, const Tensor& value)> debug_hook;

  private:
    // The device work of a step (layers + head); returns the logits tensor [rows, vocab].
    Tensor run(const StepBatch& batch);
    void attention_site(int layer, Tensor streams);
    void ffn_site(int layer, Tensor streams);
    // x [N, D] (normed sub-layer input) -> attention output [N, D].
    Tensor attention(int layer, const Tensor& x);
    Tensor indexer(int layer, const Tensor& x, const Tensor& q_residual);

    ModelConfig config_;
    ModelWeights weights_;
    Backend& backend_;
    std::set<uint64_t> warmed_graph_keys_;
    std::map<uint64_t, Tensor> graph_outputs_;
};

}  // namespace dsv4
