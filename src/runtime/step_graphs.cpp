#include "runtime/step_graphs.h"

namespace dsv4 {

StepGraphs::StepGraphs(DeepseekV4& model, bool enforce_eager)
    : model_(model), runs_(enforce_eager ? nullptr : model.backend().graph_recorder()) {}

uint64_t StepGraphs::key_of(const StepBatch& batch, const ForwardRequest& request) const {
    if (!runs_.available() || !model_.graphable(static_cast<int64_t>(batch.tokens.size()))) return 0;
    const int32_t per_seq = batch.uniform_tokens_per_seq();
    if (per_seq == 0 || per_seq > kMaxGraphTokensPerSeq) return 0;  // mixed lengths or prefill chunks: eager
    uint64_t key = 0xcbf29ce484222325ull;
    key = mix_graph_key(key, static_cast<uint64_t>(batch.tokens.size()));
    key = mix_graph_key(key, batch.seqs.size());
    key = mix_graph_key(key, static_cast<uint64_t>(per_seq));
    key = mix_graph_key(key, batch.logit_rows.size());
    for (int layer : request.hidden_layers) key = mix_graph_key(key, static_cast<uint64_t>(layer) + 1);
    key = mix_graph_key(key, runs_.shape_key(batch));
    return key == 0 ? 1 : key;
}

ForwardResult StepGraphs::forward(const StepBatch& batch, const ForwardRequest& request) {
    model_.begin_step(batch);  // uploads the metadata a replay reads
    return runs_.run(key_of(batch, request), [&] { return model_.run(batch, request); });
}

}  // namespace dsv4
