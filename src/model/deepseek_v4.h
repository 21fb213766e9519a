// DeepseekV4: the forward pass of DeepSeek-V4 (model-spec section 2), written once against the Backend interface.
// One call runs one step over every token of a StepBatch (prefill chunks and decode tokens of many sequences
// together) and returns, in backend memory, the logits of the rows the batch asks for and the hidden states the
// caller asked for. Execution policy (CUDA graphs) is the runner's: runtime/step_graphs.h.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/weights.h"
#include "config/model_config.h"
#include "model/moe_dispatch.h"

namespace dsv4 {

// What a caller wants from a step besides the logits of batch.logit_rows.
struct ForwardRequest {
    // Layers whose output residual streams [N, hc, D] (every step token) are handed back, in this order (MTP drafts
    // from the last layer's streams, DSpark from the outputs of its target layers). Each in [0, num_layers).
    std::vector<int> hidden_layers;
};

// A step's results in backend memory, valid until the next begin_step.
struct ForwardResult {
    Tensor logits;               // [batch.logit_rows.size(), vocab] float32
    std::vector<Tensor> hidden;  // per ForwardRequest::hidden_layers: [N, hc, D] float32
};

class DeepseekV4 {
  public:
    DeepseekV4(ModelConfig config, ModelWeights weights, Backend& backend);

    const ModelConfig& config() const { return config_; }
    // The weights as bound on the backend (drafters share the embedding and the head).
    const ModelWeights& weights() const { return weights_; }
    Backend& backend() { return backend_; }
    // Replaces this device's copy of a routed expert (expert placement between steps: src/dist/eplb_controller.h);
    // an empty ExpertWeights drops it. Never during a step.
    void set_routed_expert(int layer, int expert, const ExpertWeights& weights);

    // Uploads the step's metadata; releases the previous step's scratch (and results).
    void begin_step(const StepBatch& batch);
    // The device work of a step (layers + head), after begin_step: what a graph records.
    ForwardResult run(const StepBatch& batch, const ForwardRequest& request = {});
    // begin_step + run, eagerly.
    ForwardResult forward(const StepBatch& batch, const ForwardRequest& request = {});
    // A result's logits on the host, [rows * vocab] (synchronizes).
    std::vector<float> host_logits(const ForwardResult& result);
    // forward + host_logits: the eager path of tools and tests.
    std::vector<float> logits(const StepBatch& batch) { return host_logits(forward(batch)); }

    // Routes the MoE sub-layers through a dispatcher (expert parallelism); null (the default) calls the backend's
    // moe op. Not owned; must outlive the model's steps.
    void set_moe_dispatch(MoeDispatch* dispatch) { moe_dispatch_ = dispatch; }
    MoeDispatch* moe_dispatch() const { return moe_dispatch_; }
    // Whether a step (or substep) of `tokens` tokens may be recorded in a graph: no debug hook (it reads
    // intermediates on the host), and no MoE dispatcher that reads each layer's routing on the host (expert
    // parallelism, the expert tier's planned steps; the tier's in-place steps are device work only).
    bool graphable(int64_t tokens) const {
        return !debug_hook && (moe_dispatch_ == nullptr || moe_dispatch_->device_only(tokens));
    }

    // How a draft stage's block attends (spec/): kCausal as a backbone sliding-window layer (MTP); kDraftBlock
    // bidirectionally inside each sequence's step tokens plus the ring rows of the window before them (DSpark:
    // ModelOps::block_attention).
    enum class BlockAttention : uint8_t { kCausal, kDraftBlock };
    // One draft-stage block (a sliding-window layer's arithmetic: mHC, attention, MoE) on `streams` [N, hc, D] of the
    // current step, in place; its K=V ring is sequence-state layer `state_layer` (config_with_draft_state). kCausal
    // writes the step's rows into that ring; kDraftBlock only reads it.
    void draft_block(const LayerWeights& w, int state_layer, Tensor streams, BlockAttention mode);

    // Called with named intermediates ("layer3" streams, "attn3" / "moe3" sub-layer outputs) when set; for
    // debugging and layer-by-layer comparisons with a reference.
    std::function<void(const std::string& name, const Tensor& value)> debug_hook;

  private:
    // A block's weights, its layer config and the state layer its attention reads and writes.
    struct BlockRef {
        const LayerWeights& w;
        const LayerConfig& lc;
        int state_layer;
        BlockAttention mode = BlockAttention::kCausal;
    };
    // A site's hc_post waits for the next site, which applies it in the same op as its own hc_pre
    // (ModelOps::hc_post_pre): the sub-layer output y and two post / comb pairs used in turn.
    struct SiteCarry {
        Tensor y;  // [N, D]: every site's sub-layer output
        Tensor post[2], comb[2];
        int next = 0;          // the pair the next site writes
        bool pending = false;  // y, post[next ^ 1], comb[next ^ 1] are not applied to the streams yet
    };
    SiteCarry site_carry(int64_t n);
    // The pending hc_post, applied (before anything reads the streams).
    void apply_pending(SiteCarry& carry, Tensor streams);
    // hc_post of the pending site (if any) and hc_pre + norm of this one: u is the sub-layer's input.
    void enter_site(SiteCarry& carry, Tensor streams, const MhcWeights& mhc, const VecRef& norm, Tensor u);

    BlockRef backbone(int layer) const { return {weights_.layers[layer], config_.layers[layer], layer}; }
    void attention_site(const BlockRef& block, Tensor streams, SiteCarry& carry);
    void ffn_site(const BlockRef& block, Tensor streams, SiteCarry& carry);
    // x [N, D] (normed sub-layer input) -> attention output y [N, D].
    void attention(const BlockRef& block, const Tensor& x, Tensor y);
    // The layer's top-k compressed entries per token [N, index_topk] from the sub-layer input x and the query's
    // low-rank residual, after its indexer compressor has run (attention() issues the compressors first).
    Tensor indexer(const BlockRef& block, const Tensor& x, const Tensor& q_residual);

    ModelConfig config_;
    ModelWeights weights_;
    Backend& backend_;
    MoeDispatch* moe_dispatch_ = nullptr;
};

}  // namespace dsv4
