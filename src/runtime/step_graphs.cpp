#include "runtime/step_graphs.h"

namespace dsv4 {

StepGraphs::StepGraphs(DeepseekV4& model, bool enforce_eager)
    : model_(model), runs_(enforce_eager ? nullptr : model.backend().graph_recorder()) {}

uint64_t StepGraphs::key_of(const StepBatch& batch, const ForwardRequest& request) const {
    if (!model_.graphable(batch.n_tokens())) return 0;
    uint64_t layers = 0;  // the hidden layers asked for, mixed into one field (no allocation a step)
    for (int layer : request.hidden_layers) layers = mix_graph_key(layers, static_cast<uint64_t>(layer) + 1);
    const uint64_t extra[] = {layers};
    return runs_.key(0xcbf29ce484222325ull, batch, extra);
}

ForwardResult StepGraphs::forward(const StepBatch& batch, const ForwardRequest& request) {
    model_.begin_step(batch);  // uploads the metadata a replay reads
    return runs_.run(key_of(batch, request), [&] { return model_.run(batch, request); });
}

}  // namespace dsv4
