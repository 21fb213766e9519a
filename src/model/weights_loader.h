// Binds the checkpoint's tensors (original DeepSeek names) to the per-layer weight structs and uploads them to a
// backend in their checkpoint form. Shapes and dtypes are checked against the config as each tensor is bound.
#pragma once

#include "backend/backend.h"
#include "backend/weights.h"
#include "loader/checkpoint.h"
#include "model/model_config.h"

namespace dsv4 {

ModelWeights load_model_weights(const ModelConfig& config, const Checkpoint& checkpoint, Backend& backend);

}  // namespace dsv4
