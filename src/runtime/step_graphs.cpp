#include "runtime/step_graphs.h"

#include <vector>

namespace dsv4 {

StepGraphs::StepGraphs(DeepseekV4& model, bool enforce_eager)
    : model_(model), runs_(enforce_eager ? nullptr : model.backend().graph_recorder()) {}

uint64_t StepGraphs::key_of(const StepBatch& batch, const ForwardRequest& request) const {
    if (!model_.graphable(batch.n_tokens())) return 0;
    std::vector<uint64_t> layers;  // the hidden layers asked for
    for (int layer : request.hidden_layers) layers.push_back(static_cast<uint64_t>(layer) + 1);
    return runs_.key(0xcbf29ce484222325ull, batch, layers);
}

ForwardResult StepGraphs::forward(const StepBatch& batch, const ForwardRequest& request) {
    model_.begin_step(batch);  // uploads the metadata a replay reads
    return runs_.run(key_of(batch, request), [&] { return model_.run(batch, request); });
}

}  // namespace dsv4
