#include "runtime/step_graphs.h"

namespace dsv4 {
namespace {

uint64_t mix(uint64_t h, uint64_t v) {
    return (h ^ v) * 0x100000001b3ull + (h >> 29);
}

}  // namespace

StepGraphs::StepGraphs(DeepseekV4& model, bool enforce_eager)
    : model_(model), recorder_(enforce_eager ? nullptr : model.backend().graph_recorder()) {}

uint64_t StepGraphs::key_of(const StepBatch& batch, const ForwardRequest& request) const {
    if (recorder_ == nullptr || !recorder_->graphs_available() || model_.debug_hook) return 0;
    // A MoE dispatcher that reads each layer's routing on the host (expert parallelism, the expert tier's planned
    // steps) runs eagerly; the tier's in-place steps are device work only.
    const MoeDispatch* dispatch = model_.moe_dispatch();
    if (dispatch != nullptr && !dispatch->device_only(static_cast<int64_t>(batch.tokens.size()))) return 0;
    const int32_t per_seq = batch.uniform_tokens_per_seq();
    if (per_seq == 0 || per_seq > kMaxGraphTokensPerSeq) return 0;  // mixed lengths or prefill chunks: eager
    uint64_t key = 0xcbf29ce484222325ull;
    key = mix(key, static_cast<uint64_t>(batch.tokens.size()));
    key = mix(key, batch.seqs.size());
    key = mix(key, static_cast<uint64_t>(per_seq));
    key = mix(key, batch.logit_rows.size());
    for (int layer : request.hidden_layers) key = mix(key, static_cast<uint64_t>(layer) + 1);
    key = mix(key, recorder_->shape_key(batch));
    return key == 0 ? 1 : key;
}

ForwardResult StepGraphs::forward(const StepBatch& batch, const ForwardRequest& request) {
    model_.begin_step(batch);  // uploads the metadata a replay reads
    const uint64_t key = key_of(batch, request);
    if (key == 0) return model_.run(batch, request);
    if (auto it = recorded_.find(key); it != recorded_.end()) {
        recorder_->replay(key);
        ++replays_;
        return it->second;
    }
    if (warmed_.count(key) == 0) {
        warmed_.insert(key);
        return model_.run(batch, request);
    }
    recorder_->begin_capture();
    ForwardResult result = model_.run(batch, request);  // recorded, not run
    recorder_->end_capture(key);
    recorded_[key] = result;
    recorder_->replay(key);
    ++replays_;
    return result;
}

}  // namespace dsv4
